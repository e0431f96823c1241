//! `e4m3-row` against TorchAO's rowwise float8 cast, written literally
//! (pytorch/ao@36027d8 torchao/float8/float8_utils.py `amax_to_scale` with
//! `round_scales_to_power_of_2`, float8_training_tensor.py
//! `_ToFloat8ConstrFunc`): amax in f64 clamped below at EPS = 1e-12, the
//! scale 448 / amax in f64 rounded to f32, then exp2(floor(log2(scale)))
//! with log2 in f32 (correctly rounded here, as glibc's log2f), each value
//! x·scale clamped to ±448 and cast to E4M3 (RNE), and back: / scale.

use super::*;
use crate::ops::formats::{Blocks, Format};

fn torchao_rowwise_literal(x: &[f32], cols: usize) -> Vec<f32> {
    let mut y = Vec::with_capacity(x.len());
    for row in x.chunks(cols) {
        let amax = row.iter().fold(0f32, |m, v| m.max(v.abs()));
        let scale = (448.0 / (amax as f64).max(1e-12)) as f32;
        let log2 = ((scale as f64).log2() as f32).floor();
        let scale = 2f32.powi(log2 as i32);
        y.extend(row.iter().map(|&v| {
            let q = round_format((v * scale).clamp(-448.0, 448.0), Element::E4m3);
            q / scale
        }));
    }
    y
}

/// Rows whose amax lies n ulps above 448·2^-j (its scale n ulps below a
/// power of two: where log2 in f32 rounds up to an integer or not), and
/// Gaussian-like rows with an outlier, zero rows, rows below EPS and at
/// its edge, and rows near f32's ends.
fn rows(cols: usize) -> Vec<f32> {
    let mut r = crate::rng::SplitMix64(21);
    let mut x = Vec::new();
    let mut row = |top: f32, spread: f32| {
        for i in 0..cols {
            let v = if i == 3 {
                top
            } else {
                r.uniform(-1.0, 1.0) * spread
            };
            x.push(v);
        }
    };
    for j in [-20i32, -7, -3, 0, 2, 5, 9, 30] {
        for n in [0u32, 1, 2, 3, 5, 6, 11, 12, 22, 23, 44, 45, 88, 89] {
            let top = f32::from_bits((448f32 * 2f32.powi(-j)).to_bits() + n);
            row(top, top.abs() * 0.9);
        }
    }
    for scale in [1.0f32, 3e-4, 7e5, 1e30, 5e36, 1e-20] {
        row(-40.0 * scale, scale);
    }
    let eps = 1e-12f32;
    for top in [0.0, 1e-13, eps, f32::from_bits(eps.to_bits() + 1), 2e-12] {
        row(top, top * 0.5);
    }
    x
}

#[test]
fn e4m3_row_is_torchaos_rowwise_cast() {
    let cols = 24;
    let x = rows(cols);
    let q = Quantization::new(Format::parse("e4m3-row").unwrap(), Blocks::Rows, None);
    let (y, c) = quantize(&q, &x, cols);
    let want = torchao_rowwise_literal(&x, cols);
    for i in 0..x.len() {
        assert_eq!(
            y[i].to_bits(),
            want[i].to_bits(),
            "row {}, {i}: {}",
            i / cols,
            x[i]
        );
    }
    // rows whose scale's log2 rounded up to an integer saturate their amax
    assert!(c.saturated > 0, "{c:?}");
}

#[test]
fn e4m3_row_scales_each_column_down_the_columns() {
    // down the columns (a K along the rows) is the rowwise cast of the transpose
    let cols = 24;
    let x = rows(cols);
    let rows_n = x.len() / cols;
    let t: Vec<f32> = (0..x.len())
        .map(|i| x[(i % rows_n) * cols + i / rows_n])
        .collect();
    let q = Quantization::new(Format::parse("e4m3-row").unwrap(), Blocks::Columns, None);
    let (y, _) = quantize(&q, &t, rows_n);
    let want = torchao_rowwise_literal(&x, cols);
    for (i, w) in want.iter().enumerate() {
        let at = (i % cols) * rows_n + i / cols;
        assert_eq!(y[at].to_bits(), w.to_bits(), "{i}");
    }
}
