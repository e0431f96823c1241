//! The formats' definitions, for the host, the CPU twins and the kernels:
//! the composed WGSL gets its `FMT_*`, `SCALING_*` and `BLOCKS_*` constants
//! from `wgsl_constants`, so each format is written down once, here.
//!
//! Sources: OCP 8-bit Floating Point Specification (OFP8) rev 1.0 (E4M3,
//! E5M2); OCP Microscaling Formats (MX) Specification v1.0 (E2M3, E3M2,
//! E2M1, E8M0, 32-element blocks); IEEE 754 binary16; bfloat16 (f32's top
//! 16 bits); NVIDIA's NVFP4 (E2M1 in 16-element blocks with an E4M3 scale
//! and an f32 tensor scale: "Pretraining Large Language Models with NVFP4",
//! 2025); DeepSeek-V3's blockwise FP8 (E4M3 in 1×128 and 128×128 blocks
//! with power-of-two scales: DeepSeek-V3 Technical Report, 2024, §3.3);
//! Four Over Six (NVFP4 whose blocks' scales map their amax to 6 or to 4,
//! whichever errs less: arXiv 2512.02010, mit-han-lab/fouroversix's
//! reference quantizer; Transformer Engine's `nvfp4_4over6`); TorchAO's
//! rowwise float8 (`Float8LinearRecipeName.ROWWISE`: one power-of-two
//! scale per row along the product's K, torchao/float8/float8_utils.py
//! `amax_to_scale` with `round_scales_to_power_of_2`); Quartet's MXFP4
//! quantizers (IST-DASLab/Quartet, `mxfp4_forward_kernel`: QuEST's
//! σ-scaled forward and Tseng et al.'s ¾-scaled backward).

use crate::error::{Error, Result};

mod blocks;
pub use blocks::{Block, Blocks, Counts, NoiseSums, Quantization, Stream, line_blocks, part_block};

/// Q1.15's clamp, as the SF16 document's `Q115_OVERFLOW_THRESHOLD`.
pub const Q115_LIMIT: f32 = 0.999;
/// The largest finite E4M3 value (S.1111.110).
pub const E4M3_MAX: f32 = 448.0;
/// E4M3's smallest positive value, a subnormal: 2^-9.
pub const E4M3_MIN_POSITIVE: f32 = 1.0 / 512.0;
/// E4M3's smallest normal value: 2^-6.
pub const E4M3_MIN_NORMAL: f32 = 1.0 / 64.0;

/// A floating-point element format: a sign, `exp_bits` exponent bits of
/// bias `bias`, `man` mantissa bits, subnormals, and a largest finite
/// magnitude `max_sig · 2^(emax − man)` (below the top exponent's codes
/// where those are Inf / NaN).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Minifloat {
    pub name: &'static str,
    pub exp_bits: u32,
    pub man: u32,
    pub bias: i32,
    /// The largest finite value's exponent (MX's emax_elem).
    pub emax: i32,
    /// The largest finite value's significand, an integer of man + 1 bits.
    pub max_sig: u32,
    /// What the round trip does beyond the largest finite value: ±Inf
    /// (bf16 and f16, as their casts do) or saturate to ±max (the 8-, 6-
    /// and 4-bit formats, as training recipes and MX do).
    pub overflow_to_inf: bool,
    /// The codes the format gives to infinities and NaN (for decoding).
    pub has_inf: bool,
    pub has_nan: bool,
}

impl Minifloat {
    /// The smallest normal exponent.
    pub const fn emin(&self) -> i32 {
        1 - self.bias
    }

    /// The largest finite value.
    pub fn max(&self) -> f32 {
        self.max_sig as f32 * 2f32.powi(self.emax - self.man as i32)
    }

    /// The smallest positive value (a subnormal).
    pub fn min_positive(&self) -> f32 {
        pow2(self.emin() - self.man as i32)
    }

    /// Bits of one code: sign, exponent, mantissa.
    pub const fn bits(&self) -> u32 {
        1 + self.exp_bits + self.man
    }
}

/// 2^k for any k an f32 holds (subnormal results included).
pub fn pow2(k: i32) -> f32 {
    match k {
        -126..=127 => f32::from_bits(((k + 127) as u32) << 23),
        -149..=-127 => f32::from_bits(1 << (k + 149)),
        _ if k < 0 => 0.0,
        _ => f32::INFINITY,
    }
}

/// f32 itself, as a `Minifloat`: what a product of formats' values is
/// rounded to (`FMT_F32` in WGSL).
pub const F32: Minifloat = Minifloat {
    name: "f32",
    exp_bits: 8,
    man: 23,
    bias: 127,
    emax: 127,
    max_sig: 0xff_ffff,
    overflow_to_inf: true,
    has_inf: true,
    has_nan: true,
};

/// The element formats, in the order of their WGSL codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Element {
    Bf16,
    F16,
    E4m3,
    E5m2,
    E2m3,
    E3m2,
    E2m1,
}

impl Element {
    pub const ALL: [Element; 7] = [
        Element::Bf16,
        Element::F16,
        Element::E4m3,
        Element::E5m2,
        Element::E2m3,
        Element::E3m2,
        Element::E2m1,
    ];

    pub const fn spec(self) -> Minifloat {
        use Element::*;
        let (name, exp_bits, man, bias, emax, max_sig, ieee) = match self {
            Bf16 => ("bf16", 8, 7, 127, 127, 0xff, true),
            F16 => ("f16", 5, 10, 15, 15, 0x7ff, true),
            // OFP8 E4M3 ("E4M3FN"): S.1111.111 is NaN, no Inf; max 1.75·2^8 = 448
            E4m3 => ("e4m3", 4, 3, 7, 8, 14, false),
            // OFP8 E5M2: IEEE-like (Inf and NaN codes); max 1.75·2^15 = 57344
            E5m2 => ("e5m2", 5, 2, 15, 15, 7, false),
            // MX FP6 E2M3: max 1.875·2^2 = 7.5; FP6 E3M2: max 1.75·2^4 = 28
            E2m3 => ("e2m3", 2, 3, 1, 2, 15, false),
            E3m2 => ("e3m2", 3, 2, 3, 4, 7, false),
            // MX FP4 E2M1: max 1.5·2^2 = 6
            E2m1 => ("e2m1", 2, 1, 1, 2, 3, false),
        };
        let e5m2 = matches!(self, E5m2);
        Minifloat {
            name,
            exp_bits,
            man,
            bias,
            emax,
            max_sig,
            overflow_to_inf: ieee,
            has_inf: ieee || e5m2,
            has_nan: ieee || e5m2 || matches!(self, E4m3),
        }
    }

    /// The WGSL code of the format (`quantize_*`'s params).
    pub fn code(self) -> u32 {
        self as u32
    }

    /// `FMT_E4M3` and so on: the WGSL constant holding it.
    fn wgsl_name(self) -> String {
        format!("FMT_{}", self.spec().name.to_uppercase())
    }
}

/// The `FMT_*` constants and `element_format(code)` composed ahead of
/// 00_formats.wgsl, which declares `struct Minifloat`; the scalings' and
/// blocks' codes and sides (14_quantize.wgsl's params); Q1.15's clamp
/// (00_common.wgsl's sf16 boundaries) and NVFP4's tensor-scale numerator.
pub fn wgsl_constants() -> String {
    let mut s = format!(
        "const Q115_LIMIT: f32 = {Q115_LIMIT:?};\nconst NVFP4_RANGE: f32 = {NVFP4_RANGE:?};\nconst FOUR_OVER_SIX_RANGE: f32 = {FOUR_OVER_SIX_RANGE:?};\nconst EDEN_SCALES_MAX: f32 = {EDEN_SCALES_MAX:?};\nconst EDEN_VAL_MAX: f32 = {EDEN_VAL_MAX:?};\nconst QUEST_SCALE: f32 = {QUEST_SCALE:?};\nconst QUEST_EPS: f32 = {QUEST_EPS:?};\nconst TSENG_DIVISOR: f32 = {TSENG_DIVISOR:?};\nconst TSENG_EXP_MIN: i32 = {TSENG_EXP_MIN};\n"
    );
    s += &format!(
        "const ROW_EPS_BITS: u32 = {}u;\nconst ROW_EPS_EXP: i32 = {};\n",
        row_eps_bits(),
        row_scale_exp_at_eps(&Element::E4m3.spec())
    );
    for (name, side) in [
        ("MX_BLOCK", MX_BLOCK),
        ("NVFP4_BLOCK", NVFP4_BLOCK),
        ("BLOCKWISE_BLOCK", BLOCKWISE_BLOCK),
    ] {
        s += &format!("const {name}: u32 = {side}u;\n");
    }
    for (name, code) in [
        ("SCALING_MX", Scaling::Mx.code()),
        ("SCALING_MX_CEIL", Scaling::MxCeil.code()),
        ("SCALING_NVFP4", Scaling::Nvfp4.code()),
        ("SCALING_FOUR_OVER_SIX", Scaling::FourOverSix.code()),
        ("SCALING_FOUR_OVER_SIX_MAE", Scaling::FourOverSixMae.code()),
        ("SCALING_ROW", Scaling::Row.code()),
        ("SCALING_MS_EDEN", Scaling::MsEden.code()),
        ("SCALING_QUEST", Scaling::Quest.code()),
        ("SCALING_TSENG", Scaling::Tseng.code()),
        ("SCALING_TENSOR", Scaling::Tensor.code()),
        ("SCALING_BLOCKWISE", Scaling::Blockwise.code()),
        ("BLOCKS_COLUMNS", Blocks::Columns.code()),
        ("BLOCKS_SQUARE", Blocks::Square.code()),
    ] {
        s += &format!("const {name}: u32 = {code}u;\n");
    }
    let named = Element::ALL.map(|e| (e.wgsl_name(), e.spec()));
    for (name, f) in named.iter().chain([&("FMT_F32".to_string(), F32)]) {
        s += &format!(
            "const {name}: Minifloat = Minifloat({}u, {}, {}, {}u, {});\n",
            f.man,
            f.emin(),
            f.emax,
            f.max_sig,
            f.overflow_to_inf
        );
    }
    s += "fn element_format(code: u32) -> Minifloat {\n    switch code {\n";
    for e in Element::ALL {
        s += &format!(
            "        case {}u: {{ return {}; }}\n",
            e.code(),
            e.wgsl_name()
        );
    }
    s += &format!(
        "        default: {{ return {}; }}\n    }}\n}}\n",
        Element::E4m3.wgsl_name()
    );
    s
}

/// How a block format chooses its scale.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scaling {
    /// None: a plain cast of each value.
    None,
    /// OCP MX v1.0: 32 values along the last dimension share an E8M0 scale
    /// X = 2^(floor(log2 amax) − emax_elem), clamped to [2^-127, 2^127].
    Mx,
    /// MX with the scale rounded up: the smallest power of two X with
    /// amax / X ≤ the element's max, so amax never saturates (the MXFP8
    /// pretraining recipe's rounding, NVIDIA 2025).
    MxCeil,
    /// NVFP4: 16 values share an E4M3 scale under an f32 tensor scale.
    Nvfp4,
    /// Per-tensor "current" scaling of the 8-bit elements: one power of two
    /// 2^k for the whole tensor, k the smallest with amax ≤ max·2^k (MxCeil's
    /// rounding of the tensor's finite amax), clamped to [-127, 127].
    Tensor,
    /// DeepSeek-V3's FP8: 128 values along K (or 128×128 of a weight)
    /// share a power-of-two scale, MxCeil's rounding and clamp.
    Blockwise,
    /// Four Over Six: NVFP4 under the tensor scale 6·256 / amax, each block
    /// quantized with its E4M3 scale mapping the block's amax to 6 and to
    /// 4, the one whose values' squared error sums less kept (ties: 6).
    FourOverSix,
    /// Four Over Six choosing by the absolute error (Transformer Engine's
    /// default metric).
    FourOverSixMae,
    /// TorchAO's rowwise scaling: one power-of-two scale per line along K
    /// (a row, or a column down the columns; a stacked weight's parts each
    /// their own), 2^k with k = floor(log2(max / amax)) as torch computes
    /// it (`row_scale_exp`), each value RNE(x·2^k)·2^-k, saturating.
    Row,
    /// Quartet II's MS-EDEN (IST-DASLab/Quartet-II, `eden_1x16s_fp4_kernel`):
    /// NVFP4 blocks of 16 under the tensor scale g = (amax / 255.99) /
    /// (6 / (17/16 · 0.93)), values rounded to nearest (ties away from
    /// zero), then each block's E4M3 scale times EDEN's correction c =
    /// Σv² / Σv·q over its group (`eden_group`: the Hadamard transform's
    /// group, up to `EDEN_GROUP_MAX` values along the line) rounded
    /// stochastically between its two E4M3 neighbours. Unbiased in the
    /// group's direction; the elements are not rounded again.
    MsEden,
    /// QuEST's MXFP4 (Quartet's forward, `mxfp4_forward_kernel` with
    /// `quest=True`): 32 values along the line share S = 2^floor(log2 s),
    /// s = 2.92247856/6 · σ + 1e-8, σ the block's standard deviation
    /// (√(mean x² − mean²), the sums in the values' order; a line's last
    /// block, where 32 does not divide it, its own values'); each value
    /// E2M1(x / S) to nearest with ties toward zero (the reference's
    /// thresholds), clipped to ±6. What it clips (|x / S| ≥ 6) passes no
    /// gradient (`quest_mask`). To nearest only.
    Quest,
    /// Tseng et al.'s MXFP4 (Quartet's backward, "Training LLMs with MXFP4",
    /// arXiv 2502.20586): 32 values along the line share S = 2^(floor(log2
    /// amax) − 2) / ¾, so that amax / S lies in [3, 6) and no value clips
    /// before it is rounded (stochastically, in Quartet); each value E2M1(x
    /// / S)·S, the quotient and the product correctly rounded.
    Tseng,
}

impl Scaling {
    /// The WGSL code (`SCALING_*`, composed by `wgsl_constants`).
    pub fn code(self) -> u32 {
        self as u32
    }

    /// Whether its power-of-two scale is rounded up, so that the block's
    /// amax never saturates (`mx_scale_exp`'s ceil).
    pub fn rounds_up(self) -> bool {
        matches!(self, Scaling::MxCeil | Scaling::Tensor | Scaling::Blockwise)
    }

    /// NVFP4's kind: E2M1 in 16-value blocks (or 16×16) with an E4M3
    /// scale under an f32 tensor scale from the tensor's amax.
    pub fn is_nvfp4(self) -> bool {
        matches!(
            self,
            Scaling::Nvfp4 | Scaling::FourOverSix | Scaling::FourOverSixMae | Scaling::MsEden
        )
    }
}

/// A format of `webtrain quantize`: an element format and its scaling.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Format {
    pub name: &'static str,
    pub element: Element,
    pub scaling: Scaling,
}

impl Format {
    pub const ALL: [Format; 20] = [
        Format::new("bf16", Element::Bf16, Scaling::None),
        Format::new("f16", Element::F16, Scaling::None),
        Format::new("e4m3", Element::E4m3, Scaling::None),
        Format::new("e5m2", Element::E5m2, Scaling::None),
        Format::new("e4m3-tensor", Element::E4m3, Scaling::Tensor),
        Format::new("e5m2-tensor", Element::E5m2, Scaling::Tensor),
        Format::new("mxfp8-e4m3", Element::E4m3, Scaling::Mx),
        Format::new("mxfp8-e5m2", Element::E5m2, Scaling::Mx),
        Format::new("mxfp8-e4m3-rceil", Element::E4m3, Scaling::MxCeil),
        Format::new("mxfp6-e2m3", Element::E2m3, Scaling::Mx),
        Format::new("mxfp6-e3m2", Element::E3m2, Scaling::Mx),
        Format::new("mxfp4", Element::E2m1, Scaling::Mx),
        Format::new("mxfp4-quest", Element::E2m1, Scaling::Quest),
        Format::new("mxfp4-tseng", Element::E2m1, Scaling::Tseng),
        Format::new("nvfp4", Element::E2m1, Scaling::Nvfp4),
        Format::new("nvfp4-4over6", Element::E2m1, Scaling::FourOverSix),
        Format::new("nvfp4-4over6-mae", Element::E2m1, Scaling::FourOverSixMae),
        Format::new("nvfp4-ms-eden", Element::E2m1, Scaling::MsEden),
        Format::new("e4m3-blockwise", Element::E4m3, Scaling::Blockwise),
        Format::new("e4m3-row", Element::E4m3, Scaling::Row),
    ];

    const fn new(name: &'static str, element: Element, scaling: Scaling) -> Format {
        Format {
            name,
            element,
            scaling,
        }
    }

    /// The format named `name` (or by a name it had before: `RENAMED`),
    /// or an error listing the names.
    pub fn parse(name: &str) -> Result<Format> {
        let name = RENAMED
            .iter()
            .find(|(old, _)| *old == name)
            .map_or(name, |(_, new)| new);
        Format::ALL
            .into_iter()
            .find(|f| f.name == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Format::ALL.iter().map(|f| f.name).collect();
                Error::Unsupported(format!(
                    "unknown format {name:?}: the formats are {}",
                    names.join(", ")
                ))
            })
    }

    /// Values per 1-D block (1: unscaled, or one scale per tensor; 0: the
    /// whole line, `Quantization::side`).
    pub fn block(&self) -> usize {
        match self.scaling {
            Scaling::Row => 0,
            Scaling::None | Scaling::Tensor => 1,
            Scaling::Mx | Scaling::MxCeil | Scaling::Quest | Scaling::Tseng => MX_BLOCK,
            Scaling::Nvfp4 | Scaling::FourOverSix | Scaling::FourOverSixMae | Scaling::MsEden => {
                NVFP4_BLOCK
            }
            Scaling::Blockwise => BLOCKWISE_BLOCK,
        }
    }

    /// Whether its blocks may be square (`Blocks::Square`): NVFP4's
    /// 16×16 (not MS-EDEN's, whose groups run along the line) and the
    /// blockwise FP8's 128×128.
    pub fn has_square_blocks(&self) -> bool {
        (self.scaling.is_nvfp4() && self.scaling != Scaling::MsEden)
            || self.scaling == Scaling::Blockwise
    }
}

/// Formats' earlier names, and their names now: files and addresses that
/// say the old one keep loading (and are written with the new).
pub const RENAMED: [(&str, &str); 1] = [
    // TorchAO's name for the same rule (its RCEIL scale mode, equal in every value)
    ("mxfp8-e4m3-ceil", "mxfp8-e4m3-rceil"),
];

/// MX's block: 32 values.
pub const MX_BLOCK: usize = 32;
/// NVFP4's block: 16 values, or 16 × 16.
pub const NVFP4_BLOCK: usize = 16;
/// The blockwise FP8's block: 128 values, or 128 × 128.
pub const BLOCKWISE_BLOCK: usize = 128;
/// NVFP4's tensor scale numerator: E4M3's max × E2M1's max.
pub const NVFP4_RANGE: f32 = 448.0 * 6.0;
/// Four Over Six's: 256 × 6, so that a block's scale mapping its amax to 4
/// (1.5 times the one mapping it to 6) stays within E4M3 (384 ≤ 448).
pub const FOUR_OVER_SIX_RANGE: f32 = 256.0 * 6.0;
/// The random Hadamard transform's block: the smallest, and the default.
pub const HADAMARD_BLOCK: usize = 16;
/// The Hadamard transform's largest block (Quartet II's backward).
pub const HADAMARD_MAX: usize = 128;
/// The largest group MS-EDEN corrects a scale over: Quartet II's Hadamard
/// group.
pub const EDEN_GROUP_MAX: usize = HADAMARD_MAX;
/// MS-EDEN's tensor scale: g = (amax / EDEN_SCALES_MAX) / EDEN_VAL_MAX,
/// the block scales kept below 256 to leave the correction room.
pub const EDEN_SCALES_MAX: f32 = 255.99;
/// 6 / (17/16 · 0.93), in f32 as the reference's constexpr is: its
/// backward scale override.
pub const EDEN_VAL_MAX: f32 = (6.0 / ((17.0 / 16.0) * 0.93)) as f32;

/// A Hadamard transform's (or MS-EDEN's) group along a line of `len`
/// values: the largest power of two up to `max` that divides `len`; `None`
/// where that is below 16 (`len` not a multiple of 16; `max` a power of
/// two).
pub fn line_group(len: usize, max: usize) -> Option<usize> {
    if len == 0 {
        return None;
    }
    let g = (1usize << len.trailing_zeros()).min(max);
    (g >= HADAMARD_BLOCK).then_some(g)
}

/// The Hadamard transform's normalization for blocks of `size`: 1/√size
/// rounded to f32 (exact for 16 and 64).
pub fn hadamard_scale(size: usize) -> f32 {
    (1.0 / (size as f64).sqrt()) as f32
}

/// QuEST's scale per standard deviation for 4 bits (Quartet's
/// `gaussian_scale` = 2.92247856 / 6), in f32 as the reference's constexpr.
pub const QUEST_SCALE: f32 = (2.92247856 / 6.0) as f32;
/// What QuEST adds to a block's scaled σ, so that a constant block has a scale.
pub const QUEST_EPS: f32 = 1e-8;
/// Tseng's ¾: S = 2^(floor(log2 amax) − 2) / ¾, one correctly rounded
/// quotient as the reference's `exp2(…) / (3/4)` (2^k·f32(4/3) where S is
/// normal; not where it is subnormal).
pub const TSENG_DIVISOR: f32 = 0.75;
/// Tseng's lowest block exponent: S = 2^k / ¾ is an f32 subnormal down
/// to k = −149 (as the reference's is); below (amax < 2^-147) the block's
/// scale underflows, held at 2^-149 / ¾.
pub const TSENG_EXP_MIN: i32 = -149;

/// TorchAO's floor under a line's amax before it divides (`EPS`, an f64):
/// lines below it all take the scale of `max / EPS`.
pub const ROW_EPS: f64 = 1e-12;

/// The smallest f32 at or above `ROW_EPS`, as bits: amax below it is
/// amax < ROW_EPS.
pub fn row_eps_bits() -> u32 {
    let e = ROW_EPS as f32;
    match (e as f64) < ROW_EPS {
        true => e.to_bits() + 1,
        false => e.to_bits(),
    }
}

/// k = floor(log2(s)) of a positive normal f32 s = sig·2^(e − 23) (sig in
/// [2^23, 2^24)) as torch computes it, log2 in f32 rounded to nearest:
/// e, or e + 1 where s lies so few ulps below 2^(e+1) that its log2
/// rounds to the integer e + 1 — n = 2^24 − sig ulps, with n < ln2·2^p,
/// 2^p ≤ |e + 1| < 2^(p+1) (no log2 of an f32 is a tie).
pub fn floor_log2_rounded(sig: u32, e: i32) -> i32 {
    let t = e + 1;
    if t == 0 {
        return e; // log2 just below 0 is a small f32, never 0
    }
    let p = 31 - t.unsigned_abs().leading_zeros();
    let n = (1u32 << 24) - sig;
    // floor(ln2·2^p) for p = 0..=7 (|e + 1| ≤ 255)
    const BELOW: [u32; 8] = [0, 1, 2, 5, 11, 22, 44, 88];
    e + (n <= BELOW[p as usize]) as i32
}

/// TorchAO's rowwise scale exponent for a line of finite amax: k with the
/// scale 2^k = 2^floor(log2(f32(max / max(amax, EPS)))), the quotient
/// here correctly rounded to f32 (torch divides in f64 then rounds: the
/// same but where the f64 quotient lands on an f32 midpoint, which no
/// amax of these tests does).
pub fn row_scale_exp(amax: f32, f: &Minifloat) -> i32 {
    if amax.to_bits() < row_eps_bits() {
        return row_scale_exp_at_eps(f);
    }
    let s = f.max() / amax;
    let bits = s.to_bits();
    floor_log2_rounded((bits & 0x7f_ffff) | 0x80_0000, (bits >> 23) as i32 - 127)
}

/// The exponent of lines whose amax is below `ROW_EPS`.
pub fn row_scale_exp_at_eps(f: &Minifloat) -> i32 {
    let s = (f.max() as f64 / ROW_EPS) as f32;
    let bits = s.to_bits();
    floor_log2_rounded((bits & 0x7f_ffff) | 0x80_0000, (bits >> 23) as i32 - 127)
}

#[cfg(test)]
mod tests;
