//! Twins of 07_loss.wgsl, in f64. Legend: R rows, V vocabulary.
//!
//! A target counts when it is < V and not the ignore index; one that does
//! not count gives loss 0 and a zero gradient row. The mean over no counted
//! targets is 0.

/// The settings of one cross-entropy problem (the kernel's params in f64).
#[derive(Clone, Copy, Debug)]
pub struct CrossEntropy {
    pub vocab: usize,
    pub ignore_index: u32,
    pub label_smoothing: f64,
    pub z_loss: f64,
    pub grad_scale: f64,
}

impl CrossEntropy {
    pub fn counts(&self, target: u32) -> bool {
        (target as usize) < self.vocab && target != self.ignore_index
    }
}

pub struct CrossEntropyOutput {
    pub losses: Vec<f64>,  // [R]
    pub lse: Vec<f64>,     // [R]
    pub dlogits: Vec<f64>, // [R, V], grad_scale · dloss/dlogits
}

/// Per row: `loss = (1−ε)(lse − z_t) + ε(lse − mean z) + β·lse²` and its
/// gradient `grad_scale·((1 + 2β·lse)·softmax − (1−ε)·onehot(t) − ε/V)`.
pub fn cross_entropy_forward_backward(
    ce: &CrossEntropy,
    logits: &[f64],
    targets: &[u32],
) -> CrossEntropyOutput {
    let v = ce.vocab;
    let rows = targets.len();
    assert_eq!(logits.len(), rows * v, "logits must be [R, V]");
    let (eps, beta) = (ce.label_smoothing, ce.z_loss);
    let mut out = CrossEntropyOutput {
        losses: vec![0.0; rows],
        lse: vec![0.0; rows],
        dlogits: vec![0.0; rows * v],
    };
    for r in 0..rows {
        let z = &logits[r * v..(r + 1) * v];
        let m = z.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let s: f64 = z.iter().map(|&zj| (zj - m).exp()).sum();
        let lse = m + s.ln();
        let mean_z = z.iter().sum::<f64>() / v as f64;
        out.lse[r] = lse;
        let t = targets[r];
        if !ce.counts(t) {
            continue;
        }
        let t = t as usize;
        out.losses[r] = (1.0 - eps) * (lse - z[t]) + eps * (lse - mean_z) + beta * lse * lse;
        for (j, (d, &zj)) in out.dlogits[r * v..(r + 1) * v]
            .iter_mut()
            .zip(z)
            .enumerate()
        {
            let p = (zj - lse).exp();
            let onehot = if j == t { 1.0 } else { 0.0 };
            *d = ce.grad_scale
                * ((1.0 + 2.0 * beta * lse) * p - (1.0 - eps) * onehot - eps / v as f64);
        }
    }
    out
}

/// What `loss_sum` writes, in f64.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LossTotals {
    pub sum: f64,
    pub mean: f64,
    pub counted: u32,
    pub out_of_range: u32,
}

pub fn loss_sum(ce: &CrossEntropy, targets: &[u32], losses: &[f64]) -> LossTotals {
    let sum: f64 = losses.iter().sum();
    let counted = targets.iter().filter(|&&t| ce.counts(t)).count() as u32;
    let out_of_range = targets
        .iter()
        .filter(|&&t| t as usize >= ce.vocab && t != ce.ignore_index)
        .count() as u32;
    let mean = if counted == 0 {
        0.0
    } else {
        sum / counted as f64
    };
    LossTotals {
        sum,
        mean,
        counted,
        out_of_range,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::gradcheck::assert_gradient;

    const V: usize = 11;

    fn logits(rows: usize) -> Vec<f64> {
        (0..rows * V)
            .map(|i| ((i * 37 + 5) % 23) as f64 / 4.0 - 2.5)
            .collect()
    }

    /// Rows 1 and 4 do not count (ignored, out of range).
    const TARGETS: [u32; 5] = [3, u32::MAX, 0, 10, 11];

    fn settings(label_smoothing: f64, z_loss: f64) -> CrossEntropy {
        CrossEntropy {
            vocab: V,
            ignore_index: u32::MAX,
            label_smoothing,
            z_loss,
            grad_scale: 1.0 / 3.0,
        }
    }

    fn check_gradient(what: &str, ce: CrossEntropy) {
        let z = logits(TARGETS.len());
        let out = cross_entropy_forward_backward(&ce, &z, &TARGETS);
        let mean_loss = |z: &[f64]| {
            ce.grad_scale
                * cross_entropy_forward_backward(&ce, z, &TARGETS)
                    .losses
                    .iter()
                    .sum::<f64>()
        };
        assert_gradient(what, &z, &out.dlogits, mean_loss, 1e-9, 1e-7);
        let uncounted = [&out.dlogits[V..2 * V], &out.dlogits[4 * V..]];
        assert!(
            uncounted.iter().all(|row| row.iter().all(|&d| d == 0.0)),
            "rows that do not count have no gradient"
        );
    }

    #[test]
    fn dlogits_is_the_gradient_of_the_mean_loss() {
        check_gradient("plain", settings(0.0, 0.0));
        check_gradient("label smoothing", settings(0.1, 0.0));
        check_gradient("z-loss", settings(0.0, 0.01));
        check_gradient("both", settings(0.2, 0.05));
    }

    #[test]
    fn known_values() {
        let ce = settings(0.0, 0.0);
        let equal = cross_entropy_forward_backward(&ce, &[0.5; V], &[2]);
        assert!(
            (equal.losses[0] - (V as f64).ln()).abs() < 1e-14,
            "equal logits: loss ln V"
        );
        let mut onehot = vec![-80.0; V];
        onehot[4] = 80.0;
        let hit = cross_entropy_forward_backward(&ce, &onehot, &[4]);
        let miss = cross_entropy_forward_backward(&ce, &onehot, &[5]);
        assert!(hit.losses[0] < 1e-60 && (miss.losses[0] - 160.0).abs() < 1e-12);
        let totals = loss_sum(&ce, &TARGETS, &[1.0, 0.0, 2.0, 3.0, 0.0]);
        assert_eq!(
            totals,
            LossTotals {
                sum: 6.0,
                mean: 2.0,
                counted: 3,
                out_of_range: 1
            }
        );
        let none = loss_sum(&ce, &[u32::MAX, 99], &[0.0, 0.0]);
        assert_eq!(
            none,
            LossTotals {
                sum: 0.0,
                mean: 0.0,
                counted: 0,
                out_of_range: 1
            }
        );
    }
}
