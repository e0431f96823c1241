//! AdamW's settings and the low-precision states' codes (int8's tables
//! and dither, FP8's E4M3 bytes, int4's maps, bf16): what the optimizer kernels
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

/// The `tensor` coordinate of bf16-sr master weights' random bits
/// (`random_bits(seed, step, MASTER_SR_STREAM, element)`): apart from the
/// quantizers' operand streams.
pub const MASTER_SR_STREAM: u32 = 0x6d61_7374;

/// TorchAO's `_fp32_to_bf16_sr` (torchao/optim/quant_utils.py): `x`'s top
/// 16 bits, one bf16 step away from zero iff `r16` (uniform in 0..65536) is
/// below its low 16 bits — so `x` rounds up with probability equal to
/// the fraction it drops: unbiased.
pub fn bf16_sr(x: f32, r16: u32) -> f32 {
    let bits = x.to_bits();
    let toward_zero = bits & 0xffff_0000;
    f32::from_bits(match r16 < (bits & 0xffff) {
        true => toward_zero + 0x1_0000,
        false => toward_zero,
    })
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

/// How a block-wise state codes a moment: a byte (or a nibble) per value,
/// packed little-end first into u32 words, and one f32 scale per block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ByteCode {
    /// webtrain's int8: the dynamic trees of [`Int8Maps::dynamic`], rounded
    /// stochastically; the scale is the block's absmax.
    Dynamic,
    /// TorchAO's FP8 state ([`Fp8Code`]).
    E4m3,
    /// TorchAO's 4-bit state ([`Int4Code`]): two values per byte.
    Int4,
    /// m on 8-bit Muon's linear code ([`LinearCode`]), v on the dynamic
    /// tree as `Dynamic`'s: a byte a value, blocks of 256.
    Linear,
}

impl ByteCode {
    /// Values per block (one scale per block and moment).
    pub fn block(self) -> usize {
        match self {
            ByteCode::Int4 => Int4Code::BLOCK,
            ByteCode::Dynamic | ByteCode::E4m3 | ByteCode::Linear => QBLOCK,
        }
    }

    /// Values per u32 word of codes.
    pub fn per_word(self) -> u64 {
        match self {
            ByteCode::Int4 => 8,
            ByteCode::Dynamic | ByteCode::E4m3 | ByteCode::Linear => 4,
        }
    }

    /// Bytes of one moment's codes for `n` values, in whole words. For `n`
    /// a multiple of the block it is also the byte offset of a chunk
    /// starting at element `n`.
    pub fn code_bytes(self, n: u64) -> u64 {
        n.div_ceil(self.per_word()) * 4
    }

    /// Bytes of one moment's block scales for `n` values (an f32 per
    /// block); for `n` a multiple of the block, a chunk's offset too:
    /// 256-byte aligned when `n` is a multiple of 16 384
    /// (`model::layout::CHUNK_ALIGN`).
    pub fn scale_bytes(self, n: u64) -> u64 {
        n.div_ceil(self.block() as u64) * 4
    }

    /// The code of element `i` in packed `bytes`: byte `i` (int8, fp8), or
    /// for int4 TorchAO's packing, element `2b` in byte `b`'s high nibble.
    pub fn code_at(self, bytes: &[u8], i: usize) -> u8 {
        match self {
            ByteCode::Int4 => (bytes[i / 2] >> (4 * (1 - i % 2))) & 15,
            ByteCode::Dynamic | ByteCode::E4m3 | ByteCode::Linear => bytes[i],
        }
    }

    /// Sets element `i`'s code in packed `bytes`.
    pub fn set_code(self, bytes: &mut [u8], i: usize, c: u8) {
        match self {
            ByteCode::Int4 => {
                let shift = 4 * (1 - i % 2);
                bytes[i / 2] = (bytes[i / 2] & !(15 << shift)) | (c << shift);
            }
            ByteCode::Dynamic | ByteCode::E4m3 | ByteCode::Linear => bytes[i] = c,
        }
    }
}

/// TorchAO's 4-bit optimizer state (pytorch/ao, `torchao/optim/
/// subclass_4bit.py` and `quant_utils.py`): blocks of 128 values, a
/// block's scale `amax.clip(1e-12)` (no division: the maps reach 1), a
/// value's code the nearest of 16 map points to `x / scale` by a binary
/// search and a midpoint test, its value `map[c] · scale`. m's map is the
/// signed dynamic map of 3 exponent bits, v's `linspace(0, 1, 17)[1:]`
/// (no zero: a v of 0 reads back as scale/16, which keeps m/√v finite).
/// Deterministic; every quotient and product correctly rounded, here and
/// in the kernel (`adamw_int4_update`).
pub struct Int4Code;

impl Int4Code {
    pub const BLOCK: usize = 128;
    pub const MIN_ABSMAX: f32 = 1e-12;

    /// The maps of m and v, ascending (made once: the twins read them per
    /// element).
    pub fn maps() -> &'static [[f32; 16]; 2] {
        static MAPS: std::sync::LazyLock<[[f32; 16]; 2]> = std::sync::LazyLock::new(|| {
            [
                signed_dynamic_map(),
                std::array::from_fn(|k| (k + 1) as f32 / 16.0),
            ]
        });
        &MAPS
    }

    pub fn scale(absmax: f32) -> f32 {
        absmax.max(Self::MIN_ABSMAX)
    }

    /// The code of `x` in a block of `scale` under `map`:
    /// `quantize_4bit_with_qmap`'s search and rounding.
    pub fn code(x: f32, scale: f32, map: &[f32; 16]) -> u8 {
        let y = x / scale;
        let mut c = 0;
        for step in [8, 4, 2, 1] {
            c += step * usize::from(y >= map[c + step]);
        }
        let up = (c + 1).min(15);
        let round_up = y - map[c] >= (map[up] - map[c]) * 0.5;
        (if round_up { up } else { c }) as u8
    }

    pub fn value(c: u8, scale: f32, map: &[f32; 16]) -> f32 {
        map[c as usize] * scale
    }
}

/// `create_dynamic_map(signed=True, max_exponent_bits=3, total_bits=4)`
/// (bitsandbytes' function, as TorchAO copies it), in torch's f32: for
/// decade i, the midpoints of `torch.linspace(0.1, 1, 2^i + 1)` times
/// f32(10^(i−2)), both signs; then 0 and 1, sorted.
fn signed_dynamic_map() -> [f32; 16] {
    let mut data = vec![0.0f32, 1.0];
    for (i, decade) in [0.01f32, 0.1, 1.0].into_iter().enumerate() {
        let b = torch_linspace(0.1, 1.0, (1 << i) + 1);
        for pair in b.windows(2) {
            let x = decade * ((pair[0] + pair[1]) / 2.0);
            data.extend([x, -x]);
        }
    }
    data.sort_by(f32::total_cmp);
    data.try_into().expect("16 points")
}

/// `torch.linspace(start, end, steps)` in f32 as ATen computes it on the
/// CPU for few steps: from the start below the halfway point, back from
/// the end above it.
fn torch_linspace(start: f32, end: f32, steps: usize) -> Vec<f32> {
    let step = (end - start) / (steps - 1) as f32;
    (0..steps)
        .map(|i| match i < steps / 2 {
            true => start + step * i as f32,
            false => end - step * (steps - i - 1) as f32,
        })
        .collect()
}

/// 8-bit Muon's linear code (Gupta et al., "Effective Quantization of
/// Muon Optimizer States", arXiv 2509.23106; no code published): a
/// block's scale is its absmax, a value's code `round(127 · x / absmax)`
/// as a signed byte, its value `absmax / 127 · code`. Computed as
/// `127 · (x / absmax)` (never overflows), to nearest even as
/// `torch.round`; every quotient and product correctly rounded, here and
/// in the kernels (`muon_momentum_linear`, `adamw_linear_update`).
pub struct LinearCode;

impl LinearCode {
    pub const LEVELS: f32 = 127.0;

    /// The byte of `x` (|x| ≤ absmax) in a block of `absmax`.
    pub fn code(x: f32, absmax: f32) -> u8 {
        if x == 0.0 {
            return 0; // and a zero block's 0/0
        }
        let q = (Self::LEVELS * (x / absmax)).round_ties_even();
        q.clamp(-Self::LEVELS, Self::LEVELS) as i8 as u8
    }

    pub fn value(c: u8, absmax: f32) -> f32 {
        c as i8 as f32 * (absmax / Self::LEVELS)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// TorchAO's 4-bit maps: m's the signed dynamic map of 3 exponent bits
    /// (its decimals, as f32 arithmetic gives them), v's k/16; codes to
    /// nearest with ties up, TorchAO's `>=` midpoint test.
    #[test]
    fn int4_maps_and_codes_are_torchaos() {
        let [m, v] = *Int4Code::maps();
        let half = [0.0055, 0.0325, 0.0775, 0.2125, 0.4375, 0.6625, 0.8875];
        let want: Vec<f32> = (half.iter().rev().map(|x| -x))
            .chain([0.0])
            .chain(half)
            .chain([1.0])
            .collect();
        for (got, want) in m.iter().zip(&want) {
            // f32(0.01)·mean and f32(0.1)·mean round once more than the decimal
            assert!(
                (got - want).abs() <= want.abs() * 1.2e-7,
                "{got} for {want}"
            );
        }
        println!("m map bits: {:08x?}", m.map(f32::to_bits));
        assert_eq!(v, std::array::from_fn(|k| (k + 1) as f32 / 16.0));
        let code = |x: f32, map| Int4Code::code(x, 1.0, map);
        assert_eq!((code(0.0, &m), code(1.0, &m), code(-1.0, &m)), (7, 15, 0));
        assert_eq!((code(0.0, &v), code(3.0 / 32.0, &v)), (0, 1)); // a tie goes up
        assert_eq!(code(f32::from_bits((3.0f32 / 32.0).to_bits() - 1), &v), 0);
        assert_eq!((code(0.5, &m), code(-0.5, &m)), (12, 2)); // nearest 0.4375, −0.4375
    }

    /// 8-bit Muon's linear code: ±absmax at ±127, zero at 0 (a zero block
    /// too), to nearest with ties to even (a tie comes only from the
    /// product 127·y rounding onto a half), values q · (absmax/127).
    #[test]
    fn linear_codes_are_round_127_x_over_absmax() {
        let s = 3.5f32;
        assert_eq!(LinearCode::code(s, s), 127);
        assert_eq!(LinearCode::code(-s, s) as i8, -127);
        assert_eq!(
            (LinearCode::code(0.0, 0.0), LinearCode::code(-0.0, s)),
            (0, 0)
        );
        assert_eq!(LinearCode::value(127, s), 127.0 * (s / 127.0));
        assert_eq!(LinearCode::value((-5i8) as u8, s), -5.0 * (s / 127.0));
        // every y in (0, 1] whose f32(127·y) is a half lands on the even side
        let mut ties = 0;
        for bits in (0.01f32.to_bits()..0.05f32.to_bits()).step_by(7) {
            let y = f32::from_bits(bits);
            let p = 127.0 * y;
            if p.fract() == 0.5 {
                ties += 1;
                let q = LinearCode::code(y, 1.0) as i8 as f32;
                assert_eq!(q, p.round_ties_even(), "y = {y}");
                assert_eq!(q % 2.0, 0.0);
            }
        }
        assert!(ties > 0, "no ties among the sampled y");
        // every code within half a level of 127·x/absmax
        let mut rng = crate::rng::SplitMix64(7);
        for _ in 0..10_000 {
            let x = rng.uniform(-1.0, 1.0);
            let q = LinearCode::code(x, 1.0) as i8 as f32;
            assert!((q - 127.0 * x).abs() <= 0.5 + 1e-4, "{x} → {q}");
        }
    }

    /// TorchAO's rule: over all 2^16 draws a value rounds away from zero
    /// exactly as often as the fraction it drops, so the mean is the value
    /// itself (exactly, in f64); a bf16 value never moves.
    #[test]
    fn bf16_sr_is_unbiased_and_keeps_bf16_values() {
        for x in [1.0f32 + 3.0 * f32::EPSILON, -0.3, 1e-30, -7.5e20, 0.1] {
            let sum: f64 = (0..1u32 << 16).map(|r| bf16_sr(x, r) as f64).sum();
            assert_eq!(sum / 65536.0, x as f64, "{x}: the mean of its roundings");
            let down = f32::from_bits(x.to_bits() & 0xffff_0000);
            assert_eq!(
                bf16_sr(x, 0xffff),
                down,
                "{x}: the largest draw rounds toward zero"
            );
        }
        for bits in [0x3f80u16, 0xc2f7, 0x0001, 0x7f7f] {
            let v = bf16_value(bits);
            assert!((0..1u32 << 16).step_by(97).all(|r| bf16_sr(v, r) == v));
        }
    }
}
