//! The precision modes a model runs in: which weights its products read,
//! the numeric mode its kernels are built in, and whether its head stays wide.

use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::kernels::Kernels;
use crate::shaders::Numerics;

/// Which weights the forward and the backward's dX products read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// The f32 master weights.
    Fp32,
    /// Their f16 mirror, written by the fused AdamW update; f32 gradients,
    /// master weights and moments.
    F16,
    /// The f32 master weights, with every forward boundary rounded to Q1.15
    /// (the SF16 document); the backward is f32, straight through.
    Sf16,
    /// `Sf16` with the output head's product kept wide: f32 logits, so the
    /// softmax over the vocabulary is not held to logits in ±0.999.
    #[serde(rename = "sf16-wide-head")]
    Sf16WideHead,
    /// The f32 master weights; the linear layers' products take E4M3 inputs
    /// with fine-grained scales, forward and backward (DeepSeek-V3's FP8
    /// precision map: embeddings, head, norms, attention, loss stay wide).
    Fp8,
}

impl Precision {
    pub const ALL: [Precision; 5] = [
        Precision::Fp32,
        Precision::F16,
        Precision::Sf16,
        Precision::Sf16WideHead,
        Precision::Fp8,
    ];

    pub fn parse(name: &str) -> Result<Precision> {
        Precision::ALL
            .into_iter()
            .find(|p| p.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Precision::ALL.iter().map(|p| p.name()).collect();
                Error::Unsupported(format!(
                    "unknown precision {name:?}: use {}",
                    names.join(", ")
                ))
            })
    }

    pub fn name(&self) -> &'static str {
        match self {
            Precision::Fp32 => "fp32",
            Precision::F16 => "f16",
            Precision::Sf16 => "sf16",
            Precision::Sf16WideHead => "sf16-wide-head",
            Precision::Fp8 => "fp8",
        }
    }

    /// The numeric mode its kernels are built in.
    pub fn numerics(&self) -> Numerics {
        match self {
            Precision::Fp32 | Precision::F16 => Numerics::Exact,
            Precision::Sf16 | Precision::Sf16WideHead => Numerics::Sf16,
            Precision::Fp8 => Numerics::Fp8,
        }
    }

    /// Whether the output head's product is built exact, outside the mode
    /// (fp8's precision map keeps the head wide).
    pub fn wide_head(&self) -> bool {
        matches!(self, Precision::Sf16WideHead | Precision::Fp8)
    }

    /// The kernels a model in this precision runs, attention for `head_dims`.
    pub async fn kernels(&self, gpu: &Gpu, head_dims: &[u32]) -> Result<Kernels> {
        let gpu = gpu.with_numerics(self.numerics());
        Kernels::with_head(&gpu, self.wide_head(), head_dims).await
    }
}
