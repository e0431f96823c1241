//! One text through a model's forward, outside training: the attention
//! probabilities of every layer and head (the page's heatmaps, `webtrain
//! attention`) and the next-token predictions at every position (`webtrain
//! predict`). The forward is the training forward, built for one sequence
//! of the text's length, in the precision's numeric mode and weights (f16
//! mirror, quantized copy): what the run computes is what is shown.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::kernels::Kernels;
use crate::kernels::attention::AttentionShape;
use crate::kernels::attention_map::AttentionMap;
use crate::kernels::loss::IGNORE_INDEX;
use crate::model::decode::softmax;
use crate::model::{BatchShape, Config, MasterStorage, Model, Pass, Recipe};

/// A forward that ran over one text, kept to be read.
pub struct Probe<'k> {
    gpu: Gpu,
    k: &'k Kernels,
    model: Model,
    tokens: Vec<u32>,
}

/// What the model predicted after position `position` of the text.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Prediction {
    pub position: usize,
    /// The text's next token.
    pub target: u32,
    pub target_prob: f64,
    /// How many tokens were more likely than the target (0: it was the top).
    pub target_rank: usize,
    /// The `k` most likely tokens, most likely first (ties by id).
    pub top: Vec<(u32, f64)>,
}

impl<'k> Probe<'k> {
    /// `weights` (a `ParamLayout` vector of `config`) in `precision`, run
    /// over `tokens` (1 ..= max_seq of them, each below the vocabulary) with
    /// `k`, the precision's kernels (`Recipe::kernels`: a trainer's own).
    pub async fn run(
        gpu: &Gpu,
        k: &'k Kernels,
        config: &Config,
        precision: Recipe,
        weights: &[f32],
        tokens: &[u32],
    ) -> Result<Probe<'k>> {
        if tokens.is_empty() || tokens.len() > config.max_seq as usize {
            return Err(Error::Unsupported(format!(
                "{} tokens: a probe reads 1 to max_position_embeddings = {}",
                tokens.len(),
                config.max_seq
            )));
        }
        if let Some(t) = tokens.iter().find(|&&t| t >= config.vocab) {
            return Err(Error::Unsupported(format!(
                "token {t} is beyond the vocabulary of {}",
                config.vocab
            )));
        }
        let gpu = gpu.with_numerics(precision.numerics());
        let shape = BatchShape {
            batch: 1,
            seq: tokens.len() as u32,
        };
        let model = Model::new(
            &gpu,
            k,
            (config.clone(), shape, precision),
            (weights, MasterStorage::F32),
        )
        .await?;
        let targets: Vec<u32> = tokens[1..].iter().copied().chain([IGNORE_INDEX]).collect();
        model.write_batch(&gpu, tokens, &targets)?;
        model.run(&gpu, Pass::Forward).await?;
        Ok(Probe {
            gpu,
            k,
            model,
            tokens: tokens.to_vec(),
        })
    }

    /// Every layer's attention probabilities, each `[H, T, T]` (row: the
    /// query position, column: the key position, 0 above the diagonal).
    pub async fn attention(&self) -> Result<Vec<Vec<f32>>> {
        let (gpu, c) = (&self.gpu, &self.model.config);
        let map = AttentionMap::new(gpu, &[c.head_dim()]).await?;
        let t = self.tokens.len() as u64;
        let s = AttentionShape {
            batch: 1,
            seq_len: t as u32,
            heads: c.n_heads,
            kv_heads: c.n_kv_heads,
            head_dim: c.head_dim(),
        };
        let probs = gpu.storage_buffer("attention map", 4 * c.n_heads as u64 * t * t)?;
        let mut layers = Vec::new();
        for layer in &self.model.acts.layers {
            let qkv = crate::model::qkv_views(c, &layer.qkv);
            let d =
                map.probabilities(gpu, s, qkv.q, qkv.k, (&layer.lse).into(), (&probs).into())?;
            gpu.run(&[&d]).await?;
            layers.push(gpu.read_back((&probs).into()).await?);
        }
        Ok(layers)
    }

    /// At each position but the last, the next token's probability and
    /// rank, and the `top_k` most likely tokens (softmax in f64 of the
    /// logits the precision's head computes).
    pub async fn predictions(&self, top_k: usize) -> Result<Vec<Prediction>> {
        let logits = self.model.logits(&self.gpu, self.k).await?;
        let v = self.model.config.vocab as usize;
        Ok(self
            .tokens
            .windows(2)
            .enumerate()
            .map(|(position, pair)| predict(position, &logits[position * v..][..v], pair[1], top_k))
            .collect())
    }
}

/// The prediction of one row of logits for `target`.
fn predict(position: usize, logits: &[f32], target: u32, top_k: usize) -> Prediction {
    let probs = softmax(logits);
    let target_prob = probs[target as usize];
    let mut order: Vec<u32> = (0..probs.len() as u32).collect();
    order.sort_by(|&a, &b| {
        probs[b as usize]
            .total_cmp(&probs[a as usize])
            .then(a.cmp(&b))
    });
    Prediction {
        position,
        target,
        target_prob,
        target_rank: probs.iter().filter(|&&p| p > target_prob).count(),
        top: order
            .iter()
            .take(top_k)
            .map(|&id| (id, probs[id as usize]))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::predict;

    #[test]
    fn a_prediction_ranks_by_probability_and_ties_by_id() {
        let p = predict(3, &[0.0, 2.0, 1.0, 2.0], 2, 3);
        assert_eq!(p.position, 3);
        assert_eq!(p.target_rank, 2, "two tokens are more likely");
        let ids: Vec<u32> = p.top.iter().map(|t| t.0).collect();
        assert_eq!(ids, [1, 3, 2]);
        let sum: f64 = [0.0f64, 2.0, 1.0, 2.0].iter().map(|x| x.exp()).sum();
        assert!((p.target_prob - 1f64.exp() / sum).abs() < 1e-15);
        assert!((p.top[0].1 - 2f64.exp() / sum).abs() < 1e-15);
    }
}
