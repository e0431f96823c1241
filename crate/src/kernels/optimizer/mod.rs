//! Launchers for 12_optimizer.wgsl and 12_optimizer_states.wgsl: the
//! global gradient norm and clip scale, and the fused AdamW update
//! (optionally writing the f16 forward mirror), with f32 moments, bf16
//! ones, or block-wise quantized ones (int8 codes, int8-linear, E4M3 or
//! TorchAO's 4-bit codes).

use bytemuck::{Pod, Zeroable};

use crate::error::{Error, Result};
use crate::gpu::{
    Bind, BufferRange, Dispatch, Gpu, Kernel, KernelDesc, build_variant_kernels, f16_bytes,
};
pub use crate::ops::adam::AdamHyper;
use crate::ops::adam::{ByteCode, Int4Code, Int8Maps, MASTER_SR_STREAM};
use crate::ops::loss_scale::{LossScale, LossScaling};
use crate::shaders::OPTIMIZER_MODULE;

mod block_state;
mod descs;
mod master;

use descs::*;
pub(crate) use master::{master_bytes, master_element, master_prelude};

/// Gradients per `reduce_norm_sq` workgroup: `GROUP` in 12_optimizer.wgsl.
const GROUP: u64 = 4096;

/// Bytes of one moment's bf16 values for `n` values (two per word).
pub fn bf16_state_bytes(n: u64) -> u64 {
    n.div_ceil(2) * 4
}

/// Partials a block of `n` gradients adds to the step's partials buffer (8 bytes each).
pub fn partials_for(n: u64) -> u64 {
    n.div_ceil(GROUP)
}

/// What `finalize_grad_stats` writes (16 bytes), for AdamW and for the host.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GradStats {
    /// Of the unscaled gradients.
    pub norm: f32,
    /// AdamW's factor for each raw gradient: the clip, divided by the loss
    /// scale the gradients carry (exact: a power of two).
    pub clip_scale: f32,
    /// Gradients that were NaN or ±Inf: AdamW treats them as 0.
    pub nonfinite: u32,
    /// 1 when the step was skipped (non-finite loss, or Σg² overflowed;
    /// with loss scaling, any non-finite gradient): weights and moments
    /// untouched, gradients zeroed.
    pub skip: u32,
}

/// Bytes of the [`GradStats`] the update kernels read.
const STATS_BYTES: u64 = size_of::<GradStats>() as u64;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct ReduceParams {
    n: u32,
    partial_offset: u32,
    _pad: [u32; 2],
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct FinalizeParams {
    partials: u32,
    max_norm: f32,
    scaling: u32,
    growth_interval: u32,
    growth: f32,
    backoff: f32,
    _pad: [u32; 2],
}

/// A block's constants (`AdamBlock` in the shader).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct AdamBlock {
    n: u32,
    beta1: f32,
    beta2: f32,
    eps: f32,
    decays: u32,
    /// 8-bit: elements before it (whole blocks) are another optimizer's.
    first: u32,
    /// bf16-sr master weights (the `MASTER_SR` variant): their draws' seed.
    sr_seed: u32,
    /// The weights buffer's element at the binding's start: the random
    /// bits are drawn per element of the whole buffer.
    offset: u32,
    /// `ops::adam::MASTER_SR_STREAM`: the draws' own stream.
    sr_stream: u32,
    _pad: [u32; 3],
}

impl AdamBlock {
    /// With `sr_seed`, bf16 master weights (pairs) rounded stochastically,
    /// the bits drawn by element of `weights`' buffer.
    fn master(self, weights: &BufferRange, sr_seed: Option<u32>) -> AdamBlock {
        AdamBlock {
            sr_seed: sr_seed.unwrap_or(0),
            offset: master_element(weights, sr_seed.is_some()),
            sr_stream: MASTER_SR_STREAM,
            ..self
        }
    }
}

/// One step's values (`AdamStep` in the shader), shared by every update
/// dispatch of the step and rewritten by the host before each step.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct AdamStep {
    pub step_size: f32,
    pub bc2_sqrt: f32,
    pub decay: f32,
    /// The step, 1-based: seeds the 8-bit state's stochastic rounding.
    pub t: u32,
}

impl AdamHyper {
    /// Step `t` (1-based): bias corrections folded in on the host in f64,
    /// as torch.optim.AdamW computes them.
    pub fn step(&self, t: u32) -> AdamStep {
        AdamStep {
            step_size: (self.lr / (1.0 - self.beta1.powi(t as i32))) as f32,
            bc2_sqrt: (1.0 - self.beta2.powi(t as i32)).sqrt() as f32,
            decay: (1.0 - self.lr * self.weight_decay) as f32,
            t,
        }
    }

    fn block(&self, n: u32, decays: bool) -> AdamBlock {
        AdamBlock {
            n,
            beta1: self.beta1 as f32,
            beta2: self.beta2 as f32,
            eps: self.eps as f32,
            decays: decays as u32,
            ..AdamBlock::zeroed()
        }
    }
}

/// Muon's momentum over a range of hidden matrices: f32 or bf16 at the
/// range's elements, or 8-bit codes and scales bound from `first` elements
/// (whole blocks, another optimizer's) before it, as AdamW's m.
pub enum MuonMomentum<'a> {
    Fp32(BufferRange<'a>),
    Bf16(BufferRange<'a>),
    Bytes {
        code: ByteCode,
        codes: BufferRange<'a>,
        scales: BufferRange<'a>,
        first: u32,
    },
}

/// The buffers one AdamW dispatch updates (one block, or chunk of one).
pub struct AdamBuffers<'a> {
    /// f32, or with `sr_seed` bf16 pairs (bf16-sr master weights).
    pub weights: BufferRange<'a>,
    pub grads: BufferRange<'a>,
    pub moment1: BufferRange<'a>,
    pub moment2: BufferRange<'a>,
    /// The moments are bf16, two per word ([`bf16_state_bytes`], bound
    /// at the block's own first element), not f32.
    pub bf16: bool,
    /// The f16 forward mirror, written in the same pass (mixed precision).
    pub mirror: Option<BufferRange<'a>>,
    /// bf16-sr master weights: the seed of their stochastic rounding.
    pub sr_seed: Option<u32>,
}

/// The buffers one block-wise AdamW dispatch updates. Each moment is
/// stored as codes packed in u32 words ([`ByteCode::code_bytes`]: 4 bytes,
/// element 4k+j in byte j of word k; or 8 nibbles, element 2b in byte b's
/// high nibble) and one f32 scale per block of `code.block()` values
/// ([`ByteCode::scale_bytes`]); all zeros is the initial state. A chunk
/// must start at a multiple of the block, so that no block straddles two
/// dispatches.
pub struct Adam8bitBuffers<'a> {
    pub code: ByteCode,
    /// f32, or with `sr_seed` bf16 pairs (bf16-sr master weights).
    pub weights: BufferRange<'a>,
    pub grads: BufferRange<'a>,
    pub m_codes: BufferRange<'a>,
    pub v_codes: BufferRange<'a>,
    pub m_scales: BufferRange<'a>,
    pub v_scales: BufferRange<'a>,
    /// The f16 forward mirror, written in the same pass (mixed precision).
    pub mirror: Option<BufferRange<'a>>,
    /// Elements (whole blocks) bound before the block's first, left alone:
    /// the int8 scales bind at 16 384-element boundaries only.
    pub first: u32,
    /// bf16-sr master weights: the seed of their stochastic rounding.
    pub sr_seed: Option<u32>,
}

/// What an AdamW update keeps its moments in.
#[derive(Clone, Copy, Debug)]
enum UpdateState {
    F32,
    /// bf16 pairs, a word each.
    Bf16,
    /// A block-wise byte code's codes and scales.
    Bytes(ByteCode),
}

/// AdamW's update kernels of one variant of 12_optimizer.wgsl: each
/// state's without and with the f16 mirror (`Updates::get`).
struct Updates([Kernel; 12]);

impl Updates {
    /// Pairs (plain, f16 mirror) in `get`'s order of states.
    const DESCS: [KernelDesc; 12] = [
        UPDATE,
        UPDATE_F16,
        UPDATE_BF16,
        UPDATE_BF16_F16,
        UPDATE_8BIT,
        UPDATE_8BIT_F16,
        UPDATE_FP8,
        UPDATE_FP8_F16,
        UPDATE_LINEAR,
        UPDATE_LINEAR_F16,
        UPDATE_INT4,
        UPDATE_INT4_F16,
    ];

    /// With `master_sr`, the variant whose master weights are bf16 pairs,
    /// each new weight rounded to bf16 stochastically (`master_prelude`: the
    /// f32 variant carries no trace of it). Pipelines are made on first use.
    async fn new(gpu: &Gpu, master_sr: bool) -> Result<Updates> {
        let constants = master_prelude(3, master_sr);
        let kernels = build_variant_kernels(gpu, OPTIMIZER_MODULE, &constants, Self::DESCS);
        Ok(Updates(kernels.await?))
    }

    /// The update of `state`, writing the f16 mirror or not.
    fn get(&self, state: UpdateState, mirror: bool) -> &Kernel {
        let pair = match state {
            UpdateState::F32 => 0,
            UpdateState::Bf16 => 1,
            UpdateState::Bytes(ByteCode::Dynamic) => 2,
            UpdateState::Bytes(ByteCode::E4m3) => 3,
            UpdateState::Bytes(ByteCode::Linear) => 4,
            UpdateState::Bytes(ByteCode::Int4) => 5,
        };
        &self.0[2 * pair + usize::from(mirror)]
    }
}

pub struct Optimizer {
    /// A `LossScale` bound, and left alone, when the step does not scale.
    unscaled: wgpu::Buffer,
    reduce: Kernel,
    finalize: Kernel,
    /// AdamW's updates with f32 master weights, and with bf16-sr ones.
    updates: Updates,
    updates_sr: Updates,
    muon_momentum: Kernel,
    muon_momentum_8bit: Kernel,
    muon_momentum_fp8: Kernel,
    muon_momentum_linear: Kernel,
    muon_momentum_int4: Kernel,
    muon_momentum_bf16: Kernel,
    /// The int8 codes' tables (`ops::adam::Int8Map`), uploaded once.
    code_tables: wgpu::Buffer,
    /// The int4 maps (`ops::adam::Int4Code`) in the same places: m's at 0,
    /// v's at 256.
    int4_tables: wgpu::Buffer,
}

impl Optimizer {
    pub async fn new(gpu: &Gpu) -> Result<Self> {
        let descs = [
            REDUCE,
            FINALIZE,
            MUON_MOMENTUM,
            MUON_MOMENTUM_8BIT,
            MUON_MOMENTUM_FP8,
            MUON_MOMENTUM_LINEAR,
            MUON_MOMENTUM_INT4,
            MUON_MOMENTUM_BF16,
        ];
        let plain = &master_prelude(3, false);
        let [
            reduce,
            finalize,
            muon_momentum,
            muon_momentum_8bit,
            muon_momentum_fp8,
            muon_momentum_linear,
            muon_momentum_int4,
            muon_momentum_bf16,
        ] = build_variant_kernels(gpu, OPTIMIZER_MODULE, plain, descs).await?;
        let maps = Int8Maps::dynamic();
        let tables: Vec<f32> = [maps.m.values, maps.v.values, maps.m.steps, maps.v.steps].concat();
        let code_tables = gpu.upload("code_tables", &tables)?;
        let [m4, v4] = *Int4Code::maps();
        let mut int4 = vec![0f32; tables.len()];
        int4[..16].copy_from_slice(&m4);
        int4[256..272].copy_from_slice(&v4);
        let int4_tables = gpu.upload("int4_tables", &int4)?;
        Ok(Optimizer {
            unscaled: gpu.upload("loss_scale", &[LossScale::UNSCALED])?,
            reduce,
            finalize,
            updates: Updates::new(gpu, false).await?,
            updates_sr: Updates::new(gpu, true).await?,
            muon_momentum,
            muon_momentum_8bit,
            muon_momentum_fp8,
            muon_momentum_linear,
            muon_momentum_int4,
            muon_momentum_bf16,
            code_tables,
            int4_tables,
        })
    }

    /// The update kernels for master weights rounded (`sr_seed`) or not.
    fn updates(&self, sr_seed: Option<u32>) -> &Updates {
        match sr_seed {
            Some(_) => &self.updates_sr,
            None => &self.updates,
        }
    }

    /// The tables `new` uploaded for `code`, bound whole (its check always
    /// passes).
    fn tables(&self, code: ByteCode) -> &wgpu::Buffer {
        match code {
            ByteCode::Int4 => &self.int4_tables,
            ByteCode::Dynamic | ByteCode::E4m3 | ByteCode::Linear => &self.code_tables,
        }
    }

    /// Σg² and the non-finite count of `n` gradients, into `partials_for(n)`
    /// partials starting at `partial_offset`.
    pub fn reduce_norm_sq(
        &self,
        gpu: &Gpu,
        grads: BufferRange,
        n: u32,
        partials: BufferRange,
        partial_offset: u32,
    ) -> Result<Dispatch> {
        let op = "reduce_norm_sq";
        let groups = partials_for(n as u64);
        let params = gpu.uniform(
            op,
            &ReduceParams {
                n,
                partial_offset,
                _pad: [0; 2],
            },
        );
        let binds = [
            (&params).into(),
            grads.needs(4 * n as u64),
            partials.needs(8 * (partial_offset as u64 + groups)),
        ];
        self.reduce
            .dispatch(gpu, op, &binds, gpu.grid_groups(op, groups)?)
    }

    /// The step's [`GradStats`] from all `partials` and the step's `loss`
    /// (a `LossTotals`); `max_norm <= 0` never clips. With `scaling`, the
    /// gradients carry the scale of its state (a [`LossScale`]): they are
    /// unscaled, the step skipped if any is non-finite, and the state
    /// updated.
    #[allow(clippy::too_many_arguments)] // the step's whole state, as the kernel's bindings
    pub fn finalize(
        &self,
        gpu: &Gpu,
        partials: BufferRange,
        count: u32,
        max_norm: f32,
        loss: BufferRange,
        stats: BufferRange,
        scaling: Option<(&LossScaling, BufferRange)>,
    ) -> Result<Dispatch> {
        let op = "finalize_grad_stats";
        let settings = match scaling {
            Some((s, _)) => {
                s.validate()?;
                *s
            }
            None => LossScaling::default(),
        };
        let params = gpu.uniform(
            op,
            &FinalizeParams {
                partials: count,
                max_norm,
                scaling: scaling.is_some() as u32,
                growth_interval: settings.growth_interval,
                growth: settings.growth,
                backoff: settings.backoff,
                _pad: [0; 2],
            },
        );
        let state = scaling.map_or((&self.unscaled).into(), |(_, b)| b);
        let binds = [
            (&params).into(),
            partials.needs(8 * count as u64),
            loss.needs(16),
            stats.needs(STATS_BYTES),
            state.needs(size_of::<LossScale>() as u64),
        ];
        self.finalize
            .dispatch(gpu, op, &binds, gpu.grid_groups(op, 1)?)
    }

    /// The uniform every update dispatch reads the step's values from;
    /// write it with [`Optimizer::write_step`] before each step.
    pub fn step_buffer(&self, gpu: &Gpu) -> wgpu::Buffer {
        gpu.uniform("adam_step", &AdamStep::zeroed())
    }

    /// Sets step `t` (from 1) of `hyper` for the next submission.
    pub fn write_step(
        &self,
        gpu: &Gpu,
        step: &wgpu::Buffer,
        hyper: &AdamHyper,
        t: u32,
    ) -> Result<()> {
        if t == 0 {
            return Err(Error::shape("adamw_update", "step", "1 or more", 0));
        }
        gpu.queue
            .write_buffer(step, 0, bytemuck::bytes_of(&hyper.step(t)));
        Ok(())
    }

    /// AdamW over `n` parameters of one block (f32 or bf16 moments),
    /// reading the step's values from `step`; `decays` applies weight decay.
    #[allow(clippy::too_many_arguments)] // the step's whole state, as the kernel's bindings
    pub fn update(
        &self,
        gpu: &Gpu,
        hyper: &AdamHyper,
        decays: bool,
        n: u32,
        step: &wgpu::Buffer,
        stats: BufferRange,
        b: &AdamBuffers,
    ) -> Result<Dispatch> {
        let op = "adamw_update";
        let n64 = n as u64;
        let moment_bytes = match b.bf16 {
            true => bf16_state_bytes(n64),
            false => 4 * n64,
        };
        let params = gpu.uniform(op, &hyper.block(n, decays).master(&b.weights, b.sr_seed));
        let mut binds: Vec<Bind> = vec![
            (&params).into(),
            step.into(),
            stats.needs(STATS_BYTES),
            b.weights.needs(master_bytes(n64, b.sr_seed.is_some())),
            b.grads.needs(4 * n64),
            b.moment1.needs(moment_bytes),
            b.moment2.needs(moment_bytes),
        ];
        if let Some(mirror) = b.mirror {
            binds.push(mirror.needs(f16_bytes(n64)));
        }
        // one invocation per element, or per pair (a mirror word, a bf16 word)
        let (state, invocations) = match (b.bf16, b.mirror.is_some()) {
            (false, false) => (UpdateState::F32, n64),
            (false, true) => (UpdateState::F32, n64.div_ceil(2)),
            (true, _) => (UpdateState::Bf16, n64.div_ceil(2)),
        };
        let kernel = self.updates(b.sr_seed).get(state, b.mirror.is_some());
        kernel.dispatch(gpu, op, &binds, gpu.grid_1d(op, invocations)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bias_corrections_follow_torch() {
        let h = AdamHyper {
            lr: 1e-3,
            beta1: 0.9,
            beta2: 0.95,
            eps: 1e-8,
            weight_decay: 0.1,
        };
        let p = h.step(1);
        assert!((p.step_size as f64 - 1e-3 / 0.1).abs() < 1e-9);
        assert!((p.bc2_sqrt as f64 - 0.05f64.sqrt()).abs() < 1e-7);
        assert_eq!(p.decay, (1.0 - 1e-4) as f32);
        assert_eq!(h.block(10, false).decays, 0);
    }

    #[test]
    fn block_state_takes_a_quarter_or_an_eighth_of_f32_moments() {
        let n = 1 << 20;
        let bytes = |c: ByteCode| 2 * (c.code_bytes(n) + c.scale_bytes(n));
        assert_eq!(
            bytes(ByteCode::Dynamic) as f64 / (8 * n) as f64,
            (2.0 + 8.0 / 256.0) / 8.0
        ); // 25.4 %
        assert_eq!(
            bytes(ByteCode::Int4) as f64 / (8 * n) as f64,
            (1.0 + 8.0 / 128.0) / 8.0
        ); // 13.3 %
        // a chunk at a multiple of 16 384 elements: every offset 256-B aligned
        let at = |c: ByteCode| (c.code_bytes(16_384 * 3), c.scale_bytes(16_384 * 3));
        assert_eq!(at(ByteCode::E4m3), (49_152, 768));
        assert_eq!(at(ByteCode::Int4), (24_576, 1_536));
        let d = ByteCode::Dynamic;
        assert_eq!((d.code_bytes(5), d.scale_bytes(257)), (8, 8));
        assert_eq!(
            (
                ByteCode::Int4.code_bytes(9),
                ByteCode::Int4.scale_bytes(129)
            ),
            (8, 8)
        );
    }
}
