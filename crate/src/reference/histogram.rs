//! Twin of 13_histogram.wgsl: the binade of each value from its f64
//! exponent (every f32, subnormals included, is a normal f64), and the sum
//! of squares of the finite values.

use crate::ops::histogram::{BINS, INF_BIN, MIN_BINADE, NAN_BIN, ZERO_BIN};

pub fn log2_histogram(x: &[f32]) -> Vec<u64> {
    let mut counts = vec![0u64; BINS];
    for &v in x {
        let bin = if v.is_nan() {
            NAN_BIN
        } else if v.is_infinite() {
            INF_BIN
        } else if v == 0.0 {
            ZERO_BIN
        } else {
            let exponent = ((f64::from(v).abs().to_bits() >> 52) as i32) - 1023;
            (exponent - MIN_BINADE) as usize
        };
        counts[bin] += 1;
    }
    counts
}

/// Σx² over the finite values, in f64.
pub fn sum_of_squares(x: &[f32]) -> f64 {
    x.iter()
        .filter(|v| v.is_finite())
        .map(|&v| f64::from(v) * f64::from(v))
        .sum()
}
