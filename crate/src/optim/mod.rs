//! The optimizer on the host side: its settings, its state buffers (f32
//! or bf16 moments, or block-wise state: int8, int8-linear, fp8 or int4),
//! and the step's dispatches over the parameter chunks: Σg² per chunk →
//! one finalize (norm, clip, skip) → one fused AdamW update per chunk. The
//! count depends on the model's size in bindings, never on its number of
//! tensors. With Muon, the hidden matrices take Muon's dispatches
//! (optim/muon.rs) instead, their momentum in m at their own offsets;
//! AdamW keeps the embeddings, head and gains.

mod convert;
pub mod loss_scale;
pub mod muon;
pub mod schedule;

pub use loss_scale::{LossScale, LossScaler, LossScaling};
pub use schedule::LrSchedule;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::gpu::BufferRange;
use crate::gpu::{Dispatch, Gpu};
use crate::kernels::optimizer::{bf16_state_bytes, partials_for};
use crate::kernels::{Adam8bitBuffers, AdamBuffers, AdamHyper, GradStats, Kernels};
use crate::model::layout::CHUNK_ALIGN;
use crate::model::{Chunk, MasterStorage, Mirror, Model, Params, f16_range, f32_range};
pub use crate::ops::adam::ByteCode;
use crate::ops::muon::MuonHyper;
use muon::Muon;

/// How AdamW keeps its moments (and Muon its momentum).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OptimState {
    Fp32,
    /// bf16 values, to nearest even (DeepSeek-V3's moments).
    Bf16,
    /// E4M3 bytes in blocks of 256, TorchAO's FP8 state.
    Fp8,
    /// Dynamic-tree bytes in blocks of 256, rounded stochastically.
    Int8,
    /// TorchAO's 4-bit state: nibbles in blocks of 128, to nearest.
    Int4,
    /// 8-bit Muon's linear absmax code for m (Muon's momentum, AdamW's
    /// first moment), to nearest; v as `Int8`. Blocks of 256.
    #[serde(rename = "int8-linear")]
    Int8Linear,
}

impl OptimState {
    pub const ALL: [OptimState; 6] = [
        OptimState::Fp32,
        OptimState::Bf16,
        OptimState::Fp8,
        OptimState::Int8,
        OptimState::Int8Linear,
        OptimState::Int4,
    ];

    pub fn parse(name: &str) -> Result<OptimState> {
        Self::ALL
            .into_iter()
            .find(|s| s.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(OptimState::name).collect();
                Error::Unsupported(format!(
                    "unknown optimizer state {name:?}: use {}",
                    names.join(", ")
                ))
            })
    }

    pub fn name(&self) -> &'static str {
        match self {
            OptimState::Fp32 => "fp32",
            OptimState::Bf16 => "bf16",
            OptimState::Fp8 => "fp8",
            OptimState::Int8 => "int8",
            OptimState::Int4 => "int4",
            OptimState::Int8Linear => "int8-linear",
        }
    }

    /// What the codes of block-wise state stand for; None for fp32 and bf16.
    pub fn byte_code(&self) -> Option<ByteCode> {
        match self {
            OptimState::Fp32 | OptimState::Bf16 => None,
            OptimState::Fp8 => Some(ByteCode::E4m3),
            OptimState::Int8 => Some(ByteCode::Dynamic),
            OptimState::Int4 => Some(ByteCode::Int4),
            OptimState::Int8Linear => Some(ByteCode::Linear),
        }
    }

    /// Bytes of m and v for `n` parameters.
    pub fn bytes(&self, n: u64) -> u64 {
        match self {
            OptimState::Fp32 => 8 * n,
            OptimState::Bf16 => 2 * bf16_state_bytes(n),
            // a code of m and v, and one f32 scale per block of each
            OptimState::Fp8 | OptimState::Int8 | OptimState::Int8Linear | OptimState::Int4 => {
                let code = self.byte_code().expect("block-wise state");
                2 * (code.code_bytes(n) + code.scale_bytes(n))
            }
        }
    }
}

/// What the master weights are after each update.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum MasterWeights {
    /// f32, as computed.
    #[default]
    #[serde(rename = "f32")]
    F32,
    /// bf16 values, rounded stochastically from the f32 update (TorchAO's
    /// `bf16_stochastic_round`): no f32 copy carries what bf16 drops.
    #[serde(rename = "bf16-sr")]
    Bf16Sr,
}

impl MasterWeights {
    pub const ALL: [MasterWeights; 2] = [MasterWeights::F32, MasterWeights::Bf16Sr];

    pub fn parse(name: &str) -> Result<MasterWeights> {
        Self::ALL
            .into_iter()
            .find(|m| m.name() == name)
            .ok_or_else(|| {
                Error::Unsupported(format!(
                    "unknown master weights {name:?}: use f32 or bf16-sr"
                ))
            })
    }

    pub fn name(&self) -> &'static str {
        match self {
            MasterWeights::F32 => "f32",
            MasterWeights::Bf16Sr => "bf16-sr",
        }
    }

    fn is_f32(&self) -> bool {
        *self == MasterWeights::F32
    }

    /// How the GPU holds them: bf16-sr's as bf16, 2 bytes a weight.
    pub fn storage(self) -> MasterStorage {
        match self {
            MasterWeights::F32 => MasterStorage::F32,
            MasterWeights::Bf16Sr => MasterStorage::Bf16,
        }
    }
}

/// Which rule updates the hidden matrices.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OptimizerKind {
    /// AdamW for every parameter.
    #[default]
    Adamw,
    /// Muon for the hidden 2-D matrices, AdamW for the rest.
    Muon,
}

impl OptimizerKind {
    pub const ALL: [OptimizerKind; 2] = [OptimizerKind::Adamw, OptimizerKind::Muon];

    pub fn parse(name: &str) -> Result<OptimizerKind> {
        match name {
            "adamw" => Ok(OptimizerKind::Adamw),
            "muon" => Ok(OptimizerKind::Muon),
            _ => Err(Error::Unsupported(format!(
                "unknown optimizer {name:?}: use adamw or muon"
            ))),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            OptimizerKind::Adamw => "adamw",
            OptimizerKind::Muon => "muon",
        }
    }
}

/// Muon's Nesterov momentum μ (torch.optim.Muon's default).
const MUON_MOMENTUM: f64 = 0.95;

fn muon_momentum() -> f64 {
    MUON_MOMENTUM
}

/// The optimizer's settings, torch.optim.AdamW's names (and Muon's
/// momentum). Settings written before Muon read as AdamW.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct OptimConfig {
    #[serde(default)]
    pub optimizer: OptimizerKind,
    pub state: OptimState,
    pub schedule: LrSchedule,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
    /// Global gradient-norm clip; ≤ 0 never clips.
    pub max_grad_norm: f32,
    /// Muon's μ; its learning rate and weight decay are AdamW's (the
    /// update is scaled to AdamW's RMS, `ops::muon::update_scale`).
    #[serde(default = "muon_momentum")]
    pub momentum: f64,
    /// Absent (f32) in configs written before it, and left out when f32.
    #[serde(default, skip_serializing_if = "MasterWeights::is_f32")]
    pub master: MasterWeights,
}

impl Default for OptimConfig {
    /// The usual small-LM settings (nanoGPT's, the seed system's).
    fn default() -> Self {
        OptimConfig {
            optimizer: OptimizerKind::Adamw,
            state: OptimState::Fp32,
            schedule: LrSchedule::constant(1e-3),
            beta1: 0.9,
            beta2: 0.95,
            eps: 1e-8,
            weight_decay: 0.1,
            max_grad_norm: 1.0,
            momentum: MUON_MOMENTUM,
            master: MasterWeights::F32,
        }
    }
}

impl OptimConfig {
    /// The hyperparameters of step `t` (from 1): the schedule's rate.
    pub fn hyper(&self, t: u32) -> AdamHyper {
        AdamHyper {
            lr: self.schedule.lr(t),
            beta1: self.beta1,
            beta2: self.beta2,
            eps: self.eps,
            weight_decay: self.weight_decay,
        }
    }

    /// Muon's hyperparameters of step `t`.
    pub fn muon_hyper(&self, t: u32) -> MuonHyper {
        MuonHyper {
            lr: self.schedule.lr(t),
            momentum: self.momentum,
            weight_decay: self.weight_decay,
        }
    }
}

/// The moments: f32 at the parameters' offsets, bf16 (byte `2s` for
/// element `s`), or block-wise codes (byte `s`, or nibble `s` for int4)
/// with one f32 scale per block (`ByteCode::scale_bytes`).
pub enum StateBuffers {
    Fp32 {
        m: wgpu::Buffer,
        v: wgpu::Buffer,
    },
    Bf16 {
        m: wgpu::Buffer,
        v: wgpu::Buffer,
    },
    Bytes {
        code: ByteCode,
        m_codes: wgpu::Buffer,
        v_codes: wgpu::Buffer,
        m_scales: wgpu::Buffer,
        v_scales: wgpu::Buffer,
    },
}

/// The moments on the host, byte for byte as `StateBuffers` holds them
/// (checkpoints read and restore them whole).
#[derive(Clone, Debug, PartialEq)]
pub enum HostState {
    Fp32 {
        m: Vec<f32>,
        v: Vec<f32>,
    },
    /// bf16 bits.
    Bf16 {
        m: Vec<u16>,
        v: Vec<u16>,
    },
    Bytes {
        code: ByteCode,
        m_codes: Vec<u8>,
        v_codes: Vec<u8>,
        m_scales: Vec<f32>,
        v_scales: Vec<f32>,
    },
}

/// The optimizer of one model (AdamW, and Muon where the config says):
/// state, the step's uniforms, and the dispatches (AdamW's, and Muon's
/// where it takes the hidden matrices).
pub struct Optimizer {
    pub config: OptimConfig,
    pub state: StateBuffers,
    /// Every gradient, in binding-sized chunks: the norm reads them all.
    pub chunks: Vec<Chunk>,
    /// What AdamW updates: every chunk, or all but Muon's matrices.
    adam_chunks: Vec<Chunk>,
    pub muon: Option<Muon>,
    /// Parameters (the model's layout total).
    total: u64,
    /// bf16-sr master weights: their rounding's seed (the run's).
    sr_seed: Option<u32>,
    pub stats: wgpu::Buffer, // GradStats of the last step
    partials: wgpu::Buffer,  // [Σ partials_for(chunk)] (Σg², non-finite)
    step: wgpu::Buffer,      // AdamStep uniform, rewritten per step
    /// reduce per chunk, finalize, update per chunk
    pub dispatches: Vec<Dispatch>,
}

impl Optimizer {
    /// With `scaler`, the gradients carry its scale (`Model::scale_loss`);
    /// `seed` (the run's) seeds bf16-sr master weights' rounding.
    pub fn new(
        gpu: &Gpu,
        k: &Kernels,
        model: &Model,
        (config, seed): (OptimConfig, u64),
        scaler: Option<&LossScaler>,
    ) -> Result<Optimizer> {
        let sr_seed =
            (config.master == MasterWeights::Bf16Sr).then_some(seed as u32 ^ (seed >> 32) as u32);
        let chunks = model
            .layout
            .chunks(gpu.limits.max_storage_buffer_binding_size)?;
        let total = model.layout.total;
        let state = match config.state {
            OptimState::Fp32 => StateBuffers::Fp32 {
                m: gpu.storage_buffer("adam_m", 4 * total)?,
                v: gpu.storage_buffer("adam_v", 4 * total)?,
            },
            OptimState::Bf16 => StateBuffers::Bf16 {
                m: gpu.storage_buffer("adam_m_bf16", bf16_state_bytes(total))?,
                v: gpu.storage_buffer("adam_v_bf16", bf16_state_bytes(total))?,
            },
            OptimState::Fp8 | OptimState::Int8 | OptimState::Int8Linear | OptimState::Int4 => {
                let code = config.state.byte_code().expect("block-wise state");
                StateBuffers::Bytes {
                    code,
                    m_codes: gpu.storage_buffer("adam_m_codes", code.code_bytes(total))?,
                    v_codes: gpu.storage_buffer("adam_v_codes", code.code_bytes(total))?,
                    m_scales: gpu.storage_buffer("adam_m_scales", code.scale_bytes(total))?,
                    v_scales: gpu.storage_buffer("adam_v_scales", code.scale_bytes(total))?,
                }
            }
        };
        let count: u64 = chunks.iter().map(|c| partials_for(c.span.len)).sum();
        let partials = gpu.storage_buffer("grad_partials", 8 * count)?;
        let stats = gpu.storage_buffer("grad_stats", size_of::<GradStats>() as u64)?;
        let step = k.optim.step_buffer(gpu);
        let max_binding = gpu.limits.max_storage_buffer_binding_size;
        let (muon, adam_chunks) = match config.optimizer {
            OptimizerKind::Adamw => (None, chunks.clone()),
            OptimizerKind::Muon => {
                let muon = Muon::new(gpu, &model.config, &model.layout)?;
                let rest = model.layout.chunks_without(max_binding, muon.span)?;
                (Some(muon), rest)
            }
        };
        let mut optimizer = Optimizer {
            config,
            state,
            chunks,
            adam_chunks,
            muon,
            total,
            sr_seed,
            stats,
            partials,
            step,
            dispatches: vec![],
        };
        optimizer.dispatches = optimizer.build(gpu, k, model, count as u32, scaler)?;
        Ok(optimizer)
    }

    fn build(
        &self,
        gpu: &Gpu,
        k: &Kernels,
        model: &Model,
        partial_count: u32,
        scaler: Option<&LossScaler>,
    ) -> Result<Vec<Dispatch>> {
        let mut d = self.reduce_dispatches(gpu, k, &model.params)?;
        d.push(k.optim.finalize(
            gpu,
            (&self.partials).into(),
            partial_count,
            self.config.max_grad_norm,
            (&model.acts.loss).into(),
            (&self.stats).into(),
            scaler.map(|s| (&s.settings, (&s.state).into())),
        )?);
        if let Some(muon) = &self.muon {
            d.extend(muon.dispatches(
                gpu,
                k,
                &model.params,
                (&self.state, self.config.momentum),
                (&self.step, (&self.stats).into()),
            )?);
        }
        let hyper = self.config.hyper(1); // its β1, β2, ε; the step's rate comes with `write_step`
        for c in &self.adam_chunks {
            d.push(self.update_dispatch(gpu, k, &model.params, c, &hyper)?);
        }
        Ok(d)
    }

    /// Σg² of each chunk, into its own run of the partials.
    fn reduce_dispatches(&self, gpu: &Gpu, k: &Kernels, p: &Params) -> Result<Vec<Dispatch>> {
        let chunks: Vec<&Chunk> = self.chunks.iter().collect();
        sum_squares(gpu, k, &p.grads, &chunks, &self.partials)
    }

    /// One chunk's fused update, of the moments this AdamW keeps.
    fn update_dispatch(
        &self,
        gpu: &Gpu,
        k: &Kernels,
        p: &Params,
        c: &Chunk,
        hyper: &AdamHyper,
    ) -> Result<Dispatch> {
        let (start, len) = (c.span.start, c.span.len);
        let mirror = f16_mirror(p, start, len);
        let (weights, grads) = (p.master_range(start, len), f32_range(&p.grads, start, len));
        let (n, stats) = (len as u32, (&self.stats).into());
        match &self.state {
            StateBuffers::Fp32 { m, v } | StateBuffers::Bf16 { m, v } => {
                let bf16 = matches!(self.state, StateBuffers::Bf16 { .. });
                let range = if bf16 { bf16_range } else { f32_range };
                let b = AdamBuffers {
                    weights,
                    grads,
                    moment1: range(m, start, len),
                    moment2: range(v, start, len),
                    mirror,
                    bf16,
                    sr_seed: self.sr_seed,
                };
                k.optim
                    .update(gpu, hyper, c.decays, n, &self.step, stats, &b)
            }
            StateBuffers::Bytes {
                code,
                m_codes,
                v_codes,
                m_scales,
                v_scales,
            } => {
                let w = BlockWindow::new(*code, start, len);
                let b = Adam8bitBuffers {
                    code: *code,
                    weights: p.master_range(w.from, w.len),
                    grads: f32_range(&p.grads, w.from, w.len),
                    m_codes: w.codes(m_codes),
                    v_codes: w.codes(v_codes),
                    m_scales: w.scales(m_scales),
                    v_scales: w.scales(v_scales),
                    mirror: f16_mirror(p, w.from, w.len),
                    first: w.first as u32,
                    sr_seed: self.sr_seed,
                };
                k.optim
                    .update_8bit(gpu, hyper, c.decays, w.len as u32, &self.step, stats, &b)
            }
        }
    }

    /// Copies the moments to the host, after every step submitted so far.
    pub async fn read_state(&self, gpu: &Gpu) -> Result<HostState> {
        Ok(match &self.state {
            StateBuffers::Fp32 { m, v } => HostState::Fp32 {
                m: gpu.read_back(m.into()).await?,
                v: gpu.read_back(v.into()).await?,
            },
            StateBuffers::Bf16 { m, v } => HostState::Bf16 {
                m: bf16_values(gpu.read_back(m.into()).await?, self.total),
                v: bf16_values(gpu.read_back(v.into()).await?, self.total),
            },
            StateBuffers::Bytes {
                code,
                m_codes,
                v_codes,
                m_scales,
                v_scales,
            } => HostState::Bytes {
                code: *code,
                m_codes: gpu.read_back(m_codes.into()).await?,
                v_codes: gpu.read_back(v_codes.into()).await?,
                m_scales: gpu.read_back(m_scales.into()).await?,
                v_scales: gpu.read_back(v_scales.into()).await?,
            },
        })
    }

    /// Replaces the moments with `state` (of this kind and these sizes) before the next submission.
    pub fn write_state(&self, gpu: &Gpu, state: &HostState) -> Result<()> {
        let padded: [Vec<u8>; 2];
        let mut writes: Vec<(&wgpu::Buffer, &[u8])> = Vec::new();
        match (&self.state, state) {
            (StateBuffers::Fp32 { m, v }, HostState::Fp32 { m: hm, v: hv }) => {
                writes.extend([(m, bytemuck::cast_slice(hm)), (v, bytemuck::cast_slice(hv))]);
            }
            (StateBuffers::Bf16 { m, v }, HostState::Bf16 { m: hm, v: hv }) => {
                padded = [bf16_words(hm), bf16_words(hv)];
                writes.extend([(m, &padded[0][..]), (v, &padded[1][..])]);
            }
            (
                StateBuffers::Bytes {
                    code,
                    m_codes,
                    v_codes,
                    m_scales,
                    v_scales,
                },
                HostState::Bytes {
                    code: host_code,
                    m_codes: hmc,
                    v_codes: hvc,
                    m_scales: hms,
                    v_scales: hvs,
                },
            ) if code == host_code => {
                writes.extend([
                    (m_codes, &hmc[..]),
                    (v_codes, &hvc[..]),
                    (m_scales, bytemuck::cast_slice(hms)),
                    (v_scales, bytemuck::cast_slice(hvs)),
                ]);
            }
            _ => {
                return Err(Error::Unsupported(format!(
                    "optimizer state: this AdamW keeps {} moments",
                    self.config.state.name()
                )));
            }
        }
        for (buffer, bytes) in &writes {
            if bytes.len() as u64 != buffer.size() {
                return Err(Error::shape(
                    "optimizer state",
                    "moment bytes",
                    buffer.size(),
                    bytes.len(),
                ));
            }
        }
        writes
            .iter()
            .for_each(|(buffer, bytes)| gpu.queue.write_buffer(buffer, 0, bytes));
        Ok(())
    }

    /// Sets step `t`'s rate and bias corrections for the next submission.
    pub fn write_step(&self, gpu: &Gpu, k: &Kernels, t: u32) -> Result<()> {
        if let Some(muon) = &self.muon {
            muon.write_step(gpu, &self.config.muon_hyper(t), t, self.sr_seed)?;
        }
        k.optim
            .write_step(gpu, &self.step, &self.config.hyper(t), t)
    }
}

/// Σx² (and the non-finite count) of `buffer`'s `chunks`, each into its
/// own run of `partials` in order: the gradient norm's first stage, and
/// the weight norm's.
pub fn sum_squares(
    gpu: &Gpu,
    k: &Kernels,
    buffer: &wgpu::Buffer,
    chunks: &[&Chunk],
    partials: &wgpu::Buffer,
) -> Result<Vec<Dispatch>> {
    let mut d = Vec::new();
    let mut offset = 0;
    for c in chunks {
        d.push(k.optim.reduce_norm_sq(
            gpu,
            f32_range(buffer, c.span.start, c.span.len),
            c.span.len as u32,
            partials.into(),
            offset,
        )?);
        offset += partials_for(c.span.len) as u32;
    }
    Ok(d)
}

/// What a block-wise dispatch of elements `start..start + len` binds: the
/// scales bind at 16 384-element boundaries only (`CHUNK_ALIGN`), so from
/// the one at or below `start`, the whole blocks before `first` left alone.
pub(crate) struct BlockWindow {
    code: ByteCode,
    pub from: u64,
    /// `start − from`: whole 256-value blocks (tensors start on them).
    pub first: u64,
    /// Elements from `from` to the range's end.
    pub len: u64,
}

impl BlockWindow {
    pub fn new(code: ByteCode, start: u64, len: u64) -> BlockWindow {
        let from = start / CHUNK_ALIGN * CHUNK_ALIGN;
        BlockWindow {
            code,
            from,
            first: start - from,
            len: start + len - from,
        }
    }

    pub fn codes<'a>(&self, buffer: &'a wgpu::Buffer) -> BufferRange<'a> {
        BufferRange {
            buffer,
            offset: self.code.code_bytes(self.from),
            size: self.code.code_bytes(self.len),
        }
    }

    pub fn scales<'a>(&self, buffer: &'a wgpu::Buffer) -> BufferRange<'a> {
        BufferRange {
            buffer,
            offset: self.code.scale_bytes(self.from),
            size: self.code.scale_bytes(self.len),
        }
    }
}

/// bf16 state's elements `start..start + len` (`start` even: tensors start
/// at multiples of 256).
pub(crate) fn bf16_range(buffer: &wgpu::Buffer, start: u64, len: u64) -> BufferRange<'_> {
    BufferRange {
        buffer,
        offset: 2 * start,
        size: bf16_state_bytes(len),
    }
}

/// bf16 bits read back (padded to a word) as `n` values.
fn bf16_values(mut words: Vec<u16>, n: u64) -> Vec<u16> {
    words.truncate(n as usize);
    words
}

/// bf16 bits as the buffer's bytes, padded to a whole word.
fn bf16_words(bits: &[u16]) -> Vec<u8> {
    let mut bytes: Vec<u8> = bytemuck::cast_slice(bits).to_vec();
    bytes.resize(bf16_state_bytes(bits.len() as u64) as usize, 0);
    bytes
}

/// The f16 forward mirror's elements `start..start + len`, which the update
/// writes in the same pass; None without one, or for the quantized copy
/// (`Model::mirror_update` writes it).
fn f16_mirror(p: &Params, start: u64, len: u64) -> Option<BufferRange<'_>> {
    match &p.mirror {
        Some(Mirror::F16(m)) => Some(f16_range(m, start, len)),
        Some(Mirror::Quantized { .. }) | None => None,
    }
}
