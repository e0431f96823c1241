//! Four Over Six's twin against the reference quantizer it names:
//! mit-han-lab/fouroversix@dadfad6 `src/fouroversix/quantize/pytorch/
//! reference.py` (`quantize`, `nvfp4_fouroversix_block_scaled_quantization`,
//! `select_fouroversix`), written here literally in f32 (its torch ops are
//! f32 and correctly rounded), and Transformer Engine's absolute-error
//! metric (`custom_recipes/reference_nvfp4.py`). The sums over a block run
//! in the values' order, as Transformer Engine's do (torch's own order is
//! unspecified: the reference's tests allow 0.1% of blocks to differ).

use super::*;
use crate::ops::formats::{Blocks, E4M3_MIN_NORMAL, FOUR_OVER_SIX_RANGE, Format};

/// torch.round: to nearest, ties to even.
fn round_even(v: f32) -> f32 {
    v.round_ties_even()
}

/// `fake_quantize_to_e2m1`, to nearest: no clamp at 6 (a value of a block
/// whose scale is an E4M3 subnormal may round to 8).
fn e2m1_literal(v: f32) -> f32 {
    let a = v.abs();
    let q = if a < 2.0 {
        round_even(2.0 * a) / 2.0
    } else if a < 4.0 {
        round_even(a)
    } else {
        2.0 * round_even(a / 2.0)
    };
    q.copysign(v)
}

/// The reference's fake-quantized values of `x` in 16-value blocks along
/// rows: enc = 1536 / amax, dec = 1 / enc; each block's scales
/// E4M3((amax_b / 6)·enc) and E4M3((amax_b / 6)·enc·1.5); its values
/// E2M1(x·(1 / (dec·s))), dequantized ((q·s)·amax) / 1536; the candidate
/// with the smaller summed error kept, ties to 6. With it, per block:
/// whether it kept 4, and whether a candidate's E2M1 value went beyond 6
/// (an E4M3 subnormal scale: the reference's 8, which no E2M1 code holds).
fn four_over_six_literal(x: &[f32], mae: bool) -> (Vec<f32>, Vec<(bool, bool)>) {
    let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
    let enc = FOUR_OVER_SIX_RANGE / amax;
    let dec = 1.0 / enc;
    let mut y = Vec::with_capacity(x.len());
    let mut kept = Vec::new();
    for b in x.chunks(16) {
        let bamax = b.iter().fold(0f32, |m, v| m.max(v.abs()));
        let s6_hp = (bamax / 6.0) * enc;
        let mut beyond_6 = false;
        let candidates = [s6_hp, s6_hp * 1.5].map(|s| {
            let s = round_format(s, Element::E4m3);
            let dq: Vec<f32> = b
                .iter()
                .map(|&v| {
                    let q = match s == 0.0 {
                        true => 0.0,
                        false => e2m1_literal(v * (1.0 / (dec * s))),
                    };
                    beyond_6 |= q.abs() > 6.0;
                    ((q * s) * amax) / FOUR_OVER_SIX_RANGE
                })
                .collect();
            let err = b.iter().zip(&dq).fold(0f32, |sum, (&v, &d)| {
                let e = d - v;
                sum + if mae { e.abs() } else { e * e }
            });
            (dq, err)
        });
        let [(dq6, e6), (dq4, e4)] = candidates;
        kept.push((e4 < e6, beyond_6));
        y.extend(if e4 < e6 { dq4 } else { dq6 });
    }
    (y, kept)
}

/// Blocks of 16: Gaussian-like values, an outlier per row, ties (a block
/// holding the tensor's amax 6·2^k and the E2M1 midpoints times 2^k, so
/// that the scale mapping to 6 is 256 and every value falls on a tie), a
/// block of small values beside large ones, and a zero block.
fn inputs(r: &mut crate::rng::SplitMix64, scale: f32) -> Vec<f32> {
    let mut x = Vec::new();
    for row in 0..48 {
        for i in 0..64 {
            let v = (r.uniform(-1.0, 1.0) + r.uniform(-1.0, 1.0) + r.uniform(-1.0, 1.0)) / 3.0;
            let outlier = if i == row % 64 { 40.0 } else { 1.0 };
            let small = if (i / 16) == 2 && row % 3 == 0 {
                1e-4
            } else {
                1.0
            };
            x.push(v * outlier * small * scale);
        }
    }
    let ties = [
        6.0, -0.25, 0.75, -1.25, 1.75, -2.5, 3.5, -5.0, 0.25, 5.0, -3.5, 2.5, -1.75, 1.25, -0.75,
        6.0,
    ];
    // the tensor's amax: the outliers (40) are below 6·8
    x.extend(ties.iter().map(|t| t * 8.0 * scale));
    x.extend([0.0f32; 16]);
    x
}

#[test]
fn four_over_six_is_the_reference_quantizer() {
    let mut r = crate::rng::SplitMix64(11);
    for (name, mae) in [("nvfp4-4over6", false), ("nvfp4-4over6-mae", true)] {
        let q = Quantization::new(Format::parse(name).unwrap(), Blocks::Rows, None);
        let (mut kept_4, mut blocks, mut differ) = (0, 0, 0);
        for scale in [1.0f32, 1e-3, 7.0, 3e5, 1e-12, 1e15] {
            let x = inputs(&mut r, scale);
            let (y, c) = quantize(&q, &x, 16);
            let (want, kept) = four_over_six_literal(&x, mae);
            for (b, &(four, beyond_6)) in kept.iter().enumerate() {
                let block = 16 * b..16 * (b + 1);
                if beyond_6 {
                    // the twin holds E2M1 at 6: such blocks' scales are subnormal
                    let bamax = x[block].iter().fold(0f32, |m, v| m.max(v.abs()));
                    let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
                    assert!(bamax / 6.0 * (FOUR_OVER_SIX_RANGE / amax) < E4M3_MIN_NORMAL);
                    differ += 1;
                    continue;
                }
                for i in block {
                    // the twin keeps a flushed value's sign; the reference's
                    // blocks of scale 0 give +0
                    let bits = |v: f32| if v == 0.0 { 0 } else { v.to_bits() };
                    assert_eq!(
                        bits(y[i]),
                        bits(want[i]),
                        "{name} scale {scale}, {i}: {}",
                        x[i]
                    );
                }
                kept_4 += four as usize;
                blocks += 1;
            }
            assert_eq!(c.blocks_scale_saturated, 0, "{name}");
        }
        eprintln!(
            "{name}: {kept_4} of {blocks} blocks kept the scale mapping to 4; \
             {differ} blocks apart (the reference's E2M1 beyond 6)"
        );
        // both candidates are kept somewhere (else a choice fixed at 6 would pass)
        assert!(
            kept_4 > 0 && kept_4 < blocks,
            "{name}: {kept_4} of {blocks} blocks kept 4"
        );
    }
}

#[test]
fn four_over_six_scales_with_powers_of_two_where_the_reference_overflows() {
    // amax_t below about 2^-118 overflows the reference's enc = 1536 / amax_t
    // (its scales become NaN) and beyond about 2^64 its squared errors
    // overflow (both sums Inf: it keeps 6): the twin works at the tensor's
    // own binade, so its values there are those at scale 1 times 2^k
    let mut r = crate::rng::SplitMix64(12);
    let q = Quantization::new(Format::parse("nvfp4-4over6").unwrap(), Blocks::Rows, None);
    let x = inputs(&mut r, 1.0);
    let (y, _) = quantize(&q, &x, 16);
    for k in [-124, 100, 120] {
        let xs: Vec<f32> = x.iter().map(|v| v * 2f32.powi(k)).collect();
        let (ys, c) = quantize(&q, &xs, 16);
        for i in 0..x.len() {
            if xs[i] != 0.0 && xs[i].abs() >= f32::MIN_POSITIVE {
                assert_eq!(ys[i] as f64, y[i] as f64 * 2f64.powi(k), "2^{k}, {i}");
            }
        }
        assert_eq!(c.blocks_scale_saturated, 0);
    }
    let tiny: Vec<f32> = x.iter().map(|v| v * 2f32.powi(-124)).collect();
    assert!(
        four_over_six_literal(&tiny, false)
            .0
            .iter()
            .any(|v| v.is_nan())
    );
}
