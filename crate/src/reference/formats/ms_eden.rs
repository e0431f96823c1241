//! MS-EDEN's twin (Quartet II's backward rounding of NVFP4's block
//! scales): 14_quantize.wgsl's `quantize_eden`, in plain f32 arithmetic,
//! every operation correctly rounded as the GPU's integer versions are.

use super::{SIGN, flushed_to_zero, random_bits, round_format};
use crate::ops::formats::{
    Blocks, Counts, EDEN_SCALES_MAX, EDEN_VAL_MAX, Element, NVFP4_BLOCK, Quantization, pow2,
};

/// E2M1's midpoints between neighbouring values, each with the value
/// above it, largest first: the IST-DASLab kernels' rounding thresholds.
pub const E2M1_MIDPOINTS: [(f32, f32); 7] = [
    (5.0, 6.0),
    (3.5, 4.0),
    (2.5, 3.0),
    (1.75, 2.0),
    (1.25, 1.5),
    (0.75, 1.0),
    (0.25, 0.5),
];

/// E2M1 to nearest with ties away from zero, by the reference's
/// thresholds (`rtn_fp4`); −0 for ±0, as its sign (x > 0 ? 1 : −1) gives.
pub fn e2m1_away(v: f32) -> f32 {
    let a = v.abs();
    let q = E2M1_MIDPOINTS
        .iter()
        .find(|(t, _)| a >= *t)
        .map_or(0.0, |&(_, q)| q);
    if v > 0.0 { q } else { -q }
}

/// The E4M3 values either side of a positive `c` (≤ 448): the lower and
/// the upper neighbour of its rounding, as the reference takes them from
/// the rounded code ± 1.
pub fn e4m3_neighbours(c: f32) -> (f32, f32) {
    let cur = round_format(c, Element::E4m3);
    let exp = |v: f32| ((v.to_bits() >> 23) as i32 - 127).max(-6);
    if cur > c {
        let pow2_above = cur.to_bits() & 0x7f_ffff == 0 && exp(cur) > -6;
        (cur - pow2(exp(cur) - 3 - pow2_above as i32), cur)
    } else if cur == 0.0 {
        (0.0, pow2(-9))
    } else {
        (cur, cur + pow2(exp(cur) - 3))
    }
}

/// `x` ([_, cols]) through MS-EDEN (`Scaling::MsEden`), its tensor amax's
/// bits `amax_t`: groups of `Quantization::eden_group` values along each
/// line, drawn from `q.stochastic`'s stream (or seed, step and tensor 0).
pub(super) fn quantize(
    q: &Quantization,
    x: &[f32],
    cols: usize,
    amax_t: u32,
) -> (Vec<f32>, Counts) {
    let rows = x.len() / cols;
    let size = q.eden_group([rows, cols]);
    let (seed, step, tensor) = q
        .stochastic
        .map_or((0, 0, 0), |s| (s.seed, s.step, s.tensor));
    let g = match amax_t {
        0 => 1.0,
        bits => f32::from_bits(bits) / EDEN_SCALES_MAX / EDEN_VAL_MAX,
    };
    let mut y = vec![0.0; x.len()];
    let mut c = Counts::default();
    let (lines, len, stride) = match q.blocks {
        Blocks::Rows => (rows, cols, 1),
        _ => (cols, rows, cols),
    };
    for line in 0..lines {
        let start = match q.blocks {
            Blocks::Rows => line * cols,
            _ => line,
        };
        for first in (0..len).step_by(size).map(|k| start + k * stride) {
            let block =
                |b: usize| (0..NVFP4_BLOCK).map(move |j| first + (b * NVFP4_BLOCK + j) * stride);
            let blocks = size / NVFP4_BLOCK;
            // each block's scale (0 for a block not finite), and the sums
            let mut scales = vec![0.0f32; blocks];
            let (mut num, mut den) = (0.0f32, 0.0f32);
            for (b, scale) in scales.iter_mut().enumerate() {
                if !block(b).all(|i| x[i].is_finite()) {
                    continue;
                }
                let amax = block(b).map(|i| x[i].abs()).fold(0.0, f32::max);
                let mut sb = match amax == 0.0 {
                    true => 0.0,
                    false => round_format(amax / EDEN_VAL_MAX / g, Element::E4m3),
                };
                if sb == 0.0 {
                    c.blocks_scale_underflowed += (amax != 0.0) as u32;
                    sb = 1.0;
                }
                *scale = sb;
                for i in block(b) {
                    let v = x[i] / (sb * g);
                    let q = e2m1_away(v);
                    num += v * v;
                    den += v * q;
                    c.saturated += (v.abs() > 6.0) as u32;
                }
            }
            let corr = if den != 0.0 { num / den } else { 1.0 };
            for (b, &sb) in scales.iter().enumerate() {
                let at = first + b * NVFP4_BLOCK * stride;
                if sb == 0.0 {
                    c.blocks_scale_saturated += 1;
                    for i in block(b) {
                        c.saturated += x[i].is_infinite() as u32;
                        y[i] = f32::from_bits(0x7fc0_0000 | (x[i].to_bits() & SIGN));
                    }
                    continue;
                }
                let corrected = sb * corr;
                let (lo, hi) = e4m3_neighbours(corrected);
                let p = (corrected - lo) / (hi - lo);
                let u = (random_bits(seed, step, tensor, at as u32) >> 8) as f32 * pow2(-24);
                let scale = if u < p { hi } else { lo };
                for i in block(b) {
                    y[i] = e2m1_away(x[i] / (sb * g)) * scale * g;
                    c.flushed += flushed_to_zero(x[i], y[i]) as u32;
                }
            }
        }
    }
    (y, c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::formats::{Format, Stream};

    /// E4M3's value of code 0..=0x7e (no sign).
    fn e4m3_decode(code: u32) -> f32 {
        let (e, m) = (code >> 3, (code & 7) as f32);
        match e {
            0 => m / 512.0,
            _ => (1.0 + m / 8.0) * 2f32.powi(e as i32 - 7),
        }
    }

    /// `.to(tl.float8e4nv)` of a nonnegative v as a code: the nearest of
    /// E4M3's values by search, ties to the even code, beyond 448
    /// saturated (satfinite).
    fn e4m3_code(v: f32) -> u32 {
        (0..=0x7e)
            .min_by(|&a, &b| {
                let d = |c: u32| (e4m3_decode(c) as f64 - v as f64).abs();
                d(a).total_cmp(&d(b)).then((a & 1).cmp(&(b & 1)))
            })
            .unwrap()
    }

    /// IST-DASLab/Quartet-II@8776a90 `eden_1x16s_fp4_kernel`, transcribed
    /// line by line in f32 on `x` reshaped to rows of `hadamard_dim`
    /// (already rotated), the current amax given, each block's uniform
    /// `u(first index)` in place of `tl.rand`, and its row sums taken in
    /// order (Triton's `tl.sum` is a tree).
    fn reference_kernel(
        x: &[f32],
        hadamard_dim: usize,
        amax: f32,
        u: impl Fn(usize) -> f32,
    ) -> Vec<f32> {
        let scales_max = 255.99f32;
        let val_max = (6.0f64 / ((17.0 / 16.0) * 0.93)) as f32;
        let s_dec = if amax == 0.0 {
            1.0
        } else {
            amax / scales_max / val_max
        };
        let mut out = vec![0.0f32; x.len()];
        for row in x.chunks(hadamard_dim).enumerate() {
            let (r, xs) = row;
            let mut scales = Vec::new();
            let (mut x_scaled, mut x_fp4) = (Vec::new(), Vec::new());
            for g in xs.chunks(16) {
                let s_dec_b = g.iter().fold(0f32, |m, v| m.max(v.abs())) / val_max;
                let mut e = e4m3_decode(e4m3_code(s_dec_b / s_dec));
                if e == 0.0 {
                    e = 1.0;
                }
                scales.push(e);
                for &v in g {
                    let xs = v / (e * s_dec);
                    let a = xs.abs();
                    let q = if a >= 5.0 {
                        6.0
                    } else if a >= 3.5 {
                        4.0
                    } else if a >= 2.5 {
                        3.0
                    } else if a >= 1.75 {
                        2.0
                    } else if a >= 1.25 {
                        1.5
                    } else if a >= 0.75 {
                        1.0
                    } else if a >= 0.25 {
                        0.5
                    } else {
                        0.0
                    };
                    x_scaled.push(xs);
                    x_fp4.push(q * if xs > 0.0 { 1.0 } else { -1.0 });
                }
            }
            let num = x_scaled.iter().fold(0f32, |s, v| s + v * v);
            let denom = x_scaled
                .iter()
                .zip(&x_fp4)
                .fold(0f32, |s, (v, q)| s + v * q);
            let correction = if denom == 0.0 { 1.0 } else { num / denom };
            for (b, &e) in scales.iter().enumerate() {
                let corrected = e * correction;
                let bits = e4m3_code(corrected);
                let prev = e4m3_decode(bits.wrapping_sub(1) & 0x7f);
                let curr = e4m3_decode(bits);
                let next = e4m3_decode(bits + 1);
                let (up, down) = match curr > corrected {
                    true => (curr, prev),
                    false => (next, curr),
                };
                let prob_up = (corrected - down) / (up - down);
                let first = r * hadamard_dim + 16 * b;
                let scale = if u(first) < prob_up { up } else { down };
                for j in first..first + 16 {
                    out[j] = x_fp4[j - r * hadamard_dim] * scale * s_dec;
                }
            }
        }
        out
    }

    /// The twin equals the reference's kernel written out, bit for bit,
    /// given the same uniforms: rows over 2^±3 with an outlier each, a
    /// zero block inside a group, a zero group (its correction 1); and a
    /// tensor whose rows run from 10^-35 to 10^35 (subnormal quotients,
    /// blocks whose scale rounds to 0); groups of 128 and 32.
    #[test]
    fn the_twin_is_the_reference_kernel() {
        let mut r = crate::rng::SplitMix64(2601);
        let stream = Stream {
            seed: 9,
            step: 4,
            tensor: 2,
        };
        let u = |i: usize| (random_bits(9, 4, 2, i as u32) >> 8) as f32 * pow2(-24);
        let format = Format::parse("nvfp4-ms-eden").unwrap();
        let q = Quantization::new(format, Blocks::Rows, Some(stream));
        for dim in [128usize, 32] {
            let rows = 24;
            let row_scale = |row: usize| 2f32.powi(row as i32 % 7 - 3);
            let mut x: Vec<f32> = (0..rows * dim)
                .map(|i| r.uniform(-2.0, 2.0) * row_scale(i / dim))
                .collect();
            for row in 0..rows {
                x[row * dim + (row * 7) % dim] *= 30.0;
            }
            x[3 * dim..3 * dim + 16].fill(0.0);
            x[4 * dim..5 * dim].fill(0.0);
            let mut wide = x.clone();
            for (row, v) in wide.chunks_mut(dim).enumerate() {
                v.iter_mut()
                    .for_each(|v| *v *= 10f32.powi(35 - 70 * row as i32 / 23));
            }
            for (what, x) in [("rows over 2^±3", &x), ("rows over 10^±35", &wide)] {
                let (twin, _) = super::super::quantize(&q, x, dim);
                let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
                let want = reference_kernel(x, dim, amax, u);
                let differ: Vec<String> = (0..x.len())
                    .filter(|&i| twin[i].to_bits() != want[i].to_bits())
                    .take(5)
                    .map(|i| format!("[{i}] {} -> {} want {}", x[i], twin[i], want[i]))
                    .collect();
                assert!(differ.is_empty(), "{what}, groups of {dim}: {differ:?}");
                // the mild tensor's values survive: the comparison is of values
                let nonzero = twin.iter().filter(|v| **v != 0.0).count();
                assert!(
                    what != "rows over 2^±3" || nonzero > x.len() / 2,
                    "{nonzero} nonzero"
                );
            }
        }
    }

    #[test]
    fn values_round_as_the_reference_thresholds_do() {
        // ties away from zero, where E2M1's even rounding would go down
        for (v, q) in [
            (0.25, 0.5),
            (1.25, 1.5),
            (2.5, 3.0),
            (5.0, 6.0),
            (0.75, 1.0),
        ] {
            assert_eq!((e2m1_away(v), e2m1_away(-v)), (q, -q), "{v}");
        }
        assert_eq!(e2m1_away(0.2499).to_bits(), 0, "+0 below the first step");
        assert_eq!(e2m1_away(0.0).to_bits(), 0x8000_0000, "±0 becomes −0");
        assert_eq!(e2m1_away(7.5), 6.0, "held at 6");
    }

    #[test]
    fn scales_lie_between_e4m3_neighbours() {
        let cases = [
            (1.06, (1.0, 1.125)),
            (1.1, (1.0, 1.125)),
            (1.0, (1.0, 1.125)),
            (258.97, (256.0, 288.0)),
            (255.0, (240.0, 256.0)),
            (0.0009, (0.0, pow2(-9))),
            (pow2(-6) - pow2(-12), (pow2(-6) - pow2(-9), pow2(-6))),
        ];
        for (c, want) in cases {
            assert_eq!(e4m3_neighbours(c), want, "{c}");
        }
    }

    /// One block holding one nonzero value A (the tensor's amax): g = A /
    /// 255.99 / val_max, the block's scale E4M3(255.99·(1 + ε)) = 256, v =
    /// A / (256·g) ≈ 6.07, q = 6, c = v² / 6v = v / 6; the corrected scale
    /// 256·c ≈ 259.1 goes to 256 or 288 (E4M3's neighbours there, 32
    /// apart), so y is 6·256·g or 6·288·g and its mean over the draws is A:
    /// MS-EDEN is unbiased along the group.
    #[test]
    fn one_value_is_unbiased_between_two_scales() {
        let a = 3.7f32;
        let mut x = vec![0.0f32; 16];
        x[5] = a;
        let g = a / EDEN_SCALES_MAX / EDEN_VAL_MAX;
        let (lo, hi) = (6.0 * 256.0 * g, 6.0 * 288.0 * g);
        let n = 4000;
        let mut sum = 0.0f64;
        let mut ups = 0;
        for tensor in 0..n {
            let stream = Stream {
                seed: 1,
                step: 2,
                tensor,
            };
            let format = Format::parse("nvfp4-ms-eden").unwrap();
            let q = Quantization::new(format, Blocks::Rows, Some(stream));
            let (y, c) = super::super::quantize(&q, &x, 16);
            assert!(y[5] == lo || y[5] == hi, "{}", y[5]);
            assert!(
                y.iter()
                    .enumerate()
                    .all(|(i, v)| i == 5 || v.to_bits() == 0x8000_0000)
            );
            assert_eq!(c.saturated, 1, "v ≈ 6.07 is beyond E2M1's 6");
            ups += (y[5] == hi) as u32;
            sum += y[5] as f64;
        }
        // up with p = (256·c − 256) / 32 ≈ 0.096: the mean within 5 sd
        let v = a as f64 / (256.0 * g as f64);
        let p = (256.0 * v / 6.0 - 256.0) / 32.0;
        let sd = (hi - lo) as f64 * (p * (1.0 - p) / n as f64).sqrt();
        let mean = sum / n as f64;
        assert!(
            (mean - a as f64).abs() < 5.0 * sd,
            "mean {mean}, A {a}, sd {sd}"
        );
        assert!(
            (ups as f64 / n as f64 - p).abs() < 0.03,
            "{ups} of {n} up, p {p}"
        );
    }
}
