//! Reading a Hugging Face model folder: every file's size, the safetensors
//! headers, the config against what the files hold, each tensor's name,
//! shape, dtype and values, and the tokenizer, checked before anything is
//! allocated from them.

use std::collections::BTreeSet;

use safetensors::SafeTensors;
use safetensors::tensor::{Dtype, TensorView};

use super::names::Part;
use super::{CONFIG, GENERATION_CONFIG, HfFiles, Limits, TOKENIZER, WEIGHTS, refuse};
use crate::data::Tokenizer;
use crate::error::{Result, byte_size, name_list as list};
use crate::model::{Config, ParamLayout};

/// The name a weights file goes by in messages: model.safetensors, or
/// "weights shard i" (from 1) of several.
pub(super) fn shard_name(i: usize, count: usize) -> String {
    match count {
        1 => WEIGHTS.to_string(),
        _ => format!("weights shard {i}"),
    }
}

/// `Limits::check_files` on every file of the folder, before any is parsed.
pub(super) fn check_file_sizes(files: &HfFiles, limits: &Limits) -> Result<()> {
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
pub(super) fn open_shards(files: &HfFiles) -> Result<Vec<(String, SafeTensors<'_>)>> {
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
pub(super) fn check_files_hold_config(
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
pub(super) fn check_layout(
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
pub(super) fn read_weights(
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
pub(super) fn check_all_read(unknown: &[String], nonfinite: &[String]) -> Result<()> {
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
pub(super) fn check_tied_copy(
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
pub(super) fn check_tokenizer(json: &str, config: &Config) -> Result<()> {
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
pub(super) fn check_offsets(file: &str, bytes: &[u8]) -> Result<()> {
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

pub(super) fn check_shape(file: &str, part: &Part, shape: &[usize]) -> Result<()> {
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
