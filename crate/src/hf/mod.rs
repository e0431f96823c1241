//! Hugging Face interop: a webtrain model as a `LlamaForCausalLM` folder —
//! config.json, model.safetensors with HF's tensor names, tokenizer.json,
//! generation_config.json — and such a folder back into webtrain, for
//! fine-tuning or generation. A folder is its files' contents (`HfFiles`),
//! so the CLI (directories) and the page (zip, picked files) share this
//! code. docs/INTEROP.md says what is checked against transformers.

pub mod config;
pub mod names;

use std::collections::BTreeSet;

use safetensors::SafeTensors;
use safetensors::tensor::{Dtype, TensorView};

use crate::data::Tokenizer;
use crate::error::{Error, Result, name_list as list};
use crate::model::{Config, ParamLayout};
use names::{Part, parts};

pub const CONFIG: &str = "config.json";
pub const GENERATION_CONFIG: &str = "generation_config.json";
pub const WEIGHTS: &str = "model.safetensors";
pub const WEIGHTS_INDEX: &str = "model.safetensors.index.json";
pub const TOKENIZER: &str = "tokenizer.json";

/// The files of an HF model folder.
#[derive(Clone, Debug, Default)]
pub struct HfFiles {
    pub config_json: String,
    pub generation_config_json: Option<String>,
    /// model.safetensors, or every shard a model.safetensors.index.json names.
    pub weights: Vec<Vec<u8>>,
    pub tokenizer_json: Option<String>,
}

impl HfFiles {
    /// A folder's files, each fetched by name with `read` (`None`: not
    /// there): config.json; model.safetensors, or the shards its
    /// model.safetensors.index.json names; generation_config.json and
    /// tokenizer.json where present. The CLI reads a directory, the page a
    /// zip or the files picked or dropped.
    pub fn read(mut read: impl FnMut(&str) -> Result<Option<Vec<u8>>>) -> Result<HfFiles> {
        let text = |name: &str, bytes: Vec<u8>| {
            String::from_utf8(bytes).map_err(|_| refuse(name, "is not UTF-8 text"))
        };
        let config_json = match read(CONFIG)? {
            Some(bytes) => text(CONFIG, bytes)?,
            None => {
                return Err(refuse(
                    CONFIG,
                    "is missing: this is not a Hugging Face model folder",
                ));
            }
        };
        let weights = match (read(WEIGHTS)?, read(WEIGHTS_INDEX)?) {
            (Some(weights), _) => vec![weights],
            (None, Some(index)) => {
                let index: serde_json::Value =
                    serde_json::from_str(&text(WEIGHTS_INDEX, index)?)
                        .map_err(|e| refuse(WEIGHTS_INDEX, format!("is not JSON ({e})")))?;
                let map = index["weight_map"]
                    .as_object()
                    .ok_or_else(|| refuse(WEIGHTS_INDEX, "has no weight_map"))?;
                let shards: BTreeSet<&str> = map.values().filter_map(|v| v.as_str()).collect();
                shards
                    .into_iter()
                    .map(|shard| {
                        read(shard)?.ok_or_else(|| {
                            refuse(shard, format!("is missing (named by {WEIGHTS_INDEX})"))
                        })
                    })
                    .collect::<Result<_>>()?
            }
            (None, None) => {
                return Err(refuse(
                    WEIGHTS,
                    format!("is missing, and so is {WEIGHTS_INDEX}"),
                ));
            }
        };
        let optional =
            |bytes: Option<Vec<u8>>, name: &str| bytes.map(|b| text(name, b)).transpose();
        Ok(HfFiles {
            config_json,
            generation_config_json: optional(read(GENERATION_CONFIG)?, GENERATION_CONFIG)?,
            weights,
            tokenizer_json: optional(read(TOKENIZER)?, TOKENIZER)?,
        })
    }
}

/// A model as webtrain holds it: config, f32 weights at their
/// `ParamLayout` offsets (padding zero), and its tokenizer if it has one.
#[derive(Clone, Debug, PartialEq)]
pub struct HfModel {
    pub config: Config,
    pub weights: Vec<f32>,
    pub tokenizer_json: Option<String>,
}

fn refuse(file: &str, problem: impl std::fmt::Display) -> Error {
    Error::Format {
        file: file.into(),
        problem: problem.to_string(),
    }
}

impl HfModel {
    /// The folder transformers loads with `LlamaForCausalLM.from_pretrained`:
    /// f32 tensors, q/k/v and gate/up split out of webtrain's fused ones.
    pub fn export(&self) -> Result<HfFiles> {
        self.config.validate()?;
        let layout = ParamLayout::new(&self.config);
        if self.weights.len() != layout.total as usize {
            return Err(Error::shape(
                "hf export",
                "weights",
                layout.total,
                self.weights.len(),
            ));
        }
        let parts = parts(&self.config, &layout);
        let nonfinite: Vec<String> = parts
            .iter()
            .filter(|p| {
                self.weights[p.range(&layout)]
                    .iter()
                    .any(|x| !x.is_finite())
            })
            .map(|p| p.name.clone())
            .collect();
        if !nonfinite.is_empty() {
            return Err(Error::Unsupported(format!(
                "hf export: non-finite weights (a diverged run) in {}; not exported",
                list(&nonfinite)
            )));
        }
        let views = parts
            .iter()
            .map(|p| {
                Ok((
                    p.name.clone(),
                    TensorView::new(
                        Dtype::F32,
                        p.shape(),
                        bytemuck::cast_slice(&self.weights[p.range(&layout)]),
                    )?,
                ))
            })
            .collect::<std::result::Result<Vec<_>, safetensors::SafeTensorError>>()
            .and_then(|views| {
                safetensors::serialize(
                    views,
                    Some(hashbrown::HashMap::from([(
                        "format".to_string(),
                        "pt".to_string(),
                    )])),
                )
            })
            .map_err(|e| Error::Unsupported(format!("hf export: {e}")))?;
        let generation = serde_json::json!({ "do_sample": true, "temperature": 0.8, "top_k": 40 });
        Ok(HfFiles {
            config_json: config::to_json(&self.config),
            generation_config_json: Some(
                serde_json::to_string_pretty(&generation).expect("a JSON object serializes"),
            ),
            weights: vec![views],
            tokenizer_json: self.tokenizer_json.clone(),
        })
    }

    /// Reads and checks an HF Llama folder: the config (see `config`), every
    /// tensor present with its shape, dtype F32, F16 or BF16, and finite
    /// values; no tensor webtrain would not use; a tokenizer no larger than
    /// the vocabulary.
    pub fn import(files: &HfFiles) -> Result<HfModel> {
        let config = config::from_json(&files.config_json)?;
        let shards = files
            .weights
            .iter()
            .enumerate()
            .map(|(i, bytes)| {
                let file = if files.weights.len() == 1 {
                    WEIGHTS.to_string()
                } else {
                    format!("weights shard {}", i + 1)
                };
                let st = SafeTensors::deserialize(bytes)
                    .map_err(|e| refuse(&file, format!("not a readable safetensors file ({e})")))?;
                Ok((file, st))
            })
            .collect::<Result<Vec<_>>>()?;
        // Before anything is allocated for the config: it may describe far
        // more than its files hold (or memory holds). A layer has tensors of
        // its own, so the layout is no longer than the files' tensor list.
        let tensors: Vec<(&str, u128)> = shards
            .iter()
            .flat_map(|(_, st)| st.iter())
            .map(|(n, v)| (n, v.shape().iter().map(|&d| d as u128).product::<u128>()))
            .collect();
        if config.n_layers as usize > tensors.len() {
            return Err(refuse(
                CONFIG,
                format!(
                    "num_hidden_layers {}, but the weights hold {} tensors in all",
                    config.n_layers,
                    tensors.len()
                ),
            ));
        }
        let layout = ParamLayout::new(&config);
        let parts = parts(&config, &layout);
        let missing: Vec<String> = parts
            .iter()
            .filter(|p| !tensors.iter().any(|(n, _)| *n == p.name))
            .map(|p| p.name.clone())
            .collect();
        if !missing.is_empty() {
            return Err(refuse(
                WEIGHTS,
                format!("missing tensors: {}", list(&missing)),
            ));
        }
        let held: u128 = tensors.iter().map(|(_, n)| n).sum();
        if layout.parameters() as u128 > held {
            return Err(refuse(
                CONFIG,
                format!(
                    "it describes {} parameters, but the weights hold {held} values",
                    layout.parameters()
                ),
            ));
        }
        let mut weights = vec![0f32; layout.total as usize];
        let mut seen = BTreeSet::new();
        let (mut unknown, mut nonfinite) = (Vec::new(), Vec::new());
        let mut tied_copy = None;
        for (file, st) in &shards {
            let file = file.as_str();
            for (name, view) in st.iter() {
                let Some(part) = parts.iter().find(|p| p.name == name) else {
                    if name.ends_with("rotary_emb.inv_freq") {
                        continue; // older exports store RoPE's frequencies; webtrain computes them
                    }
                    if name == "lm_head.weight" && config.tie_word_embeddings {
                        tied_copy = Some(to_f32(file, name, &view)?);
                        continue;
                    }
                    unknown.push(name.to_string());
                    continue;
                };
                if !seen.insert(name.to_string()) {
                    return Err(refuse(file, format!("tensor {name} appears twice")));
                }
                check_shape(file, part, view.shape())?;
                let values = to_f32(file, name, &view)?;
                if values.iter().any(|x| !x.is_finite()) {
                    nonfinite.push(name.to_string());
                }
                weights[part.range(&layout)].copy_from_slice(&values);
            }
        }
        if !unknown.is_empty() {
            return Err(refuse(
                WEIGHTS,
                format!(
                    "tensors a Llama model of this config does not have: {}",
                    list(&unknown)
                ),
            ));
        }
        if !nonfinite.is_empty() {
            return Err(refuse(
                WEIGHTS,
                format!("non-finite values (NaN or ±Inf) in {}", list(&nonfinite)),
            ));
        }
        if let Some(copy) = tied_copy {
            let embed = parts
                .iter()
                .find(|p| p.name == "model.embed_tokens.weight")
                .expect("every model has embeddings");
            if copy != weights[embed.range(&layout)] {
                return Err(refuse(
                    WEIGHTS,
                    "lm_head.weight differs from model.embed_tokens.weight, but config.json ties them",
                ));
            }
        }
        if let Some(json) = &files.tokenizer_json {
            let t = Tokenizer::from_json(json)?;
            if t.vocab_size() > config.vocab {
                return Err(refuse(
                    TOKENIZER,
                    format!(
                        "{} tokens, more than the model's vocab_size {}: not this model's tokenizer",
                        t.vocab_size(),
                        config.vocab
                    ),
                ));
            }
        }
        Ok(HfModel {
            config,
            weights,
            tokenizer_json: files.tokenizer_json.clone(),
        })
    }
}

fn check_shape(file: &str, part: &Part, shape: &[usize]) -> Result<()> {
    if shape != part.shape().as_slice() {
        return Err(refuse(
            file,
            format!(
                "tensor {} has shape {shape:?}, config.json says {:?}",
                part.name,
                part.shape()
            ),
        ));
    }
    Ok(())
}

/// A tensor's values as f32, from F32, F16 or BF16.
fn to_f32(file: &str, name: &str, view: &TensorView) -> Result<Vec<f32>> {
    let data = view.data();
    Ok(match view.dtype() {
        Dtype::F32 => data
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        Dtype::F16 => data
            .chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        Dtype::BF16 => data
            .chunks_exact(2)
            .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        other => {
            return Err(refuse(
                file,
                format!("tensor {name} has dtype {other:?}; webtrain reads F32, F16 and BF16"),
            ));
        }
    })
}

#[cfg(test)]
mod tests;
