//! One launcher module per shader file: it owns the file's pipelines and
//! layouts, checks shapes, and turns buffers into [`Dispatch`]es.
//!
//! [`Dispatch`]: crate::gpu::Dispatch

pub mod activation;
pub mod attention;
pub mod attention_map;
pub mod boundary;
pub mod cast;
pub mod embedding;
pub mod histogram;
pub mod infrastructure;
pub mod linear;
pub mod loss;
pub mod muon;
pub mod norm;
pub mod optimizer;
pub mod quantize;
pub mod rope;
pub mod units;

pub use activation::Activation;
pub use attention::{
    Attention, AttentionBackward, AttentionShape, DecodeShape, Heads, KvGrads, Qkv,
};
pub use cast::Cast;
pub use embedding::{Embedding, EmbeddingShape};
pub use infrastructure::Infrastructure;
pub use linear::{Linear, LinearShape, Output};
pub use loss::Loss;
pub use muon::{MuonPart, NewtonSchulz};
pub use norm::{NormBackward, NormShape, RmsNorm};
pub use optimizer::{Adam8bitBuffers, AdamBuffers, AdamHyper, AdamStep, GradStats, Optimizer};
pub use quantize::Quantize;
pub use rope::{Rope, RopeShape};

use crate::error::Result;
use crate::gpu::{BufferRange, Gpu, f16_bytes};
use crate::ops::products::{AttentionOperands, Products, Wide};
use crate::shaders::Numerics;

/// Every kernel family in one device's storage and numeric mode. Building
/// it compiles each shader module once per device (`gpu::PipelineCache`);
/// each pipeline is created by its first dispatch.
pub struct Kernels {
    pub infra: Infrastructure,
    pub embed: Embedding,
    pub norm: RmsNorm,
    /// The products under the recipe's operands.
    pub linear: Linear,
    /// The products of what the recipe keeps wide: exact, f32 operands and
    /// no boundaries (built only where something is wide).
    exact: Option<Linear>,
    wide: Wide,
    pub rope: Rope,
    pub attn: Attention,
    pub act: Activation,
    pub loss: Loss,
    pub cast: Cast,
    pub optim: Optimizer,
    pub muon: NewtonSchulz,
}

impl Kernels {
    /// In `gpu`'s numeric mode, f32 operands, attention for each of `head_dims`.
    pub async fn new(gpu: &Gpu, head_dims: &[u32]) -> Result<Self> {
        let products = (Products::default(), Wide::default(), AttentionOperands::F32);
        Self::with_products(gpu, products, head_dims, 0).await
    }

    /// In `gpu`'s numeric mode, operands as `products` say except in what
    /// `wide` keeps wide, attention's as `attention` says, `seed` seeding
    /// their random draws.
    pub async fn with_products(
        gpu: &Gpu,
        (products, wide, attention): (Products, Wide, AttentionOperands),
        head_dims: &[u32],
        seed: u32,
    ) -> Result<Self> {
        let keeps_wide = wide.head || wide.first > 0 || wide.last > 0;
        let exact = match keeps_wide {
            true => Some(Linear::new(&gpu.with_numerics(Numerics::Exact)).await?),
            false => None,
        };
        Ok(Kernels {
            infra: Infrastructure::new(gpu).await?,
            embed: Embedding::new(gpu).await?,
            norm: RmsNorm::new(gpu).await?,
            linear: Linear::with_units(
                gpu,
                products,
                seed,
                gpu.matrix_units.clone().and_then(|u| u.ok()),
            )
            .await?,
            exact,
            wide,
            rope: Rope::new(gpu).await?,
            attn: Attention::with_operands(gpu, head_dims, attention).await?,
            act: Activation::new(gpu).await?,
            loss: Loss::new(gpu).await?,
            cast: Cast::new(gpu).await?,
            optim: Optimizer::new(gpu).await?,
            muon: NewtonSchulz::new(gpu).await?,
        })
    }

    /// Where the products run, for reports, where matrix units were asked
    /// for: the units, or why none.
    pub fn matrix_units_report(&self, gpu: &Gpu) -> Option<String> {
        Some(
            match (self.linear.matrix_units(), gpu.matrix_units.as_ref()?) {
                (Some(u), _) if self.attn.on_units() => {
                    format!("{}; attention's products too", u.describe())
                }
                (Some(u), _) => u.describe(),
                (None, Ok(_)) => {
                    "not used: every product has an f32 operand (no f16 values times a scale)"
                        .into()
                }
                (None, Err(why)) => format!("none: {why}"),
            },
        )
    }

    /// The output head's products.
    pub fn head(&self) -> &Linear {
        match (&self.exact, self.wide.head) {
            (Some(exact), true) => exact,
            _ => &self.linear,
        }
    }

    /// The products of layer `l` of `layers`.
    pub fn layer(&self, l: u32, layers: u32) -> &Linear {
        match &self.exact {
            Some(exact) if self.wide.keeps_layer(l, layers) => exact,
            _ => &self.linear,
        }
    }

    /// The step the next submission's stochastic rounding draws for.
    pub fn write_step(&self, gpu: &Gpu, step: u32, measure_noise: bool) {
        self.linear.write_step(gpu, step, measure_noise);
    }
}

/// Weights a forward kernel reads: the f32 master (a bf16 master's tensor
/// widened, `model::MasterStorage`), the f16 mirror of
/// mixed precision (the kernel's `_w16` variant, either storage mode), or
/// the master already through the recipe's weight format, once per
/// optimizer step (`Linear::quantize_weights`): f32 values the forward and
/// dX products read as they are.
#[derive(Clone, Copy, Debug)]
pub enum Weights<'a> {
    F32(BufferRange<'a>),
    F16(BufferRange<'a>),
    Quantized(BufferRange<'a>),
}

impl<'a> Weights<'a> {
    pub fn range(&self) -> BufferRange<'a> {
        match *self {
            Weights::F32(r) | Weights::F16(r) | Weights::Quantized(r) => r,
        }
    }

    /// Whether they are stored as f16 (else as f32).
    pub fn is_f16(&self) -> bool {
        matches!(self, Weights::F16(_))
    }

    /// Bytes `n` weights take in this precision.
    pub fn bytes(&self, n: u64) -> u64 {
        match self.is_f16() {
            false => 4 * n,
            true => f16_bytes(n),
        }
    }
}
