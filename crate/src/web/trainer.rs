//! `Trainer`: one training run in the worker — the model on the device, its
//! token stream and batch RNG, and the calls the page makes on it.

use std::cell::RefCell;
use std::ops::ControlFlow;
use std::rc::Rc;

use js_sys::Promise;
use serde::{Deserialize, Serialize};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

use super::{Data, from_js, gpu, js_error, to_js};
use crate::checkpoint::{self, Checkpoint, RunState};
use crate::data::{Batch, Dataset, SplitMix64, Tokenizer};
use crate::hf::{self, HfModel};
use crate::model::decode::{Decoder, Generation, Sampling};
use crate::model::{BatchShape, Config, ParamLayout, Precision};
use crate::optim::{HostState, LrSchedule, OptimConfig, OptimState};
use crate::train::survival::{self, Survival};
use crate::train::{self, Memory, TrainConfig};

/// What the page asks for, in its words (camelCase).
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunSpec {
    /// A preset name, or `custom` with `model`.
    pub preset: String,
    /// HF Llama fields, for `preset: "custom"`.
    pub model: Option<Config>,
    pub batch: u32,
    pub seq: u32,
    pub precision: String,
    pub optim_state: String,
    pub lr: f64,
    pub warmup: u32,
    /// The schedule's length: the cosine reaches its floor here.
    pub steps: u32,
    #[serde(default = "defaults::min_lr_ratio")]
    pub min_lr_ratio: f64,
    #[serde(default = "defaults::weight_decay")]
    pub weight_decay: f64,
    #[serde(default = "defaults::clip")]
    pub clip: f32,
    #[serde(default = "defaults::seed")]
    pub seed: u64,
    #[serde(default = "defaults::val_fraction")]
    pub val_fraction: f64,
}

mod defaults {
    pub fn min_lr_ratio() -> f64 {
        0.1
    }
    pub fn weight_decay() -> f64 {
        0.1
    }
    pub fn clip() -> f32 {
        1.0
    }
    pub fn seed() -> u64 {
        1
    }
    pub fn val_fraction() -> f64 {
        0.05
    }
}

impl RunSpec {
    pub fn config(&self) -> crate::Result<TrainConfig> {
        let model = match (self.preset.as_str(), &self.model) {
            ("custom", Some(c)) => c.clone(),
            ("custom", None) => {
                return Err(crate::Error::Unsupported(
                    "a custom model needs its sizes".into(),
                ));
            }
            (name, _) => Config::preset(name)?,
        };
        let shape = BatchShape {
            batch: self.batch,
            seq: self.seq,
        };
        model.validate()?;
        shape.validate(&model)?;
        let optim = OptimConfig {
            state: OptimState::parse(&self.optim_state)?,
            schedule: LrSchedule {
                peak: self.lr,
                warmup: self.warmup,
                total: self.steps.max(1),
                min_ratio: self.min_lr_ratio,
            },
            weight_decay: self.weight_decay,
            max_grad_norm: self.clip,
            ..OptimConfig::default()
        };
        Ok(TrainConfig {
            model,
            shape,
            precision: Precision::parse(&self.precision)?,
            optim,
            seed: self.seed,
        })
    }
}

/// Memory per precision × optimizer state for one model on this adapter,
/// and whether the adapter's limits can hold it.
#[derive(Serialize)]
struct Plan {
    parameters: u64,
    fits: bool,
    reason: Option<String>,
    modes: Vec<PlanMode>,
}

#[derive(Serialize)]
struct PlanMode {
    precision: &'static str,
    optim_state: &'static str,
    memory: Memory,
}

/// The memory a run of `spec` takes in every mode; `fits` is false, with
/// the reason, where this adapter cannot bind or allocate it.
#[wasm_bindgen(js_name = planModel)]
pub async fn plan_model(spec: JsValue) -> Result<JsValue, JsError> {
    let spec: RunSpec = from_js(spec)?;
    let c = spec.config().map_err(js_error)?;
    let gpu = gpu().await.map_err(js_error)?;
    let fits = train::check_limits(&c.model, c.shape, &gpu.limits);
    let binding = gpu.limits.max_storage_buffer_binding_size;
    let mut modes = Vec::new();
    for precision in Precision::ALL {
        for state in [OptimState::Fp32, OptimState::Int8] {
            let memory = match Memory::of(&c.model, c.shape, precision, state, binding) {
                Ok(m) => m,
                Err(_) => continue, // reported by `fits`
            };
            modes.push(PlanMode {
                precision: precision.name(),
                optim_state: state.name(),
                memory,
            });
        }
    }
    let parameters = ParamLayout::new(&c.model).parameters();
    to_js(&Plan {
        parameters,
        fits: fits.is_ok(),
        reason: fits.err().map(|e| e.to_string()),
        modes,
    })
}

/// A run and what it trains on.
struct Run {
    trainer: train::Trainer,
    tokenizer: Tokenizer,
    data: Dataset,
    rng: SplitMix64,
    validation: Vec<Batch>,
    /// Which text, for checkpoints.
    text: DataState,
    /// The weights at the last `inspect`, and the step they were read at.
    inspected: Option<(u32, Vec<f32>)>,
}

impl Run {
    fn new(
        trainer: train::Trainer,
        tokenizer: Tokenizer,
        text: DataState,
        data: Dataset,
        rng: SplitMix64,
    ) -> Run {
        let shape = trainer.config.shape;
        let validation = data
            .validation_batches(shape.batch as usize)
            .into_iter()
            .filter(|b| b.inputs.len() == shape.rows() as usize)
            .take(VALIDATION_BATCHES)
            .collect();
        Run {
            trainer,
            tokenizer,
            text,
            data,
            rng,
            validation,
            inspected: None,
        }
    }

    fn batch(&mut self) -> Batch {
        self.data
            .train_batch(&mut self.rng, self.trainer.config.shape.batch as usize)
    }
}

/// Validation batches per evaluation: enough to be steady, few enough to be quick.
const VALIDATION_BATCHES: usize = 4;

#[wasm_bindgen]
pub struct Trainer {
    /// Taken out while a call runs: a second call meanwhile is refused as busy.
    run: Rc<RefCell<Option<Run>>>,
}

/// Runs `f` on the run, then puts it back (also when `f` fails).
fn with_run<T, F>(cell: Rc<RefCell<Option<Run>>>, f: impl FnOnce(Run) -> F + 'static) -> Promise
where
    F: std::future::Future<Output = (Run, Result<T, JsError>)> + 'static,
    T: Into<JsValue>,
{
    future_to_promise(async move {
        let run = cell
            .borrow_mut()
            .take()
            .ok_or_else(|| JsError::new("the trainer is busy with another call"))?;
        let (run, result) = f(run).await;
        *cell.borrow_mut() = Some(run);
        result.map(Into::into).map_err(Into::into)
    })
}

#[derive(Serialize)]
struct Created<'a> {
    /// Steps trained so far.
    step: u32,
    parameters: u64,
    memory: Memory,
    train_tokens: usize,
    validation_tokens: usize,
    validation_batches: usize,
    config: &'a TrainConfig,
    optimizer_dispatches: usize,
    tokenizer: super::data::TokenizerInfo<'a>,
}

#[wasm_bindgen]
impl Trainer {
    /// A new run of `spec` on `data`'s text and tokenizer (whose vocabulary
    /// must be the model's).
    pub fn create(spec: JsValue, data: &Data) -> Result<Promise, JsError> {
        let spec: RunSpec = from_js(spec)?;
        let config = spec.config().map_err(js_error)?;
        let tokenizer = data.tokenizer()?;
        if tokenizer.vocab_size() != config.model.vocab {
            return Err(JsError::new(&format!(
                "the tokenizer has {} tokens but the model's vocabulary is {}: train a tokenizer of {} tokens",
                tokenizer.vocab_size(),
                config.model.vocab,
                config.model.vocab
            )));
        }
        let seq = config.shape.seq as usize;
        let tokens = data.corpus().tokenize(tokenizer, seq).map_err(js_error)?;
        let dataset = Dataset::new(tokens, seq, spec.val_fraction).map_err(js_error)?;
        let tokenizer =
            Tokenizer::from_json(&tokenizer.to_json().map_err(js_error)?).map_err(js_error)?;
        let text = DataState {
            files: data.corpus().files().map(|(n, _)| n.to_string()).collect(),
            val_fraction: spec.val_fraction,
        };
        Ok(future_to_promise(async move {
            let gpu = gpu().await.map_err(js_error)?;
            let trainer = train::Trainer::new(&gpu, config.clone())
                .await
                .map_err(js_error)?;
            let run = Run::new(
                trainer,
                tokenizer,
                text,
                dataset,
                SplitMix64(config.seed ^ BATCH_SEED),
            );
            Ok(Trainer {
                run: Rc::new(RefCell::new(Some(run))),
            }
            .into())
        }))
    }

    /// What the run is: `{parameters, memory, train_tokens, …, config}`.
    pub fn info(&self) -> Result<JsValue, JsError> {
        let cell = self.run.borrow();
        let run = cell
            .as_ref()
            .ok_or_else(|| JsError::new("the trainer is busy with another call"))?;
        let t = &run.trainer;
        to_js(&Created {
            step: t.steps(),
            parameters: t.model.layout.parameters(),
            memory: t.memory().map_err(js_error)?,
            train_tokens: run.data.train_tokens(),
            validation_tokens: run.data.validation_tokens(),
            validation_batches: run.validation.len(),
            config: &t.config,
            optimizer_dispatches: t.optimizer_dispatches(),
            tokenizer: super::data::TokenizerInfo {
                vocab_size: run.tokenizer.vocab_size(),
                fingerprint: run.tokenizer.fingerprint(),
                tokens: run.data.train_tokens() + run.data.validation_tokens(),
            },
        })
    }

    /// Submits `n` steps; resolves with the stats of the steps completed
    /// meanwhile (the last two arrive with the next call, or `flush`).
    pub fn step(&self, n: u32) -> Promise {
        with_run(self.run.clone(), move |mut run| async move {
            let mut done = Vec::new();
            for _ in 0..n {
                let batch = run.batch();
                match run.trainer.step(&batch).await {
                    Ok(stats) => done.extend(stats),
                    Err(e) => return (run, Err(js_error(e))),
                }
            }
            let result = to_js(&done);
            (run, result)
        })
    }

    /// Waits for every submitted step; resolves with their stats.
    pub fn flush(&self) -> Promise {
        with_run(self.run.clone(), |mut run| async move {
            let result = run
                .trainer
                .flush()
                .await
                .map_err(js_error)
                .and_then(|s| to_js(&s));
            (run, result)
        })
    }

    /// The mean loss over the held-out batches, at the current weights.
    pub fn validate(&self) -> Promise {
        with_run(self.run.clone(), |mut run| async move {
            let batches = std::mem::take(&mut run.validation);
            let result = run
                .trainer
                .evaluate(&batches)
                .await
                .map(JsValue::from_f64)
                .map_err(js_error);
            run.validation = batches;
            (run, result)
        })
    }

    /// Switches the weights precision and the optimizer state (at a pause):
    /// the weights are kept, the moments converted, the steps go on.
    /// Resolves with the stats of the steps that were still in flight.
    pub fn reconfigure(&self, precision: String, optim_state: String) -> Promise {
        with_run(self.run.clone(), move |mut run| async move {
            let modes = Precision::parse(&precision)
                .and_then(|p| Ok((p, OptimState::parse(&optim_state)?)));
            let (precision, state) = match modes {
                Ok(m) => m,
                Err(e) => return (run, Err(js_error(e))),
            };
            let result = run
                .trainer
                .reconfigure(precision, state)
                .await
                .map_err(js_error)
                .and_then(|pending| to_js(&pending));
            (run, result)
        })
    }

    /// Continues `prompt` with up to `opts.length` tokens sampled with
    /// `opts.temperature` (0: greedy) and `opts.topK` (0: all) from
    /// `opts.seed`, through the KV-cache decoder; `on_token(token, text)`
    /// receives each token's text and the text so far. Resolves with
    /// `{text, tokens}`. A prompt longer than the model's context keeps its end.
    pub fn generate(&self, prompt: String, opts: JsValue, on_token: js_sys::Function) -> Promise {
        let opts: Result<GenerateOptions, JsError> = from_js(opts);
        with_run(self.run.clone(), move |run| async move {
            let result = match opts {
                Ok(opts) => generate(&run, &prompt, &opts, &on_token).await,
                Err(e) => Err(e),
            };
            (run, result)
        })
    }

    /// The run as a `.safetensors` checkpoint (weights, optimizer state,
    /// step, batch RNG, config, tokenizer, and which text it trains on).
    pub fn save(&self) -> Promise {
        with_run(self.run.clone(), |run| async move {
            let result = save(&run)
                .await
                .map(|bytes| js_sys::Uint8Array::from(&bytes[..]));
            (run, result)
        })
    }

    /// The model as a Hugging Face `LlamaForCausalLM` folder, after every
    /// step submitted so far: `{file name: Uint8Array}` with config.json,
    /// model.safetensors (f32), generation_config.json and tokenizer.json.
    #[wasm_bindgen(js_name = exportHf)]
    pub fn export_hf(&self) -> Promise {
        with_run(self.run.clone(), |run| async move {
            let result = export_hf(&run).await;
            (run, result)
        })
    }

    /// Continues the run of a checkpoint on `data`'s text (the same files
    /// it was trained on; its tokenizer replaces `data`'s).
    pub fn load(bytes: &[u8], data: &mut Data) -> Result<Promise, JsError> {
        let c = Checkpoint::from_bytes(bytes).map_err(js_error)?;
        let saved: DataState = c.run.data.as_deref().and_then(|d| serde_json::from_str(d).ok()).ok_or_else(|| {
            JsError::new("this checkpoint does not say which text it trained on: it was not saved by the page")
        })?;
        let files: Vec<String> = data.corpus().files().map(|(n, _)| n.to_string()).collect();
        if files != saved.files {
            return Err(JsError::new(&format!(
                "this run trained on {}; load that text first (loaded now: {})",
                list(&saved.files),
                list(&files)
            )));
        }
        let json = c
            .run
            .tokenizer_json
            .as_deref()
            .ok_or_else(|| JsError::new("this checkpoint holds no tokenizer"))?;
        data.set_tokenizer(json)?;
        let tokenizer = Tokenizer::from_json(json).map_err(js_error)?;
        let seq = c.config.shape.seq as usize;
        let tokens = data.corpus().tokenize(&tokenizer, seq).map_err(js_error)?;
        let dataset = Dataset::new(tokens, seq, saved.val_fraction).map_err(js_error)?;
        Ok(future_to_promise(async move {
            let gpu = gpu().await.map_err(js_error)?;
            let trainer = c.restore(&gpu).await.map_err(js_error)?;
            let run = Run::new(trainer, tokenizer, saved, dataset, SplitMix64(c.run.rng));
            Ok(Trainer {
                run: Rc::new(RefCell::new(Some(run))),
            }
            .into())
        }))
    }

    /// `{step, tensors: [{name, shape, rms, max_abs, update_ratio, nonfinite,
    /// survival}], memory, kernels: [{kernel, dispatches, ms}] | null,
    /// kernels_error}`. One training step runs (it counts), profiled where
    /// the adapter has timestamps; `update_ratio` is ‖Δw‖/‖w‖ per step since
    /// the previous inspection; `survival` is that step's update survival
    /// in bf16 / f16 / E4M3 and v against their smallest values
    /// (`train::survival::Survival`).
    pub fn inspect(&self) -> Promise {
        with_run(self.run.clone(), |mut run| async move {
            let result = inspect(&mut run).await;
            (run, result)
        })
    }
}

/// Which text a page run trains on, kept in its checkpoints.
#[derive(Clone, Serialize, Deserialize)]
struct DataState {
    files: Vec<String>,
    val_fraction: f64,
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        "no text".into()
    } else {
        names.join(", ")
    }
}

async fn save(run: &Run) -> Result<Vec<u8>, JsError> {
    let data = serde_json::to_string(&run.text).map_err(|e| JsError::new(&e.to_string()))?;
    let state = RunState {
        rng: run.rng.0,
        tokenizer_json: Some(run.tokenizer.to_json().map_err(js_error)?),
        data: Some(data),
    };
    checkpoint::save(&run.trainer, &state)
        .await
        .map_err(js_error)
}

async fn export_hf(run: &Run) -> Result<JsValue, JsError> {
    let t = &run.trainer;
    let weights = t.model.read_weights(&t.gpu).await.map_err(js_error)?;
    let model = HfModel {
        config: t.config.model.clone(),
        weights,
        tokenizer_json: Some(run.tokenizer.to_json().map_err(js_error)?),
    };
    let files = model.export().map_err(js_error)?;
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
struct GenerateOptions {
    temperature: f32,
    top_k: u32,
    length: u32,
    #[serde(default = "defaults::seed")]
    seed: u64,
}

#[derive(Serialize)]
struct Generated {
    text: String,
    tokens: usize,
}

async fn generate(
    run: &Run,
    prompt: &str,
    opts: &GenerateOptions,
    on_token: &js_sys::Function,
) -> Result<JsValue, JsError> {
    let t = &run.trainer;
    let max_seq = t.config.model.max_seq;
    let length = opts.length.clamp(1, max_seq);
    let mut ids = run.tokenizer.encode(prompt).map_err(js_error)?;
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
        .generate(&t.gpu, &t.k, &t.model, &[&ids], &g, |tokens| {
            new.extend_from_slice(tokens);
            // decode the whole continuation: a token may end a multi-byte character
            let now = match run.tokenizer.decode(&new) {
                Ok(now) => now,
                Err(e) => {
                    failed = Some(e);
                    return ControlFlow::Break(());
                }
            };
            let piece = now.strip_prefix(text.as_str()).unwrap_or(&now).to_string();
            text = now;
            match on_token.call2(
                &JsValue::NULL,
                &JsValue::from_str(&piece),
                &JsValue::from_str(&text),
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

/// Keeps the batch stream apart from the weight initialisation's.
const BATCH_SEED: u64 = 0x5eed_da7a;

#[derive(Serialize)]
struct TensorStats {
    name: String,
    shape: [u32; 2],
    rms: f64,
    max_abs: f64,
    update_ratio: Option<f64>,
    nonfinite: u64,
    /// What this inspection's step would have lost in narrower formats.
    survival: Survival,
}

#[derive(Serialize)]
struct Inspection {
    step: u32,
    tensors: Vec<TensorStats>,
    memory: Memory,
    steps: Vec<train::StepStats>,
    kernels: Option<Vec<train::KernelTime>>,
    kernels_error: Option<String>,
    softmax: Vec<train::softmax_tail::SoftmaxTail>,
}

async fn inspect(run: &mut Run) -> Result<JsValue, JsError> {
    let batch = run.batch();
    // after every step submitted so far: the weights the inspected step starts from
    let before = run
        .trainer
        .model
        .read_weights(&run.trainer.gpu)
        .await
        .map_err(js_error)?;
    let (steps, kernels, kernels_error) = match run.trainer.profiled_step(&batch).await {
        Ok((steps, kernels)) => (steps, Some(kernels), None),
        Err(crate::Error::Unsupported(why)) => {
            // no timestamps: an unprofiled step, so the survival report still has one
            let mut steps = run.trainer.step(&batch).await.map_err(js_error)?;
            steps.extend(run.trainer.flush().await.map_err(js_error)?);
            (steps, None, Some(why))
        }
        Err(e) => return Err(js_error(e)),
    };
    let t = &run.trainer;
    let step = t.steps();
    let w = t.model.read_weights(&t.gpu).await.map_err(js_error)?;
    let HostState::Fp32 { v, .. } = t
        .adam
        .read_state(&t.gpu)
        .await
        .map_err(js_error)?
        .convert(OptimState::Fp32)
    else {
        return Err(JsError::new(
            "inspect: the optimizer state did not convert to f32",
        ));
    };
    let survival = survival::inspect(&t.model.layout, &before, &w, &v);
    let tensors = t
        .model
        .layout
        .tensors
        .iter()
        .zip(survival)
        .map(|(tensor, survival)| {
            let r = tensor.offset as usize..(tensor.offset + tensor.len()) as usize;
            let values = &w[r.clone()];
            let finite = values.iter().filter(|x| x.is_finite());
            let sum_sq: f64 = finite.clone().map(|&x| (x as f64) * (x as f64)).sum();
            let max_abs = finite.fold(0.0f64, |m, &x| m.max(x.abs() as f64));
            let update_ratio =
                run.inspected
                    .as_ref()
                    .filter(|(at, _)| *at < step)
                    .map(|(at, old)| {
                        let old = &old[r];
                        let delta: f64 = values
                            .iter()
                            .zip(old)
                            .map(|(&a, &b)| ((a - b) as f64).powi(2))
                            .sum();
                        let norm: f64 = old.iter().map(|&x| (x as f64) * (x as f64)).sum();
                        (delta / norm.max(f64::MIN_POSITIVE)).sqrt() / (step - at) as f64
                    });
            TensorStats {
                name: tensor.name.clone(),
                shape: [tensor.rows, tensor.cols],
                rms: (sum_sq / values.len() as f64).sqrt(),
                max_abs,
                update_ratio,
                nonfinite: values.iter().filter(|x| !x.is_finite()).count() as u64,
                survival,
            }
        })
        .collect();
    let inspection = Inspection {
        step,
        tensors,
        memory: t.memory().map_err(js_error)?,
        steps,
        kernels,
        kernels_error,
        softmax: train::softmax_tail::read(&t.gpu, &t.model)
            .await
            .map_err(js_error)?,
    };
    run.inspected = Some((step, w));
    to_js(&inspection)
}
