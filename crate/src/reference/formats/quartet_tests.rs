//! Quartet's MXFP4 twins against the kernel they name: IST-DASLab/Quartet
//! @00ccd38 `src/models/quantization/quantizers/mxfp4_triton.py`
//! (`mxfp4_forward_kernel`), written here literally in f32 after its
//! Hadamard product (the transform is twinned and tested on its own):
//! QuEST's branch (`quest=True`, `gaussian_scale` 2.92247856 / 6, to
//! nearest, the clip mask) and the other (`quest=False`: Tseng's scale),
//! to nearest and stochastic given the same uniforms. Its sums run in the
//! values' order here (Triton's `tl.sum` is a tree): an order that moves
//! σ across a power of two moves a block's scale. Its `floor(log2(s))` is
//! taken as s's exponent and its `exp2` of an integer as exact: Triton's
//! are `lg2.approx` and `ex2.approx`, whose floor where s lies within their
//! error below a power of two is that power's (as f32's correctly rounded
//! log2 is within 2^-24·|log2 s|, which this test's subnormal blocks hit).

use super::quartet::{quest_mask, tie_blocks};
use super::*;
use crate::ops::formats::{Blocks, Format, QUEST_SCALE};

/// floor(log2 v) exactly: v's exponent (subnormals included); −Inf for 0,
/// and ±Inf and NaN as log2's.
fn floor_log2(v: f32) -> f32 {
    let bits = v.to_bits();
    match (v.is_finite() && v > 0.0, bits >> 23) {
        (true, 0) => (31 - bits.leading_zeros()) as f32 - 149.0,
        (true, e) => e as f32 - 127.0,
        (false, _) => v.log2(),
    }
}

/// 2^v: exact for an integer v (libm's `exp2` is not, for subnormal
/// powers); ±Inf and NaN as exp2's.
fn exp2(v: f32) -> f32 {
    match v.is_finite() {
        true => pow2(v as i32),
        false => v.exp2(),
    }
}

/// What the kernel gives a row-major tensor in groups of 32: the values
/// and the clip mask. `u(i)` is `tl.rand`'s uniform for value i (SR only).
fn reference_kernel(
    x: &[f32],
    quest: bool,
    u: Option<&dyn Fn(usize) -> f64>,
) -> (Vec<f32>, Vec<bool>) {
    let (mut y, mut mask) = (Vec::new(), Vec::new());
    for (g, b) in x.chunks(32).enumerate() {
        let shared = if quest {
            let mean_squared = b.iter().fold(0f32, |s, v| s + v * v) / 32.0;
            let mean = b.iter().fold(0f32, |s, v| s + v) / 32.0;
            let std = (mean_squared - mean * mean).sqrt();
            let scales = QUEST_SCALE * std + 1e-8;
            exp2(floor_log2(scales))
        } else {
            let scales = b.iter().fold(0f32, |m, v| m.max(v.abs()));
            exp2(floor_log2(scales) - 2.0) / 0.75
        };
        for (j, &v) in b.iter().enumerate() {
            let scaled = v / shared;
            let a = scaled.abs();
            let sign = if scaled > 0.0 { 1.0 } else { -1.0 };
            let q = match u {
                Some(u) => {
                    const UP: [(f32, f32, f32); 6] = [
                        (4.0, 6.0, 4.0),
                        (3.0, 4.0, 3.0),
                        (2.0, 3.0, 2.0),
                        (1.5, 2.0, 1.5),
                        (1.0, 1.5, 1.0),
                        (0.5, 1.0, 0.5),
                    ];
                    let (high, low) = UP
                        .iter()
                        .find(|(t, _, _)| a > *t)
                        .map_or((0.5, 0.0), |&(_, h, l)| (h, l));
                    let prob_up = (a - low) / (high - low);
                    match u(g * 32 + j) < prob_up as f64 {
                        true => high,
                        false => low,
                    }
                }
                None => {
                    const NEAREST: [(f32, f32); 7] = [
                        (5.0, 6.0),
                        (3.5, 4.0),
                        (2.5, 3.0),
                        (1.75, 2.0),
                        (1.25, 1.5),
                        (0.75, 1.0),
                        (0.25, 0.5),
                    ];
                    NEAREST
                        .iter()
                        .find(|(t, _)| a > *t)
                        .map_or(0.0, |&(_, q)| q)
                }
            };
            y.push(q * sign * shared);
            mask.push(a < 6.0);
        }
    }
    (y, mask)
}

/// Equal, but that the kernel's sign of zero is its own (x > 0 ? 1 : −1
/// gives −0 for +0): the same value, and the same bits where not zero.
fn assert_values(what: &str, x: &[f32], twin: &[f32], want: &[f32]) {
    let differ: Vec<String> = (0..x.len())
        .filter(|&i| {
            let (t, w) = (twin[i], want[i]);
            let zeros = t == 0.0 && w == 0.0;
            !(t.to_bits() == w.to_bits() || zeros || t.is_nan() && w.is_nan())
        })
        .take(5)
        .map(|i| format!("[{i}] {:e} -> {:e} want {:e}", x[i], twin[i], want[i]))
        .collect();
    assert!(differ.is_empty(), "{what}: {differ:?}");
}

/// Rows over 2^±12 with outliers (which QuEST clips), zero blocks, ties,
/// and the rows times 10^-37 (f32 subnormals: QuEST's eps floors their
/// scale, Tseng's scale a subnormal) and times 10^32 (up to 5·10^37:
/// QuEST's Σx² overflows, its blocks NaN as the kernel's).
fn inputs() -> Vec<(&'static str, Vec<f32>)> {
    let mut r = crate::rng::SplitMix64(5205);
    let mut x: Vec<f32> = (0..32 * 40)
        .map(|i| r.uniform(-2.0, 2.0) * pow2((i / 32) % 25 - 12))
        .collect();
    for b in 0..40 {
        x[b * 32 + (b * 5) % 32] *= 60.0;
    }
    x[3 * 32..4 * 32].fill(0.0);
    let tiny: Vec<f32> = x.iter().map(|v| v * 1e-37).collect();
    let huge: Vec<f32> = x.iter().map(|v| v * 1e32).collect();
    vec![
        ("rows over 2^±12", x),
        ("ties", tie_blocks(5206, 12)),
        ("rows times 1e-37", tiny),
        ("rows times 1e32", huge),
    ]
}

/// `mxfp4-quest`'s twin is the kernel's QuEST branch, value for value, and
/// `quest_mask` keeps exactly the gradients of the values it does not clip.
#[test]
fn quest_is_the_reference_kernel() {
    let q = Quantization::new(Format::parse("mxfp4-quest").unwrap(), Blocks::Rows, None);
    for (what, x) in inputs() {
        let (twin, _) = quantize(&q, &x, 32);
        let (want, keep) = reference_kernel(&x, true, None);
        assert_values(what, &x, &twin, &want);
        let mut g = vec![1.0f32; x.len()];
        quest_mask(&x, &mut g, 32);
        // where the kernel's values are NaN (Σx² overflowed), its mask is
        // NaN's or Inf's comparison: no gradient reaches them anyway
        let differ: Vec<usize> = (0..x.len())
            .filter(|&i| !want[i].is_nan() && (g[i] == 1.0) != keep[i])
            .collect();
        assert!(differ.is_empty(), "{what}: the mask differs at {differ:?}");
        if what == "rows over 2^±12" {
            let clipped = keep.iter().filter(|k| !**k).count();
            assert!(clipped > 0 && clipped < x.len() / 8, "{clipped} clipped");
        }
    }
}

/// `mxfp4-tseng`'s twin is the kernel's other branch, to nearest where no
/// value lies on a tie (the kernel's ties go toward zero, the twin's to
/// even: Quartet rounds this one stochastically) and stochastically with
/// the same uniforms, value for value.
#[test]
fn tseng_is_the_reference_kernel() {
    let stream = Stream {
        seed: 4,
        step: 2,
        tensor: 7,
    };
    let format = Format::parse("mxfp4-tseng").unwrap();
    let u = |i: usize| random_bits(4, 2, 7, i as u32) as f64 / 2f64.powi(32);
    for (what, x) in inputs().into_iter().filter(|(w, _)| *w != "ties") {
        let sr = Quantization::new(format, Blocks::Rows, Some(stream));
        let (twin, _) = quantize(&sr, &x, 32);
        let (want, _) = reference_kernel(&x, false, Some(&u));
        assert_values(&format!("{what}, stochastic"), &x, &twin, &want);
        let nearest = Quantization::new(format, Blocks::Rows, None);
        let (twin, _) = quantize(&nearest, &x, 32);
        let (want, _) = reference_kernel(&x, false, None);
        assert_values(&format!("{what}, nearest"), &x, &twin, &want);
    }
}
