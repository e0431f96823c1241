//! What a product's operands go through before the GEMM reads them: the
//! format, its rounding and block shape, a Hadamard transform. Precision
//! recipes (`model::recipe`) are made of these; `kernels::linear` runs them.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Error, Result};
use crate::ops::formats::{Counts, Format, HADAMARD_BLOCK, NoiseSums, Scaling, line_group};

/// What an operand goes through before a product.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OperandFormat {
    /// Untouched f32.
    F32,
    /// One of `ops::formats`' formats, its blocks along K (or square).
    Format(Format),
}

impl OperandFormat {
    pub fn name(&self) -> &'static str {
        match self {
            OperandFormat::F32 => "f32",
            OperandFormat::Format(f) => f.name,
        }
    }

    pub fn parse(name: &str) -> Result<OperandFormat> {
        match name {
            "f32" => Ok(OperandFormat::F32),
            _ => Format::parse(name).map(OperandFormat::Format).map_err(|_| {
                Error::Unsupported(format!(
                    "unknown format {name:?}: an operand takes {}",
                    OperandFormat::names().join(", ")
                ))
            }),
        }
    }

    /// Every format's name, as an operand takes it (the page's editor
    /// offers them).
    pub fn names() -> Vec<&'static str> {
        let formats = Format::ALL.iter().map(|f| f.name);
        ["f32"].into_iter().chain(formats).collect()
    }
}

impl Serialize for OperandFormat {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for OperandFormat {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        OperandFormat::parse(&name).map_err(serde::de::Error::custom)
    }
}

/// How an operand's values are rounded into its format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Rounding {
    /// To nearest, ties to even.
    #[default]
    Nearest,
    /// Up with probability equal to the distance, drawn from (run seed,
    /// step, tensor): unbiased, reproducible.
    Stochastic,
}

/// The shape of a block format's blocks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BlockShape {
    /// Along K.
    #[default]
    #[serde(rename = "1d")]
    Line,
    /// Square tiles, for weights (NVFP4's 16×16, the blockwise FP8's
    /// 128×128): W and Wᵀ quantize alike.
    #[serde(rename = "2d")]
    Square,
}

/// Where a random Hadamard transform's signs come from: one draw for the
/// whole run (Transformer Engine's fixed sign vector), a new one every
/// optimizer step (Quartet's backward), or none, the plain Walsh–Hadamard
/// matrix (Quartet's forward, QuEST's). Both operands of a product draw
/// alike, so the transform cancels in the product either way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HadamardSigns {
    #[default]
    Fixed,
    PerStep,
    None,
}

/// One operand's treatment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Operand {
    pub format: OperandFormat,
    #[serde(default)]
    pub blocks: BlockShape,
    #[serde(default)]
    pub rounding: Rounding,
    /// A random Hadamard transform along K first (on both operands of a
    /// product, so it cancels in the product).
    #[serde(default)]
    pub hadamard: bool,
    /// Its signs (a recipe file without them, before 2026-11-28, reads as
    /// fixed: the only kind there was).
    #[serde(default)]
    pub hadamard_signs: HadamardSigns,
    /// Its block: 16 (Transformer Engine's, and every recipe's before
    /// 2026-11-28, which a file without it reads as), 32, 64 or 128
    /// (Quartet's and Quartet II's); where K is no multiple of it, the
    /// largest power of two that divides K (`Operand::hadamard_block`).
    #[serde(default = "hadamard_block_default")]
    pub hadamard_size: u32,
}

fn hadamard_block_default() -> u32 {
    HADAMARD_BLOCK as u32
}

impl Default for Operand {
    fn default() -> Self {
        Operand::of(OperandFormat::F32)
    }
}

impl Operand {
    pub const fn of(format: OperandFormat) -> Operand {
        Operand {
            format,
            blocks: BlockShape::Line,
            rounding: Rounding::Nearest,
            hadamard: false,
            hadamard_signs: HadamardSigns::Fixed,
            hadamard_size: HADAMARD_BLOCK as u32,
        }
    }

    pub(crate) fn format(name: &str) -> Operand {
        Operand::of(OperandFormat::parse(name).expect("a named recipe's format"))
    }

    pub(crate) fn square(self) -> Operand {
        Operand {
            blocks: BlockShape::Square,
            ..self
        }
    }

    pub(crate) fn stochastic(self) -> Operand {
        Operand {
            rounding: Rounding::Stochastic,
            ..self
        }
    }

    pub(crate) fn hadamard(self) -> Operand {
        Operand {
            hadamard: true,
            ..self
        }
    }

    /// The Hadamard transform's block along a K of `k` values: the
    /// operand's size, or the largest power of two below it that divides
    /// `k`; `None` where `k` is not a multiple of 16.
    pub fn hadamard_block(&self, k: usize) -> Option<usize> {
        line_group(k, self.hadamard_size as usize)
    }

    /// Whether its quantizer clips values that then pass no gradient
    /// (QuEST's, `Scaling::Quest`: `Linear::clip_masks`).
    pub fn clips(&self) -> bool {
        matches!(self.format, OperandFormat::Format(f) if f.scaling == Scaling::Quest)
    }

    /// Whether the operand reaches its product as it is.
    pub fn is_identity(&self) -> bool {
        self.format == OperandFormat::F32 && !self.hadamard
    }
}

/// What attention's products — q·kᵀ and p·v, and their backward dp = dO·vᵀ,
/// dq = dS·k, dk = dSᵀ·q, dv = pᵀ·dO — read. Softmax, its sums and every
/// accumulation stay f32 either way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttentionOperands {
    /// As they are (f32).
    #[default]
    F32,
    /// q, k, v, dO, the probabilities p and dS rounded to f16 (nearest,
    /// ties to even) before they multiply: FlashAttention's f16 numerics,
    /// what PyTorch's autocast runs attention in. The normalizer sums the
    /// unrounded p.
    F16,
}

/// The layers whose products stay f32 whatever the operands say.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Wide {
    /// The first `first` and the last `last` transformer blocks.
    pub first: u32,
    pub last: u32,
    /// The output head (its product exact: f32 logits).
    pub head: bool,
}

impl Wide {
    /// Whether layer `l` of `layers` stays wide.
    pub fn keeps_layer(&self, l: u32, layers: u32) -> bool {
        l < self.first || l + self.last >= layers
    }
}

/// Each product's two operands: forward `[X, W]`, dgrad `[dY, W]`, wgrad
/// `[dY, X]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Products {
    pub forward: [Operand; 2],
    pub dgrad: [Operand; 2],
    pub wgrad: [Operand; 2],
}

impl Products {
    /// The products by name.
    pub fn passes(&self) -> [(&'static str, [Operand; 2]); 3] {
        [
            ("forward", self.forward),
            ("dgrad", self.dgrad),
            ("wgrad", self.wgrad),
        ]
    }

    pub fn all(&self) -> [Operand; 6] {
        let [a, b, c, d, e, f] = [self.forward, self.dgrad, self.wgrad].concat()[..] else {
            unreachable!()
        };
        [a, b, c, d, e, f]
    }

    /// Whether every operand reaches its product as it is.
    pub fn is_exact(&self) -> bool {
        self.all().iter().all(Operand::is_identity)
    }

    /// Whether the forward and dX products read the same quantized weights,
    /// so that the weights are quantized once per optimizer step
    /// (`model::Mirror::Quantized`) instead of once per product: the same
    /// operand for both, rounded to nearest with no Hadamard transform,
    /// and W and Wᵀ quantized alike (unscaled, one scale per tensor, or
    /// square blocks). 1-D blocks run along each product's K, which
    /// differs between the two, so those weights are quantized per product.
    pub fn shares_quantized_weights(&self) -> bool {
        let [w, dgrad_w] = [self.forward[1], self.dgrad[1]];
        let OperandFormat::Format(f) = w.format else {
            return false;
        };
        let alike = f.block() == 1 || w.blocks == BlockShape::Square;
        w == dgrad_w && alike && w.rounding == Rounding::Nearest && !w.hadamard
    }

    /// Whether a gradient (dY) goes through a format (`NoiseRatios`).
    pub fn quantizes_gradients(&self) -> bool {
        let quantized = |o: &Operand| matches!(o.format, OperandFormat::Format(_));
        quantized(&self.dgrad[0]) || quantized(&self.wgrad[0])
    }

    /// Whether any operand goes through `ops::formats`' quantizers (whose
    /// counts are `OperandCounts`).
    pub fn counts_operands(&self) -> bool {
        let quantizer = |o: &Operand| o.hadamard || matches!(o.format, OperandFormat::Format(_));
        self.all().iter().any(quantizer)
    }
}

/// What each operand's quantization counted over a step: forward `[X, W]`,
/// dgrad `[dY, W]`, wgrad `[dY, X]`, as `Products` orders them. Weights
/// quantized once per optimizer step (`Products::shares_quantized_weights`)
/// count once, in forward's W, when the update writes them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct OperandCounts {
    pub forward: [Counts; 2],
    pub dgrad: [Counts; 2],
    pub wgrad: [Counts; 2],
}

impl OperandCounts {
    /// From six operands' [saturated, flushed, blocks saturated, blocks
    /// underflowed] words, in `Products::all`'s order.
    pub fn from_words(w: &[[u32; 4]; 6]) -> OperandCounts {
        let c = |i: usize| Counts {
            saturated: w[i][0],
            flushed: w[i][1],
            blocks_scale_saturated: w[i][2],
            blocks_scale_underflowed: w[i][3],
        };
        OperandCounts {
            forward: [c(0), c(1)],
            dgrad: [c(2), c(3)],
            wgrad: [c(4), c(5)],
        }
    }
}

/// The gradient's quantization noise over a step, per product reading a
/// quantized dY: ‖dY‖ / ‖q(dY) − dY‖ over every layer's dY together
/// (`NoiseSums::ratio`); `None` for a product whose dY is not quantized
/// (or was exactly).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct NoiseRatios {
    pub dgrad: Option<f32>,
    pub wgrad: Option<f32>,
}

impl NoiseRatios {
    /// From dgrad's and wgrad's dY sums [Σx², Σ(y − x)²]; `None` where
    /// neither has a ratio (a step that did not sum them).
    pub fn from_sums(sums: &[[f32; 2]; 2]) -> Option<NoiseRatios> {
        let ratio = |[signal, noise]: [f32; 2]| NoiseSums { signal, noise }.ratio();
        let r = NoiseRatios {
            dgrad: ratio(sums[0]),
            wgrad: ratio(sums[1]),
        };
        r.min().map(|_| r)
    }

    /// The smaller ratio: the operand nearest the criterion's √3.
    pub fn min(&self) -> Option<f32> {
        [self.dgrad, self.wgrad]
            .into_iter()
            .flatten()
            .reduce(f32::min)
    }
}

#[cfg(test)]
mod tests {
    use super::Wide;

    /// Megatron's FP4 cookbook keeps the first 2 and the last 2
    /// transformer blocks in high precision: `wide {first: 2, last: 2}`
    /// keeps those and no other at any depth, every block of a model of
    /// 4 or fewer.
    #[test]
    fn wide_two_and_two_keeps_the_cookbooks_blocks() {
        let cookbook = Wide {
            first: 2,
            last: 2,
            head: false,
        };
        let kept = |layers| (0..layers).filter(move |&l| cookbook.keeps_layer(l, layers));
        assert_eq!(kept(12).collect::<Vec<_>>(), [0, 1, 10, 11]);
        assert_eq!(kept(5).collect::<Vec<_>>(), [0, 1, 3, 4]);
        assert_eq!(kept(4).collect::<Vec<_>>(), [0, 1, 2, 3]);
        assert_eq!(kept(3).collect::<Vec<_>>(), [0, 1, 2]);
    }
}
