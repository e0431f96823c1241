//! What the page asks of a run besides training it: a look inside the
//! model at a text, every tensor's ranges, the HF export, and generation.
//! Each takes the run (or its trainer), never the page's session.

use std::ops::ControlFlow;

use serde::{Deserialize, Serialize};
use wasm_bindgen::prelude::*;

use super::{js_error, to_js};
use crate::data::{Batch, Tokenizer};
use crate::hf::{self, HfModel};
use crate::inspect::{Prediction, Probe, ranges};
use crate::model::Recipe;
use crate::model::decode::{Decoder, Generation, Sampling};
use crate::run::Run;
use crate::train::{StepStats, Trainer};

/// The run's tokenizer: the page trains on text or a task, so it has one.
pub(super) fn tokenizer(run: &Run) -> Result<&Tokenizer, JsError> {
    run.text
        .tokenizer
        .as_ref()
        .ok_or_else(|| JsError::new("this run has no tokenizer"))
}

/// Tokens a look reads at most: a heatmap of more is too fine to read.
const LOOK_TOKENS: usize = 64;

/// What `look` resolves with (the attention maps are set beside it as
/// `Float32Array`s).
#[derive(Serialize)]
struct Look<'a> {
    step: u32,
    /// A named recipe's name, or a custom recipe's parts.
    precision: &'a Recipe,
    /// Each token's text, and its id.
    tokens: Vec<String>,
    ids: &'a [u32],
    heads: u32,
    /// The text had more tokens than a look reads.
    truncated: bool,
    predictions: Vec<Prediction>,
    /// The text of each prediction's top tokens.
    top_tokens: Vec<Vec<String>>,
}

/// `text` (or, empty, the first held-out window) through the model's own
/// forward in the run's precision: every layer's attention maps and each
/// position's predictions (`inspect::Probe`).
pub(super) async fn look(run: &Run, text: &str, top_k: usize) -> Result<JsValue, JsError> {
    let (t, tokenizer) = (&run.trainer, tokenizer(run)?);
    let mut ids = match text.trim().is_empty() {
        false => tokenizer.encode(text).map_err(js_error)?,
        true => {
            let first = run.validation.first().ok_or_else(|| {
                JsError::new("this run holds no text out of training: type a text to look at")
            })?;
            // a window and the token after it: every position has a target
            let seq = t.config.shape.seq as usize;
            let mut window = first.inputs[..seq].to_vec();
            window.push(first.targets[seq - 1]);
            window
        }
    };
    if ids.is_empty() {
        return Err(JsError::new("the text has no tokens"));
    }
    let cap = LOOK_TOKENS.min(t.config.model.max_seq as usize);
    let truncated = ids.len() > cap;
    ids.truncate(cap);
    let weights = t.model.read_weights(&t.gpu).await.map_err(js_error)?;
    let c = &t.config;
    // the trainer's kernels: built in the run's precision already
    let probe = Probe::run(&t.gpu, &t.k, &c.model, c.precision.clone(), &weights, &ids)
        .await
        .map_err(js_error)?;
    let maps = probe.attention().await.map_err(js_error)?;
    let tokens = ids
        .iter()
        .map(|&id| tokenizer.decode(&[id]))
        .collect::<crate::Result<Vec<String>>>()
        .map_err(js_error)?;
    let predictions = probe.predictions(top_k).await.map_err(js_error)?;
    let top_tokens = predictions
        .iter()
        .map(|p| {
            p.top
                .iter()
                .map(|&(id, _)| tokenizer.decode(&[id]))
                .collect()
        })
        .collect::<crate::Result<Vec<Vec<String>>>>()
        .map_err(js_error)?;
    let result = to_js(&Look {
        step: t.steps(),
        precision: &c.precision,
        tokens,
        ids: &ids,
        heads: c.model.n_heads,
        truncated,
        predictions,
        top_tokens,
    })?;
    let attention: js_sys::Array = maps
        .iter()
        .map(|m| js_sys::Float32Array::from(&m[..]))
        .collect();
    js_sys::Reflect::set(&result, &JsValue::from_str("attention"), &attention)
        .map_err(|_| JsError::new("look: cannot hand over the attention maps"))?;
    Ok(result)
}

/// Every tensor's ranges on `batch`, once the steps in flight (`steps`,
/// handed back with them) were collected.
pub(super) async fn measure_ranges(
    t: &mut Trainer,
    batch: &Batch,
    steps: Vec<StepStats>,
) -> Result<JsValue, JsError> {
    let r = ranges::measure(t, batch, ranges::BlockFormats::Measured)
        .await
        .map_err(js_error)?;
    let step = t.steps();
    to_js(
        &serde_json::json!({"step": step, "formats": ranges::FORMATS, "ranges": r, "steps": steps}),
    )
}

pub(super) async fn export_hf(run: &Run) -> Result<JsValue, JsError> {
    let t = &run.trainer;
    let weights = t.model.read_weights(&t.gpu).await.map_err(js_error)?;
    let model = HfModel {
        config: t.config.model.clone(),
        weights,
        tokenizer_json: Some(tokenizer(run)?.to_json().map_err(js_error)?),
    };
    let dtype = hf::ExportDtype::trained(t.config.optim.master);
    let files = model.export(dtype).map_err(js_error)?;
    let [safetensors] = files.weights.as_slice() else {
        return Err(JsError::new(&format!(
            "hf export: {} weight files; the page writes one {}",
            files.weights.len(),
            hf::WEIGHTS
        )));
    };
    let folder = js_sys::Object::new();
    let put = |name: &str, bytes: &[u8]| {
        js_sys::Reflect::set(
            &folder,
            &JsValue::from_str(name),
            &js_sys::Uint8Array::from(bytes),
        )
        .map(|_| ())
        .map_err(|_| JsError::new(&format!("hf export: cannot hand over {name}")))
    };
    put(hf::CONFIG, files.config_json.as_bytes())?;
    put(hf::WEIGHTS, safetensors)?;
    if let Some(g) = &files.generation_config_json {
        put(hf::GENERATION_CONFIG, g.as_bytes())?;
    }
    if let Some(tok) = &files.tokenizer_json {
        put(hf::TOKENIZER, tok.as_bytes())?;
    }
    Ok(folder.into())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct GenerateOptions {
    temperature: f32,
    top_k: u32,
    length: u32,
    #[serde(default = "generation_seed")]
    seed: u64,
}

fn generation_seed() -> u64 {
    1
}

#[derive(Serialize)]
struct Generated {
    text: String,
    tokens: usize,
}

pub(super) async fn generate(
    run: &Run,
    prompt: &str,
    opts: &GenerateOptions,
    on_token: &js_sys::Function,
) -> Result<JsValue, JsError> {
    let (t, tokenizer) = (&run.trainer, tokenizer(run)?);
    let max_seq = t.config.model.max_seq;
    let length = opts.length.clamp(1, max_seq);
    let mut ids = tokenizer.encode(prompt).map_err(js_error)?;
    if ids.is_empty() {
        return Err(JsError::new("give a prompt to continue"));
    }
    let keep = (max_seq + 1 - length) as usize; // prompt + length − 1 positions are fed
    if ids.len() > keep {
        ids.drain(..ids.len() - keep);
    }
    let mut decoder = Decoder::new(&t.gpu, &t.k, &t.model, 1, max_seq).map_err(js_error)?;
    let g = Generation {
        max_new: length,
        sampling: Sampling {
            temperature: opts.temperature,
            top_k: opts.top_k,
        },
        seed: opts.seed,
    };
    let mut new: Vec<u32> = Vec::new();
    let mut text = String::new();
    let mut failed = None;
    decoder
        .generate(&t.gpu, &t.k, &t.model, &[&ids], &g, |tokens, probs| {
            new.extend_from_slice(tokens);
            // decode the whole continuation: a token may end a multi-byte character
            let now = match tokenizer.decode(&new) {
                Ok(now) => now,
                Err(e) => {
                    failed = Some(e);
                    return ControlFlow::Break(());
                }
            };
            let piece = now.strip_prefix(text.as_str()).unwrap_or(&now).to_string();
            text = now;
            match on_token.call3(
                &JsValue::NULL,
                &JsValue::from_str(&piece),
                &JsValue::from_str(&text),
                &JsValue::from_f64(probs[0]),
            ) {
                Ok(_) => ControlFlow::Continue(()),
                Err(_) => ControlFlow::Break(()),
            }
        })
        .await
        .map_err(js_error)?;
    if let Some(e) = failed {
        return Err(js_error(e));
    }
    to_js(&Generated {
        text,
        tokens: new.len(),
    })
}
