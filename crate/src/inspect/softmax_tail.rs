//! The inspector's third failure mode (the FP8 document's softmax-tail
//! bound): a row's smallest attention probability is about
//! exp(−(s_max − s_min)), and below a format's smallest positive value it
//! cannot be stored as itself (below half of it, as 0). Measured per layer
//! from the last forward's saved q|k rows and log-sum-exps, in f64 on the
//! host, over up to `ROWS` query rows per layer evenly spread over the batch.

use serde::Serialize;

use crate::error::Result;
use crate::gpu::Gpu;
use crate::model::{Config, Model};
use crate::ops::formats::Element;

/// Query rows measured per layer: a sample keeps a `base` batch (8 × 512
/// rows, 12 heads) to well under a second of host time.
const ROWS: usize = 128;

/// One layer's attention probabilities, over the sampled rows and every head.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SoftmaxTail {
    pub layer: usize,
    /// Probabilities measured (one per query row, head and visible key).
    pub probabilities: u64,
    /// The smallest.
    pub p_min: f64,
    /// Share below each format's smallest positive value.
    pub below_bf16: f64,
    pub below_f16: f64,
    pub below_e4m3: f64,
}

/// Every layer's tail, from `qkv` (`[R, (H + 2·Hkv)·Dh]`, q and k rotated)
/// and `lse` (`[R, H]`) of each layer, for `batch` sequences of `seq` rows.
pub fn measure(c: &Config, seq: usize, layers: &[(Vec<f32>, Vec<f32>)]) -> Vec<SoftmaxTail> {
    let (h, hkv, dh) = (
        c.n_heads as usize,
        c.n_kv_heads as usize,
        c.head_dim() as usize,
    );
    let width = (h + 2 * hkv) * dh;
    let scale = 1.0 / (dh as f64).sqrt();
    layers
        .iter()
        .enumerate()
        .map(|(layer, (qkv, lse))| {
            let rows = qkv.len() / width;
            let mut probabilities = Vec::new();
            for row in (0..rows).step_by(rows.div_ceil(ROWS).max(1)) {
                let (first, t) = (row - row % seq, row % seq);
                for head in 0..h {
                    let q = &qkv[row * width + head * dh..][..dh];
                    let kv_head = head / (h / hkv);
                    for key in first..=first + t {
                        let k = &qkv[key * width + (h + kv_head) * dh..][..dh];
                        let s: f64 = q.iter().zip(k).map(|(&a, &b)| a as f64 * b as f64).sum();
                        probabilities.push((s * scale - lse[row * h + head] as f64).exp());
                    }
                }
            }
            let share = |e: Element| {
                let below = probabilities
                    .iter()
                    .filter(|&&p| p < e.spec().min_positive() as f64)
                    .count();
                below as f64 / probabilities.len().max(1) as f64
            };
            SoftmaxTail {
                layer,
                probabilities: probabilities.len() as u64,
                p_min: probabilities.iter().copied().fold(f64::INFINITY, f64::min),
                below_bf16: share(Element::Bf16),
                below_f16: share(Element::F16),
                below_e4m3: share(Element::E4m3),
            }
        })
        .collect()
}

/// The tails of the last forward `model` ran (after every submitted step).
pub async fn read(gpu: &Gpu, model: &Model) -> Result<Vec<SoftmaxTail>> {
    let mut layers = Vec::new();
    for l in &model.acts.layers {
        layers.push((
            gpu.read_back((&l.qkv).into()).await?,
            gpu.read_back((&l.lse).into()).await?,
        ));
    }
    Ok(measure(&model.config, model.shape.seq as usize, &layers))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One sequence of two tokens, one head of width 1 (`head_dim` must be
    /// the config's, so the scores are set through q·k directly).
    #[test]
    fn probabilities_come_from_scores_and_lse() {
        let mut c = Config::preset("tiny").unwrap();
        (c.n_heads, c.n_kv_heads, c.d_model) = (1, 1, 16);
        let dh = c.head_dim() as usize;
        let width = 3 * dh;
        let mut qkv = vec![0f32; 2 * width];
        // row 1: q = (10, 0, …); key 0 k = (0, …), key 1 k = (8, 0, …):
        // scores 0 and 80/4 = 20
        qkv[width] = 10.0;
        qkv[width + dh] = 8.0;
        let s1 = 80.0 / (dh as f64).sqrt();
        let lse1 = (1.0 + s1.exp()).ln();
        let lse = vec![0.0, lse1 as f32]; // row 0 attends only to itself: p = 1
        let t = measure(&c, 2, &[(qkv, lse)]);
        assert_eq!(t[0].probabilities, 3);
        let p_small = (-lse1).exp(); // 2e-9: below f16's 6e-8 and E4M3's 2e-3, above bf16's
        assert!(
            (t[0].p_min - p_small).abs() < 1e-6 * p_small,
            "{} vs {p_small}",
            t[0].p_min
        );
        assert_eq!(
            (t[0].below_bf16, t[0].below_f16, t[0].below_e4m3),
            (0.0, 1.0 / 3.0, 1.0 / 3.0)
        );
    }
}
