//! AdamW's settings and the low-precision states' codes (int8's tables
//! and dither, FP8's E4M3 bytes, bf16): what the optimizer kernels
//! (12_optimizer.wgsl), the host's state conversion and the CPU twin all
//! use.

/// AdamW's hyperparameters, as `torch.optim.AdamW` takes them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamHyper {
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
}

/// Values per quantization block (one scale per block and moment).
pub const QBLOCK: usize = 256;

/// An 8-bit code for one moment: the 256 ascending values a byte stands
/// for, as fractions of its block's scale, and each value's distance to the
/// next one above, cut to 16 significant bits. `x` is rounded
/// stochastically: between its neighbours `values[k]` and `values[k+1]` it
/// takes `k + 1` when `x > (values[k] + r/256 · steps[k]) · scale` for a
/// dither `r` in 0..256, so the code is unbiased, and a moment that drifts
/// by less than half a code step per update still moves on average. The cut
/// makes `r/256 · steps[k]` exact (8 + 16 bits), so the threshold is the
/// same whether or not a compiler fuses it into an fma: the kernel and this
/// twin choose the same byte.
#[derive(Clone, Debug, PartialEq)]
pub struct Int8Map {
    pub values: [f32; 256],
    pub steps: [f32; 256],
}

/// `x` with its significand cut to 16 bits (toward zero).
fn cut16(x: f32) -> f32 {
    f32::from_bits(x.to_bits() & 0xffff_ff00)
}

impl Int8Map {
    /// The map of 256 ascending code points `p`. With `squared`, the points
    /// code `sqrt(x / scale)`: a byte stands for `p²`, so the kernel takes
    /// no square root (WGSL's is not correctly rounded) and the rounding is
    /// unbiased in x itself. The tables are computed here and uploaded.
    pub fn from_points(p: &[f32; 256], squared: bool) -> Self {
        let values = p.map(|x| if squared { x * x } else { x });
        let steps = std::array::from_fn(|k| {
            if k < 255 {
                cut16(values[k + 1] - values[k])
            } else {
                0.0
            }
        });
        Int8Map { values, steps }
    }

    /// The code of `x` in a block of absmax `scale` with dither `r` (0..256):
    /// a branch-free binary search for the value at or below x, then the
    /// stochastic step up, as `quantize` in the kernel.
    pub fn quantize(&self, x: f32, scale: f32, r: u32) -> u8 {
        let mut k = 0;
        for step in [128, 64, 32, 16, 8, 4, 2, 1] {
            k += step * usize::from(x >= self.values[k + step] * scale);
        }
        let threshold = self.values[k] + (r as f32 / 256.0) * self.steps[k];
        (k + usize::from(k < 255 && x > threshold * scale)) as u8
    }

    pub fn dequantize(&self, code: u8, scale: f32) -> f32 {
        self.values[code as usize] * scale
    }
}

/// The dither of element `i` of a block at step `t` for moment `moment`
/// (0: m, 1: v), in 0..256: an integer hash (lowbias32, C. Wellons), the
/// same u32 arithmetic as `dither` in 12_optimizer.wgsl.
pub fn dither(i: u32, t: u32, moment: u32) -> u32 {
    let mix = |mut x: u32| {
        x ^= x >> 16;
        x = x.wrapping_mul(0x7feb_352d);
        x ^= x >> 15;
        x = x.wrapping_mul(0x846c_a68b);
        x ^ (x >> 16)
    };
    mix(i ^ mix(2 * t + moment)) >> 24
}

/// Ascending magnitudes in (0, 1] of a dynamic tree code: decade `e`
/// (values in (10^-(e+1), 10^-e]) holds `counts[e]` values spaced linearly
/// up to 10^-e, so 1 is a code point and each decade down gets fewer.
fn dynamic_magnitudes(counts: &[u32]) -> Vec<f64> {
    let mut out = Vec::new();
    for (e, &n) in counts.iter().enumerate() {
        let top = 10f64.powi(-(e as i32));
        out.extend((1..=n).map(|j| top * (0.1 + 0.9 * j as f64 / n as f64)));
    }
    out.sort_by(f64::total_cmp);
    out
}

fn points(values: impl IntoIterator<Item = f64>) -> [f32; 256] {
    let v: Vec<f32> = values.into_iter().map(|x| x as f32).collect();
    v.try_into().expect("an 8-bit code has 256 points")
}

/// The first moment's code points: a signed dynamic tree, 64 values in
/// (0.1, 1], 32 in (0.01, 0.1], … 1 at 1e-6 on each side; 0; and one more
/// negative point, 1e-7, to fill 256. Byte k is the k-th point, ascending.
pub fn moment1_points() -> [f32; 256] {
    let neg = dynamic_magnitudes(&[64, 32, 16, 8, 4, 2, 1, 1]);
    let pos = dynamic_magnitudes(&[64, 32, 16, 8, 4, 2, 1]);
    points(neg.iter().rev().map(|x| -x).chain([0.0]).chain(pos))
}

/// The second moment's code points, on `sqrt(v / absmax)`: 0 and an
/// unsigned dynamic tree, 160 values in (0.1, 1], 48 in (0.01, 0.1], then
/// 24, 12, 6, 3, 1, 1 down to 1e-7. On the root, v keeps a nonzero code
/// down to 1e-14 of its block's largest, so m/sqrt(v) never meets a v
/// flushed to 0 while m is not (m's smallest code is 1e-7 of its absmax);
/// the top decade holds most codes because that is where rounding loses
/// the slow drift of v when β2 is near 1 (docs/KERNELS.md has the study).
pub fn moment2_points() -> [f32; 256] {
    points(
        [0.0]
            .into_iter()
            .chain(dynamic_magnitudes(&[160, 48, 24, 12, 6, 3, 1, 1])),
    )
}

/// The codes of both moments.
#[derive(Clone, Debug, PartialEq)]
pub struct Int8Maps {
    pub m: Int8Map,
    pub v: Int8Map,
}

impl Int8Maps {
    /// The kernel's: dynamic trees, m signed, v on its root.
    pub fn dynamic() -> Self {
        Int8Maps {
            m: Int8Map::from_points(&moment1_points(), false),
            v: Int8Map::from_points(&moment2_points(), true),
        }
    }

    /// The seed's linear codes (k/127 for m, k/255 for v), for comparison;
    /// m's lowest byte, -128/127, is never chosen.
    pub fn linear() -> Self {
        Int8Maps {
            m: Int8Map::from_points(&points((0..256).map(|k| (k as f64 - 128.0) / 127.0)), false),
            v: Int8Map::from_points(&points((0..256).map(|k| k as f64 / 255.0)), false),
        }
    }
}

/// How the 8-bit state codes a moment: one byte per value, one f32 scale
/// per block of [`QBLOCK`] values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ByteCode {
    /// webtrain's int8: the dynamic trees of [`Int8Maps::dynamic`], rounded
    /// stochastically; the scale is the block's absmax.
    Dynamic,
    /// TorchAO's FP8 state ([`Fp8Code`]).
    E4m3,
}

/// TorchAO's FP8 optimizer state (pytorch/ao@36027d8,
/// `torchao/optim/subclass_fp8.py`, `quantize_fp8`): a block's scale is
/// `amax.clip(1e-12) / 448` in f32, a value's byte `(x / scale)` cast to
/// float8_e4m3fn (to nearest even), its value back `code · scale`. Every
/// quotient and product is correctly rounded, here and in the kernel
/// (`adamw_fp8_update`), so the two agree bit for bit.
pub struct Fp8Code;

impl Fp8Code {
    /// E4M3's largest value: a block's absmax maps to it.
    pub const MAX: f32 = 448.0;
    /// TorchAO's floor under a block's absmax (a zero block keeps a scale).
    pub const MIN_ABSMAX: f32 = 1e-12;

    pub fn scale(absmax: f32) -> f32 {
        absmax.max(Self::MIN_ABSMAX) / Self::MAX
    }

    /// The byte of `x` in a block of `scale`.
    pub fn code(x: f32, scale: f32) -> u8 {
        let y = x / scale;
        let sign = if y.is_sign_negative() { 0x80 } else { 0 };
        let a = y.abs().min(Self::MAX); // within 448 by the scale
        let magnitude = if a < 1.0 / 64.0 {
            (a * 512.0).round_ties_even() // subnormal: m·2^-9 (m = 8 is 2^-6's code)
        } else {
            let e = (a.to_bits() >> 23) as i32 - 127;
            let fraction = (a / 2f32.powi(e) - 1.0) * 8.0; // exact: 24 bits
            ((e + 7) * 8) as f32 + fraction.round_ties_even() // a carry is the next binade's code
        };
        sign | magnitude as u8
    }

    /// The value of byte `c` (below 0x7f, E4M3's NaN) in a block of `scale`.
    pub fn value(c: u8, scale: f32) -> f32 {
        let (e, m) = ((c >> 3) & 15, (c & 7) as f32);
        let magnitude = match e {
            0 => m / 512.0,
            _ => (8.0 + m) * 2f32.powi(e as i32 - 10),
        };
        let v = if c & 0x80 != 0 { -magnitude } else { magnitude };
        v * scale
    }
}

/// bf16 moments (DeepSeek-V3's): a value's bits, to nearest even (the cast
/// `torch.Tensor.to(torch.bfloat16)` makes), and its value back.
pub fn bf16_bits(x: f32) -> u16 {
    half::bf16::from_f32(x).to_bits()
}

pub fn bf16_value(bits: u16) -> f32 {
    half::bf16::from_bits(bits).to_f32()
}
