//! Hugging Face interop: a webtrain model as a `LlamaForCausalLM` folder —
//! config.json, model.safetensors with HF's tensor names, tokenizer.json,
//! generation_config.json — and such a folder back into webtrain, for
//! fine-tuning or generation. A folder is its files' contents (`HfFiles`),
//! so the CLI (directories) and the page (zip, picked files) share this
//! code. docs/INTEROP.md says what is checked against transformers.
//! An import's checks and reading: `import.rs`.

pub mod config;
mod import;
pub mod names;

use std::collections::BTreeSet;

use safetensors::tensor::{Dtype, TensorView};

use crate::error::{Error, Result, byte_size, name_list as list};
use crate::model::{Config, ParamLayout};
use crate::ops::adam::bf16_bits;
use crate::optim::MasterWeights;
use import::{
    check_file_sizes, check_files_hold_config, check_layout, check_tokenizer, open_shards,
    read_weights,
};
pub use import::{open_safetensors, to_f32};
use names::parts;

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

/// The dtype an export writes the weights in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportDtype {
    /// f32: webtrain's master weights as they are.
    F32,
    /// bf16, each weight rounded to nearest even (`.to(torch.bfloat16)`);
    /// exact for bf16-sr weights, which are bf16 values.
    Bf16,
}

impl ExportDtype {
    pub const ALL: [ExportDtype; 2] = [ExportDtype::F32, ExportDtype::Bf16];

    /// The dtype of weights trained as `master`: bf16-sr's are bf16.
    pub fn trained(master: MasterWeights) -> ExportDtype {
        match master {
            MasterWeights::F32 => ExportDtype::F32,
            MasterWeights::Bf16Sr => ExportDtype::Bf16,
        }
    }

    pub fn parse(name: &str) -> Result<ExportDtype> {
        match Self::ALL.into_iter().find(|d| d.name() == name) {
            Some(d) => Ok(d),
            None => Err(Error::Unsupported(format!(
                "hf export: unknown dtype {name:?}: use {}",
                Self::ALL.map(Self::name).join(" or ")
            ))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ExportDtype::F32 => "f32",
            ExportDtype::Bf16 => "bf16",
        }
    }

    /// config.json's `torch_dtype`.
    pub fn torch_dtype(self) -> &'static str {
        match self {
            ExportDtype::F32 => "float32",
            ExportDtype::Bf16 => "bfloat16",
        }
    }

    fn safetensors(self) -> Dtype {
        match self {
            ExportDtype::F32 => Dtype::F32,
            ExportDtype::Bf16 => Dtype::BF16,
        }
    }

    /// `values` as this dtype's little-endian bytes.
    fn bytes(self, values: &[f32]) -> Vec<u8> {
        match self {
            ExportDtype::F32 => bytemuck::cast_slice(values).to_vec(),
            ExportDtype::Bf16 => (values.iter())
                .flat_map(|&x| bf16_bits(x).to_le_bytes())
                .collect(),
        }
    }
}

pub(super) fn refuse(file: &str, problem: impl std::fmt::Display) -> Error {
    Error::Format {
        file: file.into(),
        problem: problem.to_string(),
    }
}

impl HfModel {
    /// The folder transformers loads with `LlamaForCausalLM.from_pretrained`:
    /// tensors of `dtype`, q/k/v and gate/up split out of webtrain's fused ones.
    pub fn export(&self, dtype: ExportDtype) -> Result<HfFiles> {
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
        let data: Vec<Vec<u8>> = (parts.iter())
            .map(|p| dtype.bytes(&self.weights[p.range(&layout)]))
            .collect();
        let views = (parts.iter().zip(&data))
            .map(|(p, bytes)| {
                Ok((
                    p.name.clone(),
                    TensorView::new(dtype.safetensors(), p.shape(), bytes)?,
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
            config_json: config::to_json(&self.config, dtype),
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

#[cfg(test)]
mod tests;
