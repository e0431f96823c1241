//! Hugging Face interop: a webtrain model as a `LlamaForCausalLM` folder —
//! config.json, model.safetensors with HF's tensor names, tokenizer.json,
//! generation_config.json — and such a folder back into webtrain, for
//! fine-tuning or generation. A folder is its files' contents (`HfFiles`),
//! so the CLI (directories) and the page (zip, picked files) share this
//! code. docs/INTEROP.md says what is checked against transformers.
//!
//! One file, over 500 lines: export and import check the same names and
//! shapes, side by side.

pub mod config;
pub mod names;

use std::collections::BTreeSet;

use safetensors::SafeTensors;
use safetensors::tensor::{Dtype, TensorView};

use crate::data::Tokenizer;
use crate::error::{Error, Result, byte_size, name_list as list};
use crate::model::{Config, ParamLayout};
use names::{Part, parts};

pub const CONFIG: &str = "config.json";
pub const GENERATION_CONFIG: &str = "generation_config.json";
pub const WEIGHTS: &str = "model.safetensors";
pub const WEIGHTS_INDEX: &str = "model.safetensors.index.json";
pub const TOKENIZER: &str = "tokenizer.json";

/// What an import takes of a model folder, each checked before anything
/// is read or allocated from it (`Limits::check_files` on the sizes the
/// files declare, `HfModel::import_within` on the model their config
/// describes).
///
/// The page's module is wasm32: one 4 GiB address space, no allocation
/// over 2 GiB, shared by the files as given (`files`), the f32 weights made
/// from them (`weights`), one tensor's f32 copy at a time, the text's
/// tokens and the run itself. `PAGE` leaves a model this app makes plenty
/// of room — the base preset (110 M parameters) exports a 420 MiB
/// model.safetensors and takes 420 MiB of f32 weights — and keeps files plus
/// weights at half the address space. JSON files (config.json,
/// tokenizer.json, the shard index) are parsed into trees several times
/// their size: 64 MiB is some seven times Llama 3's 9 MB tokenizer.json.
/// www/limits.js holds the same numbers for what the page reads and
/// unzips. The CLI reads into native memory and takes any size (`NONE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The folder's files together.
    pub files: u64,
    /// One JSON file.
    pub json_file: u64,
    /// The model's f32 weights, 4 bytes a parameter.
    pub weights: u64,
}

impl Limits {
    /// The page's: see above.
    pub const PAGE: Limits = Limits {
        files: 1 << 30,
        json_file: 64 << 20,
        weights: 1 << 30,
    };
    /// No cap: native memory.
    pub const NONE: Limits = Limits {
        files: u64::MAX,
        json_file: u64::MAX,
        weights: u64::MAX,
    };
    /// This build's: `PAGE` in wasm32, `NONE` natively.
    pub const HERE: Limits = if cfg!(target_arch = "wasm32") {
        Limits::PAGE
    } else {
        Limits::NONE
    };

    /// Refuses, before any is read, files of a folder (name, bytes) that
    /// these limits do not hold: a JSON file over `json_file` (by name), a
    /// file or all of them together over `files`.
    pub fn check_files<'a>(&self, files: impl IntoIterator<Item = (&'a str, u64)>) -> Result<()> {
        let why = "the page's wasm module (4 GiB of memory for the files, the model and the run) \
                   takes no more; the CLI (webtrain train --from-hf) has no such cap";
        let mut total = 0u64;
        for (name, bytes) in files {
            if name.ends_with(".json") && bytes > self.json_file {
                return Err(refuse(
                    name,
                    format!(
                        "is {}, beyond the cap of {} for a JSON file of a model folder: {why}",
                        byte_size(bytes),
                        byte_size(self.json_file)
                    ),
                ));
            }
            if bytes > self.files {
                return Err(refuse(
                    name,
                    format!(
                        "is {}, beyond the cap of {} for a model folder's files: {why}",
                        byte_size(bytes),
                        byte_size(self.files)
                    ),
                ));
            }
            total = total.saturating_add(bytes);
        }
        if total > self.files {
            return Err(refuse(
                "the model folder",
                format!(
                    "its files take {} in all, beyond the cap of {} for a model folder's files: {why}",
                    byte_size(total),
                    byte_size(self.files)
                ),
            ));
        }
        Ok(())
    }
}

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
    /// the vocabulary; within this build's `Limits::HERE`.
    pub fn import(files: &HfFiles) -> Result<HfModel> {
        Self::import_within(files, &Limits::HERE)
    }

    /// `import`, refusing files or a model beyond `limits` before the
    /// weights are allocated.
    pub fn import_within(files: &HfFiles, limits: &Limits) -> Result<HfModel> {
        check_file_sizes(files, limits)?;
        let config = config::from_json(&files.config_json)?;
        let shards = open_shards(files)?;
        let tensors: Vec<(&str, u128)> = shards
            .iter()
            .flat_map(|(_, st)| st.iter())
            .map(|(n, v)| (n, v.shape().iter().map(|&d| d as u128).product::<u128>()))
            .collect();
        check_files_hold_config(&config, &tensors, files)?;
        let layout = ParamLayout::new(&config);
        let parts = parts(&config, &layout);
        check_layout(&layout, &parts, &tensors, limits)?;
        let weights = read_weights(&config, &layout, &parts, &shards)?;
        if let Some(json) = &files.tokenizer_json {
            check_tokenizer(json, &config)?;
        }
        Ok(HfModel {
            config,
            weights,
            tokenizer_json: files.tokenizer_json.clone(),
        })
    }
}

/// The name a weights file goes by in messages: model.safetensors, or
/// "weights shard i" (from 1) of several.
fn shard_name(i: usize, count: usize) -> String {
    match count {
        1 => WEIGHTS.to_string(),
        _ => format!("weights shard {i}"),
    }
}

/// `Limits::check_files` on every file of the folder, before any is parsed.
fn check_file_sizes(files: &HfFiles, limits: &Limits) -> Result<()> {
    let optional = |name, text: &Option<String>| text.as_ref().map(|t| (name, t.len() as u64));
    let shard_names: Vec<String> = (1..=files.weights.len())
        .map(|i| shard_name(i, files.weights.len()))
        .collect();
    limits.check_files(
        [(CONFIG, files.config_json.len() as u64)]
            .into_iter()
            .chain(optional(GENERATION_CONFIG, &files.generation_config_json))
            .chain(optional(TOKENIZER, &files.tokenizer_json))
            .chain(
                shard_names
                    .iter()
                    .zip(&files.weights)
                    .map(|(n, w)| (n.as_str(), w.len() as u64)),
            ),
    )
}

/// Each weights file parsed as safetensors, with its name for messages.
fn open_shards(files: &HfFiles) -> Result<Vec<(String, SafeTensors<'_>)>> {
    files
        .weights
        .iter()
        .enumerate()
        .map(|(i, bytes)| {
            let file = shard_name(i + 1, files.weights.len());
            let st = open_safetensors(&file, bytes)?;
            Ok((file, st))
        })
        .collect()
}

/// `bytes` read as a safetensors file named `file` (for messages), its
/// header checked first (`check_offsets`).
pub fn open_safetensors<'a>(file: &str, bytes: &'a [u8]) -> Result<SafeTensors<'a>> {
    check_offsets(file, bytes)?;
    SafeTensors::deserialize(bytes)
        .map_err(|e| refuse(file, format!("not a readable safetensors file ({e})")))
}

/// Before anything is allocated for the config: it may describe far more
/// than its files hold (or memory holds). `tensors`: every tensor of the
/// files, by name, with its number of values.
fn check_files_hold_config(
    config: &Config,
    tensors: &[(&str, u128)],
    files: &HfFiles,
) -> Result<()> {
    // A layer has tensors of its own, so the layout is no longer than the
    // files' tensor list.
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
    // In u128, before the layout's u64 offsets are summed: a parameter
    // takes at least 2 bytes (F16, BF16), so the files bound the model.
    let file_bytes: u128 = files.weights.iter().map(|w| w.len() as u128).sum();
    if 2 * config.parameters() > file_bytes {
        return Err(refuse(
            CONFIG,
            format!(
                "it describes {} parameters, but the weights files hold {file_bytes} bytes \
                 (at least 2 a parameter)",
                config.parameters()
            ),
        ));
    }
    Ok(())
}

/// Every tensor of the layout among the files', as many values in the
/// files as the layout takes, and its f32 weights within `limits`: the
/// last checks before the weights are allocated.
fn check_layout(
    layout: &ParamLayout,
    parts: &[Part],
    tensors: &[(&str, u128)],
    limits: &Limits,
) -> Result<()> {
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
    if layout.total.saturating_mul(4) > limits.weights {
        return Err(refuse(
            CONFIG,
            format!(
                "its {} parameters take {} as f32 weights, beyond the cap of {}: the page's \
                 wasm module (4 GiB of memory for the files, the model and the run) holds no \
                 more; the CLI (webtrain train --from-hf) has no such cap",
                layout.parameters(),
                byte_size(4 * layout.total),
                byte_size(limits.weights)
            ),
        ));
    }
    Ok(())
}

/// The weights at their layout offsets, every tensor checked as it is
/// copied: shape, dtype, once only, known to the layout, finite; a tied
/// lm_head.weight must equal the embeddings.
fn read_weights(
    config: &Config,
    layout: &ParamLayout,
    parts: &[Part],
    shards: &[(String, SafeTensors)],
) -> Result<Vec<f32>> {
    let mut weights = vec![0f32; layout.total as usize];
    let mut seen = BTreeSet::new();
    let (mut unknown, mut nonfinite) = (Vec::new(), Vec::new());
    let mut tied_copy = None;
    for (file, st) in shards {
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
            weights[part.range(layout)].copy_from_slice(&values);
        }
    }
    check_all_read(&unknown, &nonfinite)?;
    if let Some(copy) = tied_copy {
        check_tied_copy(&copy, &weights, layout, parts)?;
    }
    Ok(weights)
}

/// No tensor the model would not use, no non-finite value.
fn check_all_read(unknown: &[String], nonfinite: &[String]) -> Result<()> {
    if !unknown.is_empty() {
        return Err(refuse(
            WEIGHTS,
            format!(
                "tensors a Llama model of this config does not have: {}",
                list(unknown)
            ),
        ));
    }
    if !nonfinite.is_empty() {
        return Err(refuse(
            WEIGHTS,
            format!("non-finite values (NaN or ±Inf) in {}", list(nonfinite)),
        ));
    }
    Ok(())
}

/// A stored lm_head.weight of a tied model must be the embeddings: the
/// model has only the one tensor.
fn check_tied_copy(
    copy: &[f32],
    weights: &[f32],
    layout: &ParamLayout,
    parts: &[Part],
) -> Result<()> {
    let embed = parts
        .iter()
        .find(|p| p.name == "model.embed_tokens.weight")
        .expect("every model has embeddings");
    if copy != &weights[embed.range(layout)] {
        return Err(refuse(
            WEIGHTS,
            "lm_head.weight differs from model.embed_tokens.weight, but config.json ties them",
        ));
    }
    Ok(())
}

/// The tokenizer reads, and has no more tokens than the model's vocabulary.
fn check_tokenizer(json: &str, config: &Config) -> Result<()> {
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
    Ok(())
}

/// Refuses a safetensors file whose header places a tensor past the end of
/// its data, before the `safetensors` crate adds the offsets up: 0.8.0
/// adds the header's length to the last one unchecked, which overflows (a
/// panic in a build with overflow checks) for ends near 2^64. Anything
/// else wrong with the header is left to the crate to tell.
fn check_offsets(file: &str, bytes: &[u8]) -> Result<()> {
    const MAX_HEADER: usize = 100_000_000; // the crate's: it refuses a longer one itself
    let Some(n) = bytes
        .get(..8)
        .map(|b| u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
    else {
        return Ok(());
    };
    let Some(n) = usize::try_from(n).ok().filter(|&n| n <= MAX_HEADER) else {
        return Ok(());
    };
    let Some(header) = bytes.get(8..).and_then(|rest| rest.get(..n)) else {
        return Ok(());
    };
    let Ok(serde_json::Value::Object(tensors)) = serde_json::from_slice(header) else {
        return Ok(());
    };
    let data = (bytes.len() - 8 - n) as u64;
    for (name, tensor) in &tensors {
        let end = tensor
            .get("data_offsets")
            .and_then(|o| o.get(1))
            .and_then(serde_json::Value::as_u64);
        if let Some(end) = end.filter(|&end| end > data) {
            return Err(refuse(
                file,
                format!(
                    "not a readable safetensors file (tensor {name} ends at byte {end} of the \
                     data, which is {data} bytes: truncated, or its header is damaged)"
                ),
            ));
        }
    }
    Ok(())
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
pub fn to_f32(file: &str, name: &str, view: &TensorView) -> Result<Vec<f32>> {
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
