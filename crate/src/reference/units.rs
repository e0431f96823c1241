//! CPU twin of the unit GEMMs (`kernels::units`): the f64 product of the
//! same f16 inputs, and how far a GPU result lies from it.

use half::f16;

/// The largest errors of a result.
#[derive(Clone, Copy, Debug, Default)]
pub struct GemmErrors {
    pub abs: f64,
    /// |err| / |twin| (|twin| > 0)
    pub rel: f64,
    /// |err| / Σ|a·b| (+ |out₀|): what bounds are stated on
    pub share: f64,
}

/// `got` [m, n] against `op(A)·op(B)` (+ `out0` when accumulating) in f64:
/// A is [m, k] or, `a_t`, [k, m]; B is [k, n] or, `b_t`, [n, k]; row-major.
/// A NaN counts as an infinite error.
pub fn gemm_errors(
    (a_t, b_t): (bool, bool),
    (m, n, k): (usize, usize, usize),
    (a, b): (&[f16], &[f16]),
    out0: Option<&[f32]>,
    got: &[f32],
) -> GemmErrors {
    let a_at = |i: usize, p: usize| if a_t { a[p * m + i] } else { a[i * k + p] };
    let b_at = |p: usize, j: usize| if b_t { b[j * k + p] } else { b[p * n + j] };
    let mut e = GemmErrors::default();
    for i in 0..m {
        for j in 0..n {
            let start = out0.map_or(0.0, |o| o[i * n + j] as f64);
            let (mut sum, mut mag) = (start, start.abs());
            for p in 0..k {
                let t = a_at(i, p).to_f64() * b_at(p, j).to_f64();
                sum += t;
                mag += t.abs();
            }
            let err = (got[i * n + j] as f64 - sum).abs();
            let err = if err.is_nan() { f64::INFINITY } else { err };
            e.abs = e.abs.max(err);
            if sum != 0.0 {
                e.rel = e.rel.max(err / sum.abs());
            }
            e.share = e.share.max(if mag > 0.0 { err / mag } else { err });
        }
    }
    e
}
