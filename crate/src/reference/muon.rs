//! Twin of Muon's step, in f64, in `torch.optim.Muon`'s order: the
//! momentum (12_optimizer.wgsl's `muon_momentum`), Newton–Schulz on the
//! batched GEMMs and 15_muon.wgsl, and the decoupled update.

use crate::ops::muon::{MuonHyper, NS_COEFFICIENTS, NS_EPS, NS_STEPS, update_scale};

/// `a · b` for row-major `a` [n, k] and `b` [k, m].
fn product(a: &[f64], b: &[f64], (n, k, m): (usize, usize, usize)) -> Vec<f64> {
    let mut c = vec![0.0; n * m];
    for i in 0..n {
        for p in 0..k {
            let x = a[i * k + p];
            for j in 0..m {
                c[i * m + j] += x * b[p * m + j];
            }
        }
    }
    c
}

/// Row-major `x` [rows, cols] transposed.
pub fn transpose(x: &[f64], rows: usize, cols: usize) -> Vec<f64> {
    let mut t = vec![0.0; x.len()];
    for i in 0..rows {
        for j in 0..cols {
            t[j * rows + i] = x[i * cols + j];
        }
    }
    t
}

/// The orthogonalized `x` [rows, cols]: normalized by its Frobenius norm
/// (+ ε), then `NS_STEPS` quintic iterations, on xᵀ when rows > cols.
pub fn newton_schulz(x: &[f64], rows: usize, cols: usize) -> Vec<f64> {
    if rows > cols {
        let t = newton_schulz(&transpose(x, rows, cols), cols, rows);
        return transpose(&t, cols, rows);
    }
    let (a, b, c) = NS_COEFFICIENTS;
    let norm = x.iter().map(|v| v * v).sum::<f64>().sqrt();
    let mut x: Vec<f64> = x.iter().map(|v| v / (norm + NS_EPS)).collect();
    for _ in 0..NS_STEPS {
        let gram = product(&x, &transpose(&x, rows, cols), (rows, cols, rows));
        let square = product(&gram, &gram, (rows, rows, rows));
        let poly: Vec<f64> = gram
            .iter()
            .zip(&square)
            .map(|(g, s)| b * g + c * s)
            .collect();
        let px = product(&poly, &x, (rows, rows, cols));
        x = x.iter().zip(&px).map(|(x, p)| a * x + p).collect();
    }
    x
}

/// One Muon step of a `rows × cols` matrix `w` with raw gradient `g`
/// (non-finite → 0, times `clip`) and momentum `m`.
pub fn muon(
    h: &MuonHyper,
    clip: f64,
    (rows, cols): (usize, usize),
    w: &mut [f64],
    g: &[f32],
    m: &mut [f64],
) {
    let mut nesterov = vec![0.0; w.len()];
    for i in 0..w.len() {
        let g = if g[i].is_finite() {
            g[i] as f64 * clip
        } else {
            0.0
        };
        m[i] += (1.0 - h.momentum) * (g - m[i]);
        nesterov[i] = g + h.momentum * (m[i] - g);
    }
    let o = newton_schulz(&nesterov, rows, cols);
    let step = h.lr * update_scale(rows as u32, cols as u32);
    for (w, o) in w.iter_mut().zip(&o) {
        *w = *w * (1.0 - h.lr * h.weight_decay) - step * o;
    }
}

/// The singular values of `x` [rows, cols], largest first: square roots of
/// the eigenvalues of the smaller Gram matrix, by cyclic Jacobi rotations.
pub fn singular_values(x: &[f64], rows: usize, cols: usize) -> Vec<f64> {
    let (d, g) = match rows <= cols {
        true => (
            rows,
            product(x, &transpose(x, rows, cols), (rows, cols, rows)),
        ),
        false => (
            cols,
            product(&transpose(x, rows, cols), x, (cols, rows, cols)),
        ),
    };
    let mut a = g;
    for _sweep in 0..100 {
        let off: f64 = (0..d)
            .flat_map(|i| (0..d).filter(move |&j| j != i).map(move |j| (i, j)))
            .map(|(i, j)| a[i * d + j] * a[i * d + j])
            .sum();
        if off < 1e-30 {
            break;
        }
        for p in 0..d {
            for q in p + 1..d {
                let apq = a[p * d + q];
                if apq.abs() < 1e-300 {
                    continue;
                }
                let theta = (a[q * d + q] - a[p * d + p]) / (2.0 * apq);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let t = if theta == 0.0 { 1.0 } else { t };
                let (cs, sn) = (1.0 / (t * t + 1.0).sqrt(), t / (t * t + 1.0).sqrt());
                for k in 0..d {
                    let (akp, akq) = (a[k * d + p], a[k * d + q]);
                    a[k * d + p] = cs * akp - sn * akq;
                    a[k * d + q] = sn * akp + cs * akq;
                }
                for k in 0..d {
                    let (apk, aqk) = (a[p * d + k], a[q * d + k]);
                    a[p * d + k] = cs * apk - sn * aqk;
                    a[q * d + k] = sn * apk + cs * aqk;
                }
            }
        }
    }
    let mut s: Vec<f64> = (0..d).map(|i| a[i * d + i].max(0.0).sqrt()).collect();
    s.sort_by(|a, b| b.total_cmp(a));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{SplitMix64, uniform};

    fn random(n: usize, seed: u64) -> Vec<f64> {
        uniform(&mut SplitMix64(seed), n, -1.0, 1.0)
            .into_iter()
            .map(f64::from)
            .collect()
    }

    #[test]
    fn singular_values_of_a_known_matrix() {
        // diag(3, 2) padded with a zero column, rotated rows
        let x = [0.0, 2.0, 0.0, 3.0, 0.0, 0.0];
        let s = singular_values(&x, 2, 3);
        assert!(
            (s[0] - 3.0).abs() < 1e-12 && (s[1] - 2.0).abs() < 1e-12,
            "{s:?}"
        );
        assert_eq!(singular_values(&transpose(&x, 2, 3), 3, 2).len(), 2);
    }

    /// Normalized singular values in [0.01, 1] land in the quintic's band
    /// [0.68, 1.14] after five iterations (the scalar map's range there:
    /// 0.682 … 1.134), whichever side is longer.
    #[test]
    fn newton_schulz_lands_in_the_quintics_band() {
        for (rows, cols, seed) in [(1, 37, 1), (12, 40, 2), (53, 19, 3), (16, 80, 4)] {
            let x = random(rows * cols, seed);
            let norm = x.iter().map(|v| v * v).sum::<f64>().sqrt();
            let before = singular_values(&x, rows, cols);
            assert!(
                before.iter().all(|s| s / norm >= 0.01),
                "{rows}×{cols}: {before:?}"
            );
            let o = newton_schulz(&x, rows, cols);
            for s in singular_values(&o, rows, cols) {
                assert!((0.68..=1.14).contains(&s), "{rows}×{cols}: σ = {s}");
            }
        }
    }
}
