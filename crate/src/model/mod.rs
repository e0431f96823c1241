//! The model on the GPU: its shape and presets (`config`), its precision
//! recipes (`recipe`), where its parameters live (`layout`), the
//! activations a step works in (`activations`), and the schedules that
//! record the kernels in the seed's order: `forward` (embed → layers →
//! norm), `head` (lm_head → loss, and its backward, over row chunks),
//! `backward` (the forward read backwards). Every dispatch is built once,
//! when the model is made; a step only rewrites the batch's tokens. Callers
//! ask for a [`Pass`] and read the typed loss; the lists stay the model's own.

pub mod activations;
mod backward;
pub mod config;
pub mod decode;
mod forward;
mod head;
pub mod layout;
pub mod recipe;
mod sample;

pub use activations::{Activations, Dims};
pub use config::{BatchShape, Config, PRESETS};
pub use forward::qkv_views;
pub use head::HeadLoss;
pub use layout::{Chunk, ParamLayout, Role, Span, Tensor};
pub use recipe::{RECIPE_NAMES, Recipe};

use crate::error::{Error, Result};
use crate::gpu::{BufferRange, Dispatch, Gpu, f16_bytes};
use crate::kernels::embedding::TokenRuns;
use crate::kernels::linear::{BStorage, GemmKey};
use crate::kernels::loss::LossTotals;
use crate::kernels::optimizer::master_bytes;
use crate::kernels::rope::inv_freq;
use crate::kernels::{Kernels, Linear, LinearShape, Weights};
use crate::ops::adam::{bf16_bits, bf16_value};

/// The parameter mega-buffers (`ParamLayout` offsets in each).
pub struct Params {
    /// The master weights, `[total]` as `Params::storage` says.
    pub weights: wgpu::Buffer,
    pub grads: wgpu::Buffer, // [total] f32, zeroed by each AdamW update
    /// The products' copy of the weights: f16, or quantized once per step.
    pub mirror: Option<Mirror>,
    /// bf16 master weights: one tensor at a time widened to f32 (`[largest
    /// tensor]`) for the kernels that read f32, right before they do.
    pub widened: Option<wgpu::Buffer>,
}

/// How the master weights are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MasterStorage {
    F32,
    /// bf16 pairs, element 2k in word k's low half: bf16-sr master weights,
    /// 2 bytes a weight (the optimizer rounds each update to bf16).
    Bf16,
}

/// A copy of the master weights that the forward and the dX products read
/// instead; it always holds what the master holds, rounded.
pub enum Mirror {
    /// f16: `[total]` f16, every tensor, written by the fused AdamW update.
    F16(wgpu::Buffer),
    /// The layers' linear weights (`ParamLayout::layer_linears`) through the
    /// recipe's weight format, as f32 (`[layers.len]`, element
    /// `layers.start` first), where one quantization serves the forward and
    /// dX products (`Recipe::quantized_weight_copy`). Rewritten after every
    /// update by `Model::mirror_update`: each weight is quantized once per
    /// optimizer step, not once per product. Layers kept wide read the master.
    Quantized { buffer: wgpu::Buffer, layers: Span },
}

impl Mirror {
    /// Bytes the mirror of `layout` takes in `precision` (0: none).
    pub fn bytes(layout: &ParamLayout, precision: &Recipe) -> u64 {
        if precision.f16_weights() {
            f16_bytes(layout.total)
        } else if precision.quantized_weight_copy() {
            4 * layout.layer_linears().len
        } else {
            0
        }
    }
}

impl Params {
    /// `weights` stored as `storage` says (bf16: they must be bf16 values,
    /// which `bf16_bits` keeps exactly).
    fn new(
        gpu: &Gpu,
        layout: &ParamLayout,
        (weights, storage): (&[f32], MasterStorage),
        precision: &Recipe,
    ) -> Result<Params> {
        if weights.len() as u64 != layout.total {
            return Err(Error::shape(
                "model",
                "weights",
                layout.total,
                weights.len(),
            ));
        }
        let bytes = Mirror::bytes(layout, precision);
        let mirror = if precision.f16_weights() {
            Some(Mirror::F16(gpu.storage_buffer("mirror", bytes)?))
        } else if precision.quantized_weight_copy() {
            Some(Mirror::Quantized {
                buffer: gpu.storage_buffer("quantized_weights", bytes)?,
                layers: layout.layer_linears(),
            })
        } else {
            None
        };
        let (weights, widened) = match storage {
            MasterStorage::F32 => (gpu.upload("weights", weights)?, None),
            MasterStorage::Bf16 => {
                let bits: Vec<u16> = weights.iter().map(|&w| bf16_bits(w)).collect();
                let widened = gpu.storage_buffer("widened_weights", 4 * layout.largest_tensor())?;
                (gpu.upload("weights", &bits)?, Some(widened))
            }
        };
        Ok(Params {
            weights,
            grads: gpu.storage_buffer("grads", 4 * layout.total)?,
            mirror,
            widened,
        })
    }

    /// How the master weights are stored.
    pub fn storage(&self) -> MasterStorage {
        match self.widened {
            None => MasterStorage::F32,
            Some(_) => MasterStorage::Bf16,
        }
    }

    /// The master weights `start..start + len` as stored (bf16: `start` even).
    pub fn master_range(&self, start: u64, len: u64) -> BufferRange<'_> {
        match self.storage() {
            MasterStorage::F32 => f32_range(&self.weights, start, len),
            MasterStorage::Bf16 => f16_range(&self.weights, start, len),
        }
    }
}

impl MasterStorage {
    /// Bytes `n` master weights take.
    pub fn bytes(self, n: u64) -> u64 {
        master_bytes(n, self == MasterStorage::Bf16)
    }
}

/// The batch: written every step with `queue.write_buffer`.
pub struct Inputs {
    pub tokens: wgpu::Buffer,     // [R] u32
    pub targets: wgpu::Buffer,    // [R] u32
    pub token_runs: wgpu::Buffer, // TokenRuns of tokens: the embedding backward's index
    pub inv_freq: wgpu::Buffer,   // [Dh/2] f32, RoPE
    pub bad_tokens: wgpu::Buffer, // u32: input tokens ≥ V seen so far
}

/// A model on one device: parameters, activations and its schedules.
pub struct Model {
    pub config: Config,
    pub shape: BatchShape,
    pub layout: ParamLayout,
    pub precision: Recipe,
    pub params: Params,
    pub acts: Activations,
    pub inputs: Inputs,
    /// The loss head's per-chunk params, rescaled by each batch.
    pub head_losses: Vec<HeadLoss>,
    /// The loss scale's state (`LossScale`) the loss's gradient is
    /// multiplied by: `scale_loss`; None is S = 1.
    loss_scale: Option<wgpu::Buffer>,
    /// embed → layers → final norm
    forward: Vec<Dispatch>,
    /// lm_head → loss per row chunk, each chunk's backward right after it; loss sum
    head_train: Vec<Dispatch>,
    /// lm_head → loss per row chunk, no gradients; loss sum
    head_eval: Vec<Dispatch>,
    /// final norm ← layers ← embed, accumulating into `params.grads`
    backward: Vec<Dispatch>,
    /// After the optimizer: the quantized weights from the updated master
    /// (empty without them; AdamW writes the f16 mirror).
    mirror_update: Vec<Dispatch>,
    /// Zeros into `params.grads`, chunk by chunk as the optimizer binds them.
    zero_grads: Vec<Dispatch>,
}

/// A pass over the batch written last (`Model::write_batch`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    /// embed → layers → final norm: what the logits and probes read.
    Forward,
    /// After `Forward`: the head and its loss, each row chunk's backward
    /// right after it, then the layers' backward into the gradients.
    Backward,
    /// `Forward` then `Backward`: a training step before its update.
    Train,
    /// `Forward`, then the head's loss without gradients.
    Evaluate,
    /// After the optimizer's update: the quantized weights from the new
    /// master (nothing without them: AdamW writes the f16 mirror).
    AfterUpdate,
    /// Zeroes the gradients: AdamW does as it updates, so a `Backward` not
    /// followed by an update must, for the run to go on as it was.
    ZeroGrads,
}

impl Model {
    /// Uploads `weights` (a `layout.total` vector, e.g. `initial_weights`)
    /// stored as `storage` says, builds every dispatch and fills the
    /// forward's mirror of the weights. Refuses shapes the adapter cannot bind.
    pub async fn new(
        gpu: &Gpu,
        k: &Kernels,
        (config, shape, precision): (Config, BatchShape, Recipe),
        (weights, storage): (&[f32], MasterStorage),
    ) -> Result<Model> {
        config.validate()?;
        shape.validate(&config)?;
        precision.check(&config, shape)?;
        let layout = ParamLayout::new(&config);
        layout.chunks(gpu.limits.max_storage_buffer_binding_size)?; // every tensor bindable
        let dims = Dims::new(&config, shape, gpu.limits.max_storage_buffer_binding_size)?;
        let params = Params::new(gpu, &layout, (weights, storage), &precision)?;
        let acts = Activations::new(gpu, config.n_layers, dims)?;
        let r = shape.rows() as u64;
        let inputs = Inputs {
            tokens: gpu.storage_buffer("tokens", 4 * r)?,
            targets: gpu.storage_buffer("targets", 4 * r)?,
            token_runs: gpu.storage_buffer("token_runs", 4 * TokenRuns::words(shape.rows()))?,
            inv_freq: gpu.upload("inv_freq", &inv_freq(config.head_dim(), config.rope_theta))?,
            bad_tokens: gpu.storage_buffer("bad_tokens", 4)?,
        };
        let head_losses = HeadLoss::chunks(gpu, &dims);
        let mut model = Model {
            config,
            shape,
            layout,
            precision,
            params,
            acts,
            inputs,
            head_losses,
            loss_scale: None,
            forward: vec![],
            head_train: vec![],
            head_eval: vec![],
            backward: vec![],
            mirror_update: vec![],
            zero_grads: vec![],
        };
        let net = model.net(gpu, k);
        let (forward, head_train, head_eval, backward, mirror_update, zero_grads) = (
            net.forward()?,
            net.head(true)?,
            net.head(false)?,
            net.backward()?,
            net.quantized_weights()?,
            net.zero_grads()?,
        );
        (
            model.forward,
            model.head_train,
            model.head_eval,
            model.backward,
            model.mirror_update,
            model.zero_grads,
        ) = (
            forward,
            head_train,
            head_eval,
            backward,
            mirror_update,
            zero_grads,
        );
        let sync = model.sync_mirror(gpu, k)?;
        if !sync.is_empty() {
            gpu.run(&sync.iter().collect::<Vec<_>>()).await?;
        }
        Ok(model)
    }

    /// Multiplies the loss's gradient by the scale in `state` (a
    /// `LossScale`, 16 bytes) from the next `Backward` on.
    pub fn scale_loss(&mut self, gpu: &Gpu, k: &Kernels, state: &wgpu::Buffer) -> Result<()> {
        self.loss_scale = Some(state.clone());
        self.head_train = self.net(gpu, k).head(true)?;
        Ok(())
    }

    /// The dispatches of `pass`, in order.
    pub fn pass(&self, pass: Pass) -> Vec<&Dispatch> {
        let lists: &[&Vec<Dispatch>] = match pass {
            Pass::Forward => &[&self.forward],
            Pass::Backward => &[&self.head_train, &self.backward],
            Pass::Train => &[&self.forward, &self.head_train, &self.backward],
            Pass::Evaluate => &[&self.forward, &self.head_eval],
            Pass::AfterUpdate => &[&self.mirror_update],
            Pass::ZeroGrads => &[&self.zero_grads],
        };
        lists.iter().flat_map(|l| l.iter()).collect()
    }

    /// Runs `pass` and waits for it.
    pub async fn run(&self, gpu: &Gpu, pass: Pass) -> Result<()> {
        gpu.run(&self.pass(pass)).await
    }

    /// The loss of the last `Backward` or `Evaluate`.
    pub async fn loss(&self, gpu: &Gpu) -> Result<LossTotals> {
        Ok(gpu
            .read_back::<LossTotals>((&self.acts.loss).into())
            .await?[0])
    }

    /// The loss of the current weights on a batch, without gradients.
    pub async fn evaluate(&self, gpu: &Gpu, inputs: &[u32], targets: &[u32]) -> Result<LossTotals> {
        self.write_batch(gpu, inputs, targets)?;
        self.run(gpu, Pass::Evaluate).await?;
        self.loss(gpu).await
    }

    /// Every product shape a step of this model runs (the layers' and the
    /// head's, forward, dX and dW): what the GEMM tuner chooses variants for
    /// before the model is built.
    pub fn gemm_keys(
        config: &Config,
        shape: BatchShape,
        precision: &Recipe,
        max_binding: u64,
    ) -> Result<Vec<GemmKey>> {
        let dims = Dims::new(config, shape, max_binding)?;
        let (r, d, f) = (shape.rows(), config.d_model, config.ffn);
        let att = dims.attn as u32;
        let chunks = [dims.chunk_rows as u32, r % dims.chunk_rows as u32];
        let w = match precision.f16_weights() {
            true => BStorage::F16,
            false => BStorage::F32,
        };
        let mut layers = vec![
            (r, d, config.qkv_width()),
            (r, att, d),
            (r, d, 2 * f),
            (r, f, d),
        ];
        for rows in chunks.into_iter().filter(|&n| n > 0) {
            layers.push((rows, d, config.vocab));
        }
        let keys = layers
            .into_iter()
            .flat_map(|(rows, d_in, d_out)| GemmKey::of_linear(rows, d_in, d_out, w))
            .collect();
        Ok(keys)
    }

    fn net<'a>(&'a self, gpu: &'a Gpu, k: &'a Kernels) -> Net<'a> {
        Net { gpu, k, m: self }
    }

    /// Writes a batch (`inputs` and `targets`, each `[B·T]`) for the next
    /// submission, and the loss's scale: the mean over its targets that count.
    pub fn write_batch(&self, gpu: &Gpu, inputs: &[u32], targets: &[u32]) -> Result<()> {
        let r = self.shape.rows() as usize;
        if inputs.len() != r || targets.len() != r {
            return Err(Error::shape(
                "model",
                "batch tokens",
                r,
                format!("{} inputs, {} targets", inputs.len(), targets.len()),
            ));
        }
        gpu.queue
            .write_buffer(&self.inputs.tokens, 0, bytemuck::cast_slice(inputs));
        gpu.queue
            .write_buffer(&self.inputs.targets, 0, bytemuck::cast_slice(targets));
        let runs = TokenRuns::new(inputs, self.config.vocab).to_words();
        gpu.queue
            .write_buffer(&self.inputs.token_runs, 0, bytemuck::cast_slice(&runs));
        // the batch's targets counted once; every chunk takes the same scale
        let grad_scale = self.head_losses[0].ce.mean_over(targets).grad_scale;
        for loss in &self.head_losses {
            let ce = crate::kernels::loss::CrossEntropy {
                grad_scale,
                ..loss.ce
            };
            ce.rewrite(gpu, &loss.params);
        }
        Ok(())
    }

    /// Fills the mirror from the master weights: at creation, before the
    /// first forward (then AdamW keeps the f16 mirror, `Pass::AfterUpdate`
    /// the quantized one).
    fn sync_mirror(&self, gpu: &Gpu, k: &Kernels) -> Result<Vec<Dispatch>> {
        let mirror = match &self.params.mirror {
            None => return Ok(vec![]),
            Some(Mirror::Quantized { .. }) => return self.net(gpu, k).quantized_weights(),
            Some(Mirror::F16(mirror)) => mirror,
        };
        self.per_chunk(gpu, |src, span| {
            let (dst, n) = (f16_range(mirror, span.start, span.len), span.len as u32);
            match self.params.storage() {
                MasterStorage::F32 => k.cast.f32_to_f16(gpu, src, dst, n),
                MasterStorage::Bf16 => k.cast.bf16_to_f16(gpu, src, dst, n),
            }
        })
    }

    /// `cast` of each binding-sized chunk of the master weights, as stored.
    fn per_chunk(
        &self,
        gpu: &Gpu,
        cast: impl Fn(BufferRange, Span) -> Result<Dispatch>,
    ) -> Result<Vec<Dispatch>> {
        let chunks = self
            .layout
            .chunks(gpu.limits.max_storage_buffer_binding_size)?;
        (chunks.iter())
            .map(|c| cast(self.params.master_range(c.span.start, c.span.len), c.span))
            .collect()
    }

    /// The copy of the weights of `role` that the forward and the dX
    /// products read instead of the master, if any: the f16 mirror, or
    /// (the linear weights of layers not kept wide) the quantized copy.
    fn mirror_weights(&self, role: Role) -> Option<Weights<'_>> {
        let t = self.layout.get(role);
        let narrow = |l| !self.precision.wide().keeps_layer(l, self.config.n_layers);
        match &self.params.mirror {
            Some(Mirror::F16(mirror)) => Some(Weights::F16(f16_range(mirror, t.offset, t.len()))),
            Some(Mirror::Quantized { buffer, layers })
                if role.is_layer_linear() && role.layer().is_some_and(narrow) =>
            {
                Some(Weights::Quantized(f32_range(
                    buffer,
                    t.offset - layers.start,
                    t.len(),
                )))
            }
            _ => None,
        }
    }

    /// The master weights, `layout.total` values (bf16 ones widened).
    pub async fn read_weights(&self, gpu: &Gpu) -> Result<Vec<f32>> {
        let stored = (&self.params.weights).into();
        match self.params.storage() {
            MasterStorage::F32 => gpu.read_back(stored).await,
            MasterStorage::Bf16 => {
                let bits: Vec<u16> = gpu.read_back(stored).await?;
                let n = self.layout.total as usize;
                Ok(bits[..n].iter().map(|&b| bf16_value(b)).collect())
            }
        }
    }

    /// The master weights as f32 in a buffer: their own, or (bf16) a
    /// widened copy made for the caller, `4·total` bytes while it lives.
    pub async fn f32_weights(&self, gpu: &Gpu, k: &Kernels) -> Result<wgpu::Buffer> {
        if self.params.storage() == MasterStorage::F32 {
            return Ok(self.params.weights.clone());
        }
        let widened = gpu.storage_buffer("weights (widened)", 4 * self.layout.total)?;
        let d = self.per_chunk(gpu, |src, span| {
            let dst = f32_range(&widened, span.start, span.len);
            k.cast.bf16_to_f32(gpu, src, dst, span.len as u32)
        })?;
        gpu.run(&d.iter().collect::<Vec<_>>()).await?;
        Ok(widened)
    }

    /// The accumulated gradients, `layout.total` values.
    pub async fn read_grads(&self, gpu: &Gpu) -> Result<Vec<f32>> {
        gpu.read_back((&self.params.grads).into()).await
    }
}

/// `len` f32 elements of `buffer` from element `start`.
pub(crate) fn f32_range(buffer: &wgpu::Buffer, start: u64, len: u64) -> BufferRange<'_> {
    BufferRange {
        buffer,
        offset: 4 * start,
        size: 4 * len,
    }
}

/// `len` f16 elements of `buffer` from element `start` (even), whole words.
pub(crate) fn f16_range(buffer: &wgpu::Buffer, start: u64, len: u64) -> BufferRange<'_> {
    BufferRange {
        buffer,
        offset: 2 * start,
        size: f16_bytes(len),
    }
}

/// What the schedules are built from: the model's buffers and the kernels.
struct Net<'a> {
    gpu: &'a Gpu,
    k: &'a Kernels,
    m: &'a Model,
}

impl<'a> Net<'a> {
    /// The weights of `role` that the forward and the dX products read: the
    /// master (`master`), its f16 mirror, or (the linear weights of layers
    /// not kept wide) their quantized copy.
    fn w(&self, role: Role, s: &mut Vec<Dispatch>) -> Result<Weights<'a>> {
        match self.m.mirror_weights(role) {
            Some(w) => Ok(w),
            None => self.master(role, s).map(Weights::F32),
        }
    }

    /// The f32 master weights of a parameter: their own, or bf16 ones
    /// widened into `params.widened` by a dispatch pushed onto `s` — one
    /// tensor at a time, so what reads them must follow it before the next.
    fn master(&self, role: Role, s: &mut Vec<Dispatch>) -> Result<BufferRange<'a>> {
        let (t, p) = (self.m.layout.get(role), &self.m.params);
        let Some(widened) = &p.widened else {
            return Ok(f32_range(&p.weights, t.offset, t.len()));
        };
        let to = f32_range(widened, 0, t.len());
        let from = p.master_range(t.offset, t.len());
        s.push(
            self.k
                .cast
                .bf16_to_f32(self.gpu, from, to, t.len() as u32)?,
        );
        Ok(to)
    }

    /// The f32 gradient of a parameter.
    fn grad(&self, role: Role) -> BufferRange<'a> {
        let t = self.m.layout.get(role);
        f32_range(&self.m.params.grads, t.offset, t.len())
    }

    /// The products of a layer's linear weight `role`: wide or the recipe's.
    fn products(&self, role: Role) -> &'a Linear {
        match role.layer() {
            Some(l) => self.k.layer(l, self.m.config.n_layers),
            None => self.k.head(),
        }
    }

    /// The product of a layer's linear weight `role` over `rows` rows
    /// (`[W_q; W_k; W_v]` and `[W_gate; W_up]` stacked).
    fn linear(&self, role: Role, rows: u32) -> Result<LinearShape> {
        let c = &self.m.config;
        let (d, f, att) = (c.d_model, c.ffn, c.n_heads * c.head_dim());
        match role {
            Role::Qkv(_) => LinearShape::stacked(rows, d, &c.qkv_heights()),
            Role::Out(_) => Ok(LinearShape::new(rows, att, d)),
            Role::GateUp(_) => LinearShape::stacked(rows, d, &[f, f]),
            Role::Down(_) => Ok(LinearShape::new(rows, f, d)),
            _ => Err(Error::Unsupported(format!(
                "{role:?} is not a layer's linear weight"
            ))),
        }
    }

    /// Zeros into the gradients, one dispatch per bindable chunk.
    fn zero_grads(&self) -> Result<Vec<Dispatch>> {
        let m = self.m;
        m.layout
            .chunks(self.gpu.limits.max_storage_buffer_binding_size)?
            .iter()
            .map(|c| {
                let span = f32_range(&m.params.grads, c.span.start, c.span.len);
                self.k.infra.fill(self.gpu, span, c.span.len as u32, 0.0)
            })
            .collect()
    }

    /// Every linear weight of the layers not kept wide through the
    /// recipe's weight format into the quantized copy; nothing without one.
    fn quantized_weights(&self) -> Result<Vec<Dispatch>> {
        let Some(Mirror::Quantized { buffer, layers }) = &self.m.params.mirror else {
            return Ok(vec![]);
        };
        let (wide, n) = (self.m.precision.wide(), self.m.config.n_layers);
        let mut d = Vec::new();
        for t in self.m.layout.tensors.iter().filter(|t| {
            t.role.is_layer_linear() && t.role.layer().is_some_and(|l| !wide.keeps_layer(l, n))
        }) {
            let master = self.master(t.role, &mut d)?;
            d.extend(self.k.linear.quantize_weights(
                self.gpu,
                self.linear(t.role, 1)?,
                master,
                f32_range(buffer, t.offset - layers.start, t.len()),
            )?);
        }
        Ok(d)
    }
}
