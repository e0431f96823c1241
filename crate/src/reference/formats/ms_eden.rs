//! MS-EDEN's twin (Quartet II's backward rounding of NVFP4's block
//! scales): 14_quantize.wgsl's `quantize_eden`, in plain f32 arithmetic,
//! every operation correctly rounded as the GPU's integer versions are.

use super::{SIGN, flushed_to_zero, random_bits, round_format};
use crate::ops::formats::{
    Blocks, Counts, EDEN_SCALES_MAX, EDEN_VAL_MAX, Element, NVFP4_BLOCK, Quantization, pow2,
};

/// E2M1 to nearest with ties away from zero, by the reference's
/// thresholds (`rtn_fp4`); −0 for ±0, as its sign (x > 0 ? 1 : −1) gives.
pub fn e2m1_away(v: f32) -> f32 {
    const STEPS: [(f32, f32); 7] = [
        (5.0, 6.0),
        (3.5, 4.0),
        (2.5, 3.0),
        (1.75, 2.0),
        (1.25, 1.5),
        (0.75, 1.0),
        (0.25, 0.5),
    ];
    let a = v.abs();
    let q = STEPS.iter().find(|(t, _)| a >= *t).map_or(0.0, |&(_, q)| q);
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
