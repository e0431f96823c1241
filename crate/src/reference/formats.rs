//! Twins of 00_formats.wgsl and 14_quantize.wgsl: the element formats'
//! round trips (plain, scaled, stochastic), OCP MX and NVFP4 blocks (Four
//! Over Six's here, MS-EDEN's in `ms_eden`, Quartet's MXFP4 in `quartet`), the counter-based random
//! bits, the random Hadamard transform and the noise criterion's sums;
//! and, to
//! check them against the formats' definitions, each format's codes
//! decoded from their bits and E8M0's scales.

use crate::gpu::WG;
use crate::ops::formats::{
    Blocks, Counts, Element, F32, FOUR_OVER_SIX_RANGE, Minifloat, NVFP4_RANGE, Quantization,
    Scaling, Stream, hadamard_scale, pow2, row_scale_exp,
};

const SIGN: u32 = 0x8000_0000;

/// |x| (finite, nonzero) as sig·2^(e − 23), sig in [2^23, 2^24).
fn split(x: f32) -> (u32, i32) {
    let u = x.to_bits() & 0x7fff_ffff;
    match u >> 23 {
        0 => {
            let top = 31 - u.leading_zeros();
            (u << (23 - top), top as i32 - 149)
        }
        biased => ((u & 0x7f_ffff) | 0x80_0000, biased as i32 - 127),
    }
}

/// f32 bits of sig·2^qe (exactly representable, or beyond: Inf).
fn f32_bits(sig: u32, qe: i32) -> u32 {
    let p = 31 - sig.leading_zeros() as i32;
    let e = qe + p;
    if e > 127 {
        return 0x7f80_0000;
    }
    if e >= -126 {
        let m = if p > 23 {
            sig >> (p - 23)
        } else {
            sig << (23 - p)
        };
        return ((e + 127) as u32) << 23 | (m & 0x7f_ffff);
    }
    sig << (qe + 149)
}

/// How values are rounded: to nearest even, or stochastically from the
/// random bits given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rounding {
    Nearest,
    Stochastic(u32),
}

/// `round_magnitude`: sig·2^e0 in `f` scaled by 2^k; (f32 bits, beyond max).
fn round_magnitude(sig: u32, e0: i32, f: &Minifloat, k: i32, rounding: Rounding) -> (u32, bool) {
    if sig == 0 {
        return (0, false);
    }
    let e = e0 + 31 - sig.leading_zeros() as i32;
    let emax = f.emax + k;
    let qe = e.max(f.emin() + k) - f.man as i32;
    let drop = qe - e0;
    let (mut kept, frac) = match drop {
        ..=0 => (sig << -drop, 0),
        1..=31 => (sig >> drop, (sig & ((1 << drop) - 1)) << (32 - drop)),
        32..=63 => (0, sig >> (drop - 32)),
        _ => (0, 0),
    };
    let beyond = e > emax || (e == emax && (kept > f.max_sig || (kept == f.max_sig && frac != 0)));
    let up = match rounding {
        Rounding::Stochastic(r) => r < frac,
        Rounding::Nearest => frac > SIGN || (frac == SIGN && kept & 1 == 1),
    };
    kept += up as u32;
    let over = e > emax || (qe == emax - f.man as i32 && kept > f.max_sig);
    if over {
        let top = match f.overflow_to_inf {
            true => 0x7f80_0000,
            false => f32_bits(f.max_sig, emax - f.man as i32),
        };
        return (top, beyond);
    }
    match kept {
        0 => (0, beyond),
        _ => (f32_bits(kept, qe), beyond),
    }
}

/// x through `f` scaled by 2^k: round(x / 2^k)·2^k, exactly, and whether
/// |x| was beyond the largest finite value. NaN stays NaN; ±Inf gives ±max
/// (±Inf where the format overflows to Inf); the sign is kept.
pub fn quantize_scaled(x: f32, f: &Minifloat, k: i32, rounding: Rounding) -> (f32, bool) {
    if x.is_nan() {
        return (x, false);
    }
    let sign = x.to_bits() & SIGN;
    let (bits, saturated) = if x.is_infinite() {
        let top = match f.overflow_to_inf {
            true => 0x7f80_0000,
            false => f32_bits(f.max_sig, f.emax + k - f.man as i32),
        };
        (top, true)
    } else if x == 0.0 {
        (0, false)
    } else {
        let (sig, e) = split(x);
        round_magnitude(sig, e - 23, f, k, rounding)
    };
    (f32::from_bits(bits | sign), saturated)
}

/// x in `e`, to nearest even: bf16 and f16 as their casts (overflow to
/// ±Inf), the others saturating to ±max.
pub fn round_format(x: f32, e: Element) -> f32 {
    quantize_scaled(x, &e.spec(), 0, Rounding::Nearest).0
}

/// Whether a nonzero, non-NaN x became 0.
pub fn flushed_to_zero(x: f32, y: f32) -> bool {
    x.to_bits() & 0x7fff_ffff != 0 && !x.is_nan() && y.to_bits() & 0x7fff_ffff == 0
}

/// The value of code `code` (its low `bits()` bits) of `e`, from the
/// format's definition: (−1)^s · 2^(E − bias) · (1 + M/2^m), subnormals
/// 2^(1 − bias) · M/2^m, and the codes the format gives Inf and NaN.
pub fn decode(e: Element, code: u32) -> f32 {
    let f = e.spec();
    let (m, eb) = (f.man, f.exp_bits);
    let sign: f64 = if code >> (eb + m) & 1 == 1 { -1.0 } else { 1.0 };
    let (exp, man) = ((code >> m) & ((1 << eb) - 1), code & ((1 << m) - 1));
    let top = exp == (1 << eb) - 1;
    if top && f.has_inf && man == 0 && e != Element::E4m3 {
        return (sign * f64::INFINITY) as f32;
    }
    if top && f.has_nan && (e != Element::E4m3 || man == (1 << m) - 1) {
        return f32::NAN;
    }
    let frac = man as f64 / (1u64 << m) as f64;
    let v = match exp {
        0 => frac * 2f64.powi(f.emin()),
        _ => (1.0 + frac) * 2f64.powi(exp as i32 - f.bias),
    };
    (sign * v) as f32
}

/// E8M0's code for the scale 2^k (k in [-127, 127]); 0xff is NaN.
pub fn e8m0_encode(k: i32) -> u8 {
    (k.clamp(-127, 127) + 127) as u8
}

/// E8M0 code `c` as a value: 2^(c − 127), NaN for 0xff.
pub fn e8m0_decode(c: u8) -> f32 {
    match c {
        0xff => f32::NAN,
        _ => pow2(c as i32 - 127),
    }
}

/// The random bits of element `index` of tensor `tensor` at `step` of a
/// run seeded `seed` (pcg4d, as 00_formats.wgsl `random_bits`).
pub fn random_bits(seed: u32, step: u32, tensor: u32, index: u32) -> u32 {
    let mut v =
        [index, tensor, step, seed].map(|x| x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223));
    let mix = |v: &mut [u32; 4]| {
        v[0] = v[0].wrapping_add(v[1].wrapping_mul(v[3]));
        v[1] = v[1].wrapping_add(v[2].wrapping_mul(v[0]));
        v[2] = v[2].wrapping_add(v[0].wrapping_mul(v[1]));
        v[3] = v[3].wrapping_add(v[1].wrapping_mul(v[2]));
    };
    mix(&mut v);
    v = v.map(|x| x ^ (x >> 16));
    mix(&mut v);
    v[0]
}

/// How `q` rounds element i.
fn rounding(q: &Quantization, i: usize) -> Rounding {
    match q.stochastic {
        None => Rounding::Nearest,
        Some(s) => Rounding::Stochastic(random_bits(s.seed, s.step, s.tensor, i as u32)),
    }
}

/// Twin of 14_quantize.wgsl's `quantize_cast`, `quantize_amax` and
/// `quantize_blocks`: `x` ([_, cols], checked by `Quantization::check`)
/// through `q` and back, and the counts.
pub fn quantize(q: &Quantization, x: &[f32], cols: usize) -> (Vec<f32>, Counts) {
    let mut c = Counts::default();
    let f = q.format.element.spec();
    let mut y = vec![0.0; x.len()];
    let amax_t = x
        .iter()
        .filter(|v| v.is_finite())
        .map(|v| v.to_bits() & 0x7fff_ffff)
        .max()
        .unwrap_or(0);
    if matches!(q.format.scaling, Scaling::None | Scaling::Tensor) {
        let k = match q.format.scaling {
            Scaling::Tensor if amax_t != 0 => {
                let raw = mx_scale_exp(f32::from_bits(amax_t), &f, true);
                c.blocks_scale_underflowed += (raw < -127) as u32;
                raw.clamp(-127, 127)
            }
            _ => 0,
        };
        for (i, (&xi, yi)) in x.iter().zip(&mut y).enumerate() {
            let (v, sat) = quantize_scaled(xi, &f, k, rounding(q, i));
            *yi = v;
            c.saturated += sat as u32;
            c.flushed += flushed_to_zero(xi, v) as u32;
        }
        return (y, c);
    }
    if q.format.scaling == Scaling::MsEden {
        return ms_eden::quantize(q, x, cols, amax_t);
    }
    let shape = [x.len() / cols.max(1), cols];
    for b in 0..q.block_count(shape) {
        let idx: Vec<usize> = q.block_values(b, shape).collect();
        let finite = idx.iter().all(|&i| x[i].is_finite());
        let amax = idx
            .iter()
            .map(|&i| x[i].to_bits() & 0x7fff_ffff)
            .max()
            .unwrap_or(0);
        let nvfp4 = q.format.scaling.is_nvfp4();
        if !finite {
            c.blocks_scale_saturated += 1;
            for &i in &idx {
                c.saturated += x[i].is_infinite() as u32;
                y[i] = f32::from_bits(0x7fc0_0000 | (x[i].to_bits() & SIGN));
            }
        } else if amax == 0 || (nvfp4 && amax_t == 0) {
            for &i in &idx {
                y[i] = x[i];
            }
        } else if q.format.scaling == Scaling::Quest {
            quartet::quest_block(x, &mut y, &idx, &mut c);
        } else if q.format.scaling == Scaling::Tseng {
            let amax = f32::from_bits(amax);
            quartet::tseng_block(x, &mut y, (&idx, amax), |i| rounding(q, i), &mut c);
        } else if !nvfp4 {
            let raw = match q.format.scaling {
                Scaling::Row => -row_scale_exp(f32::from_bits(amax), &f),
                s => mx_scale_exp(f32::from_bits(amax), &f, s.rounds_up()),
            };
            c.blocks_scale_underflowed += (raw < -127) as u32;
            c.blocks_scale_saturated += (raw > 127) as u32;
            let k = raw.clamp(-127, 127);
            for &i in &idx {
                let (v, sat) = quantize_scaled(x[i], &f, k, rounding(q, i));
                y[i] = v;
                c.saturated += sat as u32;
                c.flushed += flushed_to_zero(x[i], v) as u32;
            }
        } else if q.format.scaling == Scaling::Nvfp4 {
            nvfp4_block(q, x, &mut y, &idx, amax, amax_t, &mut c);
        } else {
            four_over_six_block(q, x, &mut y, &idx, (amax, amax_t), &mut c);
        }
    }
    (y, c)
}

/// Four Over Six's tensor scale for amax_t = m·2^j (m in [1, 2)): with
/// every value x taken as x' = x·2^-j, enc = 1536 / m and dec = 1 / enc,
/// the reference's 1536 / amax_t and its reciprocal times 2^j and 2^-j.
/// Scaled so, every quotient and product below is a normal f32 for any
/// finite amax_t, and equals the reference's wherever its own are normal.
#[derive(Clone, Copy, Debug)]
pub struct FourOverSixTensor {
    pub m: f32,
    pub enc: f32,
    pub dec: f32,
    pub j: i32,
}

impl FourOverSixTensor {
    pub fn new(amax_t: f32) -> Self {
        let (sig, j) = split(amax_t);
        let m = f32::from_bits(0x3f80_0000 | (sig & 0x7f_ffff));
        let enc = FOUR_OVER_SIX_RANGE / m;
        FourOverSixTensor {
            m,
            enc,
            dec: 1.0 / enc,
            j,
        }
    }

    /// A block's two E4M3 scales, from its amax: mapping it to 6, and 1.5
    /// times that (mapping it to 4), rounded from the same product.
    pub fn scales(&self, amax_b: f32) -> [f32; 2] {
        let u = unscale(amax_b, self.j);
        if u < pow2(-100) {
            return [0.0; 2];
        }
        let hp = u / 6.0 * self.enc;
        [
            round_format(hp, Element::E4m3),
            round_format(hp * 1.5, Element::E4m3),
        ]
    }

    /// |x'| (x' = x·2^-j) through block scale `s`, rounded as `rounding`
    /// says: the dequantized magnitude (q·s·m / 1536, in the scaled
    /// domain), whether q saturated at E2M1's 6, and its error term against
    /// |x'|: squared, or with `mae` absolute; below 2^-126 taken as 0 (a
    /// GPU may flush it).
    pub fn value(&self, xn: f32, s: f32, mae: bool, rounding: Rounding) -> (f32, bool, f32) {
        let (y, saturated) = match s == 0.0 {
            true => (0.0, false),
            false => {
                let r = 1.0 / (self.dec * s);
                let (q, sat) = quantize_scaled(xn * r, &Element::E2m1.spec(), 0, rounding);
                let y = match q == 0.0 {
                    true => 0.0,
                    false => q * s * self.m / FOUR_OVER_SIX_RANGE,
                };
                (y, sat)
            }
        };
        let d = y - xn;
        let e = if mae { d.abs() } else { d * d };
        (y, saturated, if e < pow2(-126) { 0.0 } else { e })
    }
}

/// One Four Over Six block (`quantize_blocks`' Four Over Six branch):
/// both candidates' errors summed over the block in order, the smaller
/// kept (ties: the scale mapping to 6); a block whose kept scale is 0 is
/// zeros.
fn four_over_six_block(
    q: &Quantization,
    x: &[f32],
    y: &mut [f32],
    idx: &[usize],
    (amax, amax_t): (u32, u32),
    c: &mut Counts,
) {
    let mae = q.format.scaling == Scaling::FourOverSixMae;
    let t = FourOverSixTensor::new(f32::from_bits(amax_t));
    let scales = t.scales(f32::from_bits(amax));
    let value = |i: usize, s: f32| t.value(unscale(x[i], t.j), s, mae, rounding(q, i));
    let err = |s: f32| idx.iter().fold(0.0f32, |sum, &i| sum + value(i, s).2);
    let s = match err(scales[1]) < err(scales[0]) {
        true => scales[1],
        false => scales[0],
    };
    c.blocks_scale_underflowed += (s == 0.0) as u32;
    for &i in idx {
        let (v, sat, _) = value(i, s);
        let bits = match v == 0.0 {
            true => 0,
            false => {
                let (sig, e) = split(v);
                round_magnitude(sig, e - 23 + t.j, &F32, 0, Rounding::Nearest).0
            }
        };
        y[i] = f32::from_bits(bits | (x[i].to_bits() & SIGN));
        c.saturated += sat as u32;
        c.flushed += flushed_to_zero(x[i], y[i]) as u32;
    }
}

/// One NVFP4 block (`quantize_blocks`' last branch).
fn nvfp4_block(
    q: &Quantization,
    x: &[f32],
    y: &mut [f32],
    idx: &[usize],
    amax: u32,
    amax_t: u32,
    c: &mut Counts,
) {
    let f = q.format.element.spec();
    let (s_n, j) = nvfp4_tensor_scale(f32::from_bits(amax_t));
    let u = unscale(f32::from_bits(amax), j);
    let d = match u >= pow2(-100) {
        true => round_format(u / 6.0 * s_n, Element::E4m3),
        false => 0.0,
    };
    if d == 0.0 {
        c.blocks_scale_underflowed += 1;
        for &i in idx {
            y[i] = f32::from_bits(x[i].to_bits() & SIGN);
            c.flushed += flushed_to_zero(x[i], 0.0) as u32;
        }
        return;
    }
    let (up, down) = (s_n / d, split(d / s_n));
    for &i in idx {
        let xn = unscale(x[i], j);
        let (e, sat) = quantize_scaled(xn * up, &f, 0, rounding(q, i));
        let bits = match e == 0.0 {
            true => 0,
            false => {
                let sq = split(e);
                let prod = (sq.0 >> (23 - f.man)) * down.0;
                let e0 = sq.1 - f.man as i32 + down.1 - 23 + j;
                round_magnitude(prod, e0, &F32, 0, Rounding::Nearest).0
            }
        };
        y[i] = f32::from_bits(bits | (x[i].to_bits() & SIGN));
        c.saturated += sat as u32;
        c.flushed += flushed_to_zero(x[i], y[i]) as u32;
    }
}

/// MX's scale exponent for a block of largest magnitude `amax` (finite,
/// nonzero), unclamped: floor(log2 amax) − emax, or with `ceil` the
/// smallest k with amax ≤ max·2^k.
pub fn mx_scale_exp(amax: f32, f: &Minifloat, ceil: bool) -> i32 {
    let (sig, e) = split(amax);
    e - f.emax + (ceil && sig > f.max_sig << (23 - f.man)) as i32
}

/// NVFP4's tensor scale S = 2688 / amax_t as (S_n, j): amax_t = m·2^j with
/// m in [1, 2), S_n = 2688 / m, S = S_n·2^-j.
pub fn nvfp4_tensor_scale(amax_t: f32) -> (f32, i32) {
    let (sig, j) = split(amax_t);
    (
        NVFP4_RANGE / f32::from_bits(0x3f80_0000 | (sig & 0x7f_ffff)),
        j,
    )
}

/// |x|·2^-j, or 0 where that is below 2^-126.
fn unscale(x: f32, j: i32) -> f32 {
    if x == 0.0 {
        return 0.0;
    }
    let (sig, e) = split(x);
    match e - j < -126 {
        true => 0.0,
        false => f32::from_bits(f32_bits(sig, e - j - 23)),
    }
}

/// The random Hadamard transform of blocks of `size` values (`hadamard16`,
/// `hadamard_wide`) of a [_, cols] matrix, along its rows or down its
/// columns: forward y = H·(s∘x)·c, inverse x = s∘(H·y)·c, c =
/// `hadamard_scale(size)`, the signs s from (seed, step, tensor), position
/// j's from bit 0 of `random_bits` of j (none for `None`).
pub fn hadamard(
    x: &[f32],
    s: Option<Stream>,
    inverse: bool,
    cols: usize,
    (blocks, size): (Blocks, usize),
) -> Vec<f32> {
    let flip = |v: f32, j: usize| {
        let bit = s.map_or(0, |s| {
            (random_bits(s.seed, s.step, s.tensor, j as u32) & 1) << 31
        });
        f32::from_bits(v.to_bits() ^ bit)
    };
    let scale = hadamard_scale(size);
    let mut y = vec![0.0; x.len()];
    let shape = [x.len() / cols, cols];
    for b in 0..x.len() / size {
        let block = blocks.block(size, b, shape, [0, 0]);
        let idx: Vec<usize> = (0..size).map(|j| blocks.index(block, j, cols)).collect();
        let mut v: Vec<f32> = idx
            .iter()
            .enumerate()
            .map(|(j, &i)| if inverse { x[i] } else { flip(x[i], j) })
            .collect();
        let mut h = 1;
        while h < size {
            for i in (0..size).filter(|i| i & h == 0) {
                let (a, c) = (v[i], v[i + h]);
                (v[i], v[i + h]) = (a + c, a - c);
            }
            h <<= 1;
        }
        for (j, &i) in idx.iter().enumerate() {
            let t = v[j] * scale;
            y[i] = if inverse { flip(t, j) } else { t };
        }
    }
    y
}

/// `Quantize::encode_noise`'s sums of `y` as a quantization of `x`, added
/// to `acc` ([Σx², Σ(y − x)²]) in its order: `groups` workgroups of WG
/// lanes, lane l of group g summing values g·WG + l + k·groups·WG over the
/// pairs whose x and y − x are finite, each group's lanes in a tree, the
/// groups' sums in turn.
pub fn noise_sums(x: &[f32], y: &[f32], groups: usize, acc: [f32; 2]) -> [f32; 2] {
    let wg = WG as usize;
    let mut out = acc;
    for g in 0..groups {
        let mut lanes = vec![[0f32; 2]; wg];
        for (l, lane) in lanes.iter_mut().enumerate() {
            for i in (g * wg + l..x.len()).step_by(groups * wg) {
                let (a, d) = (x[i], y[i] - x[i]);
                if a.is_finite() && d.is_finite() {
                    lane[0] += a * a;
                    lane[1] += d * d;
                }
            }
        }
        let mut half = wg / 2;
        while half > 0 {
            for l in 0..half {
                lanes[l][0] += lanes[l + half][0];
                lanes[l][1] += lanes[l + half][1];
            }
            half /= 2;
        }
        out[0] += lanes[0][0];
        out[1] += lanes[0][1];
    }
    out
}

#[cfg(test)]
mod four_over_six_tests;
pub mod ms_eden;
pub mod quartet;
#[cfg(test)]
mod quartet_tests;
#[cfg(test)]
mod row_tests;
#[cfg(test)]
mod tests;
