//! The model's shape, with HF Llama's field names in config.json, and the
//! presets. Legend: V vocab, D d_model, L layers, H heads, Hkv key/value
//! heads, Dh head dim (D / H), F ffn (SwiGLU hidden size), T max sequence.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::kernels::attention::MAX_HEAD_DIM;
use crate::kernels::rope::MAX_POSITION;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Config {
    #[serde(rename = "vocab_size")]
    pub vocab: u32,
    #[serde(rename = "hidden_size")]
    pub d_model: u32,
    #[serde(rename = "num_hidden_layers")]
    pub n_layers: u32,
    #[serde(rename = "num_attention_heads")]
    pub n_heads: u32,
    #[serde(rename = "num_key_value_heads")]
    pub n_kv_heads: u32,
    #[serde(rename = "intermediate_size")]
    pub ffn: u32,
    #[serde(rename = "max_position_embeddings")]
    pub max_seq: u32,
    pub rope_theta: f64,
    #[serde(rename = "rms_norm_eps")]
    pub norm_eps: f64,
    pub tie_word_embeddings: bool,
}

/// The named presets, smallest first.
pub const PRESETS: [&str; 3] = ["tiny", "small", "base"];

impl Config {
    /// `tiny`: seconds on a software adapter, for tests (GQA 4:2, F and V
    /// not multiples of the 64-wide matmul tile). `small`: about 5 M
    /// parameters, trains visibly in minutes on a laptop GPU. `base`: the
    /// seed system's model, 12 layers, vocab 16 384, about 110 M parameters.
    pub fn preset(name: &str) -> Result<Config> {
        let c = |vocab, d_model, n_layers, n_heads, n_kv_heads, ffn, max_seq| Config {
            vocab,
            d_model,
            n_layers,
            n_heads,
            n_kv_heads,
            ffn,
            max_seq,
            rope_theta: 10_000.0,
            norm_eps: 1e-5,
            tie_word_embeddings: false,
        };
        match name {
            "tiny" => Ok(c(301, 64, 2, 4, 2, 176, 64)),
            "small" => Ok(c(4096, 256, 4, 4, 2, 688, 256)),
            "base" => Ok(c(16384, 768, 12, 12, 12, 2048, 512)),
            _ => Err(Error::Unsupported(format!(
                "unknown preset {name:?}: use one of {}",
                PRESETS.join(", ")
            ))),
        }
    }

    pub fn head_dim(&self) -> u32 {
        self.d_model / self.n_heads
    }

    /// Heights of the weights stacked in `[W_q; W_k; W_v]`: H·Dh, Hkv·Dh, Hkv·Dh.
    pub fn qkv_heights(&self) -> [u32; 3] {
        let kv = self.n_kv_heads * self.head_dim();
        [self.n_heads * self.head_dim(), kv, kv]
    }

    /// Width of the fused `[q | k | v]` projection: (H + 2·Hkv)·Dh.
    pub fn qkv_width(&self) -> u32 {
        self.qkv_heights().iter().sum()
    }

    /// The parameters (padding excluded) the model of this config has,
    /// counted in u128 so that any config's count is exact: a reader of a
    /// user's file compares it with what the file holds before
    /// `ParamLayout::new`, whose u64 offsets would overflow for sizes no
    /// file can back (two layers of 2^30-wide matrices).
    pub fn parameters(&self) -> u128 {
        let (v, d, f) = (self.vocab as u128, self.d_model as u128, self.ffn as u128);
        let qkv = (self.n_heads as u128 + 2 * self.n_kv_heads as u128) * self.head_dim() as u128;
        let heads = self.n_heads as u128 * self.head_dim() as u128;
        // [q|k|v], o, [gate|up], down, and the two norms' gains
        let layer = qkv * d + d * heads + 2 * f * d + d * f + 2 * d;
        let heads_out = if self.tie_word_embeddings { 1 } else { 2 };
        heads_out * v * d + self.n_layers as u128 * layer + d
    }

    /// Refuses shapes the kernels cannot run, with the reason.
    pub fn validate(&self) -> Result<()> {
        let bad = |what: &str| Err(Error::Unsupported(format!("model config: {what}")));
        if self.vocab < 2
            || self.d_model == 0
            || self.n_layers == 0
            || self.ffn == 0
            || self.max_seq == 0
        {
            return bad("vocab ≥ 2 and d_model, n_layers, ffn, max_seq ≥ 1 are needed");
        }
        if self.n_heads == 0 || !self.d_model.is_multiple_of(self.n_heads) {
            return bad(&format!(
                "n_heads {} must divide d_model {}",
                self.n_heads, self.d_model
            ));
        }
        let dh = self.head_dim();
        if !dh.is_multiple_of(16) || dh > MAX_HEAD_DIM {
            return bad(&format!(
                "head_dim d_model/n_heads = {dh} must be a multiple of 16 up to {MAX_HEAD_DIM}"
            ));
        }
        if self.n_kv_heads == 0 || !self.n_heads.is_multiple_of(self.n_kv_heads) {
            return bad(&format!(
                "n_kv_heads {} must divide n_heads {}",
                self.n_kv_heads, self.n_heads
            ));
        }
        if self.max_seq > MAX_POSITION {
            return bad(&format!(
                "max_seq {} is beyond RoPE's exact range {MAX_POSITION}",
                self.max_seq
            ));
        }
        let theta_ok = self.rope_theta > 1.0 && self.rope_theta.is_finite();
        let eps_ok = self.norm_eps > 0.0 && self.norm_eps < 1.0;
        if !(theta_ok && eps_ok) {
            return bad("rope_theta > 1 and 0 < rms_norm_eps < 1 are needed");
        }
        Ok(())
    }
}

/// The shape of one training batch: B sequences of T tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchShape {
    pub batch: u32,
    pub seq: u32,
}

impl BatchShape {
    /// R = B·T: rows of every activation.
    pub fn rows(&self) -> u32 {
        self.batch * self.seq
    }

    pub fn validate(&self, config: &Config) -> Result<()> {
        if self.batch == 0 || self.seq == 0 || self.seq > config.max_seq {
            return Err(Error::Unsupported(format!(
                "batch {} × seq {}: need batch ≥ 1 and 1 ≤ seq ≤ max_seq {}",
                self.batch, self.seq, config.max_seq
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_valid_and_round_trip_as_hf_config() {
        for name in PRESETS {
            let c = Config::preset(name).unwrap();
            c.validate().unwrap();
            let json = serde_json::to_value(&c).unwrap();
            assert_eq!(json["hidden_size"], c.d_model);
            assert_eq!(serde_json::from_value::<Config>(json).unwrap(), c);
        }
        assert!(Config::preset("huge").is_err());
    }

    #[test]
    fn parameters_are_the_layouts_and_never_overflow() {
        for name in PRESETS {
            for tie_word_embeddings in [false, true] {
                let c = Config {
                    tie_word_embeddings,
                    ..Config::preset(name).unwrap()
                };
                let layout = crate::model::ParamLayout::new(&c);
                assert_eq!(c.parameters(), layout.parameters() as u128, "{name}");
            }
        }
        let widest = Config {
            vocab: u32::MAX,
            d_model: u32::MAX,
            n_layers: u32::MAX,
            n_heads: 1,
            n_kv_heads: 1,
            ffn: u32::MAX,
            ..Config::preset("tiny").unwrap()
        };
        assert!(widest.parameters() > u64::MAX as u128);
    }

    #[test]
    fn bad_shapes_are_refused_with_the_reason() {
        let tiny = Config::preset("tiny").unwrap();
        let e = Config {
            n_heads: 3,
            ..tiny.clone()
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert!(e.contains("n_heads 3 must divide d_model 64"), "{e}");
        let e = Config {
            n_kv_heads: 3,
            ..tiny.clone()
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert!(e.contains("n_kv_heads"), "{e}");
        let e = Config {
            d_model: 40,
            n_heads: 4,
            ..tiny.clone()
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert!(e.contains("head_dim"), "{e}");
        assert!(BatchShape { batch: 2, seq: 65 }.validate(&tiny).is_err());
    }
}
