//! `WorkerRun` (JavaScript's `Trainer`): the page's adapter over one
//! `run::Session` in the worker — the calls the page makes on it, in its
//! words (camelCase, JS errors). Every run is opened by `run::open`; every
//! call that fails on a lost device has the session rebuild the run.

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::Promise;
use serde::Serialize;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::future_to_promise;

use super::PageDevices;
use super::events::{events_to_js, failure_to_js, session_error};
use super::recipes::recipe_from_js;
use super::views::{GenerateOptions, export_hf, generate, look, measure_ranges, tokenizer};
use super::{Data, from_js, gpu, js_error, to_js};
use crate::checkpoint::Checkpoint;
use crate::data::tasks::TaskSpec;
use crate::hf::{self, HfFiles, HfModel};
use crate::inspect::Inspector;
use crate::optim::OptimState;
use crate::run::{
    self, Batches, Cadence, Changes, DataState, Drive, Event, Opening, Origin, RunSpec, Session,
    Source, TextIn, VALIDATION_BATCHES,
};
use crate::train::{Memory, TrainConfig};

/// A Uint8Array's length in bytes, exactly: `length()` is a u32, which
/// JavaScript's arrays of 4 GiB and more wrap around.
fn js_length(bytes: &js_sys::Uint8Array) -> u64 {
    js_sys::Reflect::get(bytes, &JsValue::from_str("byteLength"))
        .ok()
        .and_then(|n| n.as_f64())
        .map_or(u64::MAX, |n| n as u64)
}

/// The page's session: its run, its loop and what the page's inspector
/// remembers of it.
pub(super) type PageSession = Session<PageDevices>;

/// The worker's run (not `train::Trainer`, which it holds deep inside).
#[wasm_bindgen(js_name = Trainer)]
pub struct WorkerRun {
    /// Taken out while a call runs: a second call meanwhile is refused as busy.
    session: Rc<RefCell<Option<PageSession>>>,
    /// The drive under way (`start`) and its cadence; taken out while a
    /// call of it runs.
    drive: Rc<RefCell<Option<(Drive, Cadence)>>>,
}

/// Runs `f` on the session, then puts it back (also when `f` fails). A
/// failure on a lost device has the session rebuild the run first
/// (`failure_to_js`: the error says so, or that the run is gone).
fn with_session<T, E, F>(
    cell: Rc<RefCell<Option<PageSession>>>,
    f: impl FnOnce(PageSession) -> F + 'static,
) -> Promise
where
    F: std::future::Future<Output = (PageSession, Result<T, E>)> + 'static,
    T: Into<JsValue>,
    E: Into<JsValue>,
{
    future_to_promise(async move {
        let session = cell
            .borrow_mut()
            .take()
            .ok_or_else(|| JsError::new("the trainer is busy with another call"))?;
        let (mut session, result) = f(session).await;
        let result = match result {
            Ok(value) => Ok(value.into()),
            Err(e) => Err(failure_to_js(&mut session, e.into()).await),
        };
        *cell.borrow_mut() = Some(session);
        result
    })
}

impl WorkerRun {
    /// The run `opening` describes on the worker's device, as a promise of
    /// a `WorkerRun`.
    fn open(opening: Opening) -> Promise {
        future_to_promise(async move {
            let gpu = gpu().await.map_err(js_error)?;
            let (run, snapshot) = opening
                .on(&gpu, VALIDATION_BATCHES)
                .await
                .map_err(js_error)?;
            let mut session = Session::new(run, Inspector::new(true), PageDevices);
            if let Some(snapshot) = snapshot {
                session = session.starting_from(snapshot);
            }
            let session = Rc::new(RefCell::new(Some(session)));
            let drive = Rc::new(RefCell::new(None));
            Ok(WorkerRun { session, drive }.into())
        })
    }
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
    /// Where the recipe's f16 products run: matrix units, or why not.
    matrix_units: Option<String>,
    tokenizer: super::data::TokenizerInfo<'a>,
    /// The task it trains on, every option written out; null for text.
    task: Option<&'a TaskSpec>,
    /// The first held-out example's prompt, for Generate; null for text.
    task_prompt: Option<String>,
}

#[wasm_bindgen(js_class = Trainer)]
impl WorkerRun {
    /// A new run of `spec` on its task, or else on `data`'s text and
    /// tokenizer (`run::open`).
    pub fn create(spec: JsValue, data: &Data) -> Result<Promise, JsError> {
        let spec: RunSpec = from_js(spec)?;
        let text = match &spec.task {
            Some(_) => TextIn::None,
            None => TextIn::Corpus(data.corpus(), Some(Box::new(data.tokenizer()?.clone()))),
        };
        let opening = run::open(Origin::New(spec), text).map_err(js_error)?;
        Ok(Self::open(opening))
    }

    /// What the run is: `{parameters, memory, train_tokens, …, config}`.
    pub fn info(&self) -> Result<JsValue, JsError> {
        let cell = self.session.borrow();
        let page = cell
            .as_ref()
            .ok_or_else(|| JsError::new("the trainer is busy with another call"))?;
        let (run, tokenizer) = (&page.run, tokenizer(&page.run)?);
        let (t, data) = (&run.trainer, &run.text.data);
        to_js(&Created {
            step: t.steps(),
            parameters: t.model.layout.parameters(),
            memory: t.memory().map_err(js_error)?,
            train_tokens: data.train_tokens(),
            validation_tokens: data.validation_tokens(),
            validation_batches: run.validation.len(),
            config: &t.config,
            optimizer_dispatches: t.optimizer_dispatches(),
            matrix_units: t.k.matrix_units_report(&t.gpu),
            tokenizer: super::data::TokenizerInfo {
                vocab_size: tokenizer.vocab_size(),
                fingerprint: tokenizer.fingerprint(),
                tokens: data.train_tokens() + data.validation_tokens(),
            },
            task: run.text.state.task.as_ref(),
            task_prompt: match data {
                Batches::Task(set) => set.held_out().first().map(|e| set.task.text(&e.prompt)),
                Batches::Stream(_) => None,
            },
        })
    }

    /// Trains up to `n` steps with what falls due at them (`cadence`:
    /// `{validateEvery, saveEvery, measureEvery, end}`, `run::Cadence`):
    /// resolves with `{events, step}`, the session's events (`run::Event`,
    /// tagged by `event`; steps complete two late) and the steps submitted.
    /// A device lost meanwhile is replaced (a `lost` event); where the run
    /// cannot go on, rejects with `gone` set (`session_error`).
    pub fn advance(&self, n: u32, cadence: JsValue) -> Promise {
        let cadence: Result<Cadence, JsError> = from_js(cadence);
        with_session(self.session.clone(), move |mut page| async move {
            let result = match cadence {
                Ok(cadence) => page.advance(n, &cadence).await.map_err(session_error),
                Err(e) => Err(e.into()),
            };
            let result = result.and_then(|events| {
                let answer = js_sys::Object::new();
                let events = events_to_js(events)?;
                js_sys::Reflect::set(&answer, &"events".into(), &events)?;
                js_sys::Reflect::set(&answer, &"step".into(), &page.run.trainer.steps().into())?;
                Ok::<_, JsValue>(JsValue::from(answer))
            });
            (page, result)
        })
    }

    /// Starts a drive (`run::Drive`): the run trains to its end (the
    /// schedule's, where it is before it; else until paused) in calls of
    /// `drive`, with what falls due at each step (`cadence`, `run::Cadence`).
    pub fn start(&self, cadence: JsValue) -> Result<(), JsError> {
        let cadence: Cadence = from_js(cadence)?;
        let cell = self.session.borrow();
        let page = cell
            .as_ref()
            .ok_or_else(|| JsError::new("the trainer is busy with another call"))?;
        *self.drive.borrow_mut() = Some((Drive::new(page, &cadence), cadence));
        Ok(())
    }

    /// The drive's cadence from its next call on (a panel's input changed
    /// while it trains; its end stays the drive's); nothing without a drive.
    pub fn set_cadence(&self, cadence: JsValue) -> Result<(), JsError> {
        let cadence: Cadence = from_js(cadence)?;
        if let Some((_, current)) = self.drive.borrow_mut().as_mut() {
            *current = Cadence {
                end: current.end,
                save_at_end: current.save_at_end,
                ..cadence
            };
        }
        Ok(())
    }

    /// The drive's next call: about a third of a second of steps. Resolves
    /// with `{events, step, ended}`: the session's events (as `advance`),
    /// the steps submitted, and whether the run reached the drive's end
    /// (or no drive was started), after which `pause` collects the rest.
    pub fn drive(&self) -> Promise {
        let drive = self.drive.clone();
        with_session(self.session.clone(), move |mut page| async move {
            let Some((mut d, cadence)) = drive.borrow_mut().take() else {
                let answer = driven(&page, vec![], true);
                return (page, answer);
            };
            let result = match d.call(&mut page, &cadence).await {
                Ok(events) => {
                    let ended = d.ended(&page);
                    if !ended {
                        *drive.borrow_mut() = Some((d, cadence));
                    }
                    driven(&page, events, ended)
                }
                Err(e) => Err(session_error(e)),
            };
            (page, result)
        })
    }

    /// A pause: the drive stopped, every submitted step collected, and a
    /// validation unless the run was validated at this step; resolves
    /// with the events.
    pub fn pause(&self) -> Promise {
        self.drive.borrow_mut().take();
        with_session(self.session.clone(), |mut page| async move {
            let events = page.pause().await.map_err(js_error);
            (page, events.and_then(events_to_js))
        })
    }

    /// Waits for every submitted step (`Session::flush`); resolves with
    /// their stats.
    pub fn flush(&self) -> Promise {
        with_session(self.session.clone(), |mut page| async move {
            let result = page.flush().await.map_err(js_error);
            (page, result.and_then(|events| to_js(&stats_of(events))))
        })
    }

    /// `{loss, accuracy, char_accuracy, examples: [{prompt, answer,
    /// predicted}]}` on the held-out batches at the current weights: the
    /// accuracies and examples for a task (`run::Validation`), else null and [].
    pub fn validate(&self) -> Promise {
        with_session(self.session.clone(), |mut page| async move {
            let result = match page.validate().await {
                Ok(Event::Validated { validation, .. }) => to_js(&validation),
                Ok(_) => Err(JsError::new("a validation that validated nothing")),
                Err(e) => Err(js_error(e)),
            };
            (page, result)
        })
    }

    /// Switches the precision recipe (a named recipe's name, or a
    /// recipe's parts) and the optimizer state (at a pause): the weights
    /// are kept, the moments converted, the steps go on. Resolves with the
    /// stats of the steps that were still in flight.
    pub fn reconfigure(&self, precision: JsValue, optim_state: String) -> Promise {
        let recipe = recipe_from_js(precision);
        with_session(self.session.clone(), move |mut page| async move {
            let state = OptimState::parse(&optim_state).map_err(js_error);
            let (precision, state) = match recipe.and_then(|r| Ok((r, state?))) {
                Ok(m) => m,
                Err(e) => return (page, Err(e)),
            };
            let result = page.reconfigure(precision, state).await.map_err(js_error);
            (page, result.and_then(|events| to_js(&stats_of(events))))
        })
    }

    /// Continues `prompt` with up to `opts.length` tokens sampled with
    /// `opts.temperature` (0: greedy) and `opts.topK` (0: all) from
    /// `opts.seed`, through the KV-cache decoder; `on_token(token, text,
    /// prob)` receives each token's text, the text so far and the model's
    /// probability of the token. Resolves with
    /// `{text, tokens}`. A prompt longer than the model's context keeps its end.
    pub fn generate(&self, prompt: String, opts: JsValue, on_token: js_sys::Function) -> Promise {
        let opts: Result<GenerateOptions, JsError> = from_js(opts);
        with_session(self.session.clone(), move |page| async move {
            let result = match opts {
                Ok(opts) => generate(&page.run, &prompt, &opts, &on_token).await,
                Err(e) => Err(e),
            };
            (page, result)
        })
    }

    /// The run as a `.safetensors` checkpoint (weights, optimizer state,
    /// step, batch RNG, config, tokenizer, and which text it trains on).
    pub fn save(&self) -> Promise {
        with_session(self.session.clone(), |page| async move {
            let result = page
                .run
                .save()
                .await
                .map(|bytes| js_sys::Uint8Array::from(&bytes[..]))
                .map_err(js_error);
            (page, result)
        })
    }

    /// The run's snapshot in memory, `{step, bytes: Uint8Array}`, or
    /// undefined: what a reload can restore when no new device comes.
    pub fn snapshot(&self) -> Result<JsValue, JsError> {
        let cell = self.session.borrow();
        let page = cell
            .as_ref()
            .ok_or_else(|| JsError::new("the trainer is busy with another call"))?;
        let Some(snapshot) = page.snapshot() else {
            return Ok(JsValue::UNDEFINED);
        };
        let value = js_sys::Object::new();
        let bytes = js_sys::Uint8Array::from(&snapshot.bytes[..]);
        js_sys::Reflect::set(&value, &"step".into(), &snapshot.step.into())
            .and_then(|_| js_sys::Reflect::set(&value, &"bytes".into(), &bytes))
            .map_err(|_| JsError::new("the snapshot could not be handed over"))?;
        Ok(value.into())
    }

    /// The model as a Hugging Face `LlamaForCausalLM` folder, after every
    /// step submitted so far: `{file name: Uint8Array}` with config.json,
    /// model.safetensors (f32), generation_config.json and tokenizer.json.
    #[wasm_bindgen(js_name = exportHf)]
    pub fn export_hf(&self) -> Promise {
        with_session(self.session.clone(), |page| async move {
            let result = export_hf(&page.run).await;
            (page, result)
        })
    }

    /// Continues the run of a checkpoint — saved by the page or by `webtrain
    /// train` — on `data`'s text, which must be the text it trained on (its
    /// tokens are checked). The run reads with the checkpoint's tokenizer
    /// (`tokenizerJson`, for the page's Data once the run is made).
    ///
    /// `bytes` is a Uint8Array, copied into the module only once its size
    /// is checked (`Checkpoint::check_page_size`): a slice argument would be
    /// copied by wasm-bindgen first, and a copy wasm32 cannot hold aborts the
    /// module.
    pub fn load(bytes: &js_sys::Uint8Array, data: &Data) -> Result<Promise, JsError> {
        Checkpoint::check_page_size(js_length(bytes)).map_err(js_error)?;
        let bytes = bytes.to_vec();
        let c = Checkpoint::from_bytes(&bytes).map_err(js_error)?;
        if DataState::parse(c.run.data.as_deref())
            .map_err(js_error)?
            .source
            == Source::Synthetic
        {
            return Err(JsError::new(
                "this run trained on webtrain's synthetic tokens, not text: go on with it in the CLI (webtrain train --resume)",
            ));
        }
        let text = TextIn::Corpus(data.corpus(), None);
        let opening = run::open(Origin::Resume(c, bytes), text).map_err(|e| match e {
            crate::Error::DataMismatch { trained_on, given } => JsError::new(&format!(
                "this checkpoint's run trained on {trained_on}, but the text loaded is {given}: load those files under Text, then the checkpoint again"
            )),
            e => js_error(e),
        })?;
        Ok(Self::open(opening))
    }

    /// The run's tokenizer.json: what the page's Data reads with once a
    /// loaded or imported run is made.
    #[wasm_bindgen(js_name = tokenizerJson)]
    pub fn tokenizer_json(&self) -> Result<String, JsError> {
        let cell = self.session.borrow();
        let page = cell
            .as_ref()
            .ok_or_else(|| JsError::new("the trainer is busy with another call"))?;
        tokenizer(&page.run)?.to_json().map_err(js_error)
    }

    /// A new run from a Hugging Face Llama folder, to fine-tune or to
    /// evaluate on `data`'s text: `files` is `{file name: Uint8Array}`
    /// (config.json, model.safetensors or its index and shards,
    /// tokenizer.json, …), checked as `webtrain train --from-hf` checks a
    /// folder. The model, its weights and its tokenizer are the folder's;
    /// the settings an imported model's (`RunSpec::fine_tune`) with
    /// `changes` (`run::Changes`: what the person changed in the form), as
    /// in the CLI (`tokenizerJson` gives the page's Data the folder's
    /// tokenizer once the run is made).
    #[wasm_bindgen(js_name = importHf)]
    pub fn import_hf(
        files: &js_sys::Object,
        changes: JsValue,
        data: &Data,
    ) -> Result<Promise, JsError> {
        // every file's size checked before any is copied into the module
        let sizes: Vec<(String, u64)> = js_sys::Object::entries(files)
            .iter()
            .filter_map(|entry| {
                let entry = entry.dyn_into::<js_sys::Array>().ok()?;
                let bytes = entry.get(1).dyn_into::<js_sys::Uint8Array>().ok()?;
                Some((entry.get(0).as_string()?, js_length(&bytes)))
            })
            .collect();
        hf::Limits::PAGE
            .check_files(sizes.iter().map(|(name, bytes)| (name.as_str(), *bytes)))
            .map_err(js_error)?;
        let get = |name: &str| -> crate::Result<Option<Vec<u8>>> {
            let value = js_sys::Reflect::get(files, &JsValue::from_str(name)).unwrap_or_default();
            Ok(value
                .dyn_ref::<js_sys::Uint8Array>()
                .map(js_sys::Uint8Array::to_vec))
        };
        let model = HfFiles::read(get)
            .and_then(|f| HfModel::import(&f))
            .map_err(js_error)?;
        let changes: Changes = from_js(changes)?;
        let text = TextIn::Corpus(data.corpus(), None);
        let opening = run::open(Origin::HuggingFace(model, changes), text).map_err(js_error)?;
        Ok(Self::open(opening))
    }

    /// `{step, precision, tokens, ids, heads, truncated, predictions:
    /// [{position, target, target_prob, target_rank, top}], top_tokens, attention:
    /// [Float32Array [heads, T, T] per layer]}` for `text` (empty: the
    /// first held-out window), up to 64 tokens. Nothing of the run changes.
    pub fn look(&self, text: String, top_k: u32) -> Promise {
        with_session(self.session.clone(), move |page| async move {
            let result = look(&page.run, &text, top_k as usize).await;
            (page, result)
        })
    }

    /// Every tensor's value range (`inspect::ranges`) for a forward and
    /// backward on the first held-out batch, without the update:
    /// `{step, ranges: [{tensor, kind, layer, count, zeros, infinite, nan,
    /// rms, binades: [[e, count]], outside: [{format, overflow, underflow,
    /// subnormal}]}], formats: [{name, smallest, normal, largest}] (binades),
    /// steps}`: `steps` are the stats of the steps in flight, which it waits for.
    pub fn ranges(&self) -> Promise {
        with_session(self.session.clone(), |mut page| async move {
            let result = match page.run.validation.first().cloned() {
                None => Err(JsError::new(
                    "this run holds no text out of training to measure on",
                )),
                Some(batch) => match page.flush().await {
                    Ok(events) => {
                        let steps = stats_of(events);
                        measure_ranges(&mut page.run.trainer, &batch, steps).await
                    }
                    Err(e) => Err(js_error(e)),
                },
            };
            (page, result)
        })
    }

    /// `{step, tensors: [{name, shape, rms, max_abs, update_ratio, nonfinite,
    /// survival}], memory, kernels: [{kernel, dispatches, ms}] | null,
    /// kernels_error}`. One training step runs (it counts), profiled where
    /// the adapter has timestamps; `update_ratio` is ‖Δw‖/‖w‖ per step since
    /// the previous inspection; `survival` is that step's update survival
    /// in bf16 / f16 / E4M3 and v against their smallest values
    /// (`inspect::Inspection`).
    pub fn inspect(&self) -> Promise {
        with_session(self.session.clone(), |mut page| async move {
            let result = page
                .inspector
                .step(&mut page.run, true)
                .await
                .map_err(js_error)
                .and_then(|i| to_js(&i));
            (page, result)
        })
    }
}

/// The stats of the steps among `events`.
fn stats_of(events: Vec<Event>) -> Vec<crate::train::StepStats> {
    events
        .into_iter()
        .filter_map(|e| match e {
            Event::Stepped(stats) => Some(stats),
            _ => None,
        })
        .collect()
}

/// A drive call's answer: `{events, step, ended}`.
fn driven(page: &PageSession, events: Vec<Event>, ended: bool) -> Result<JsValue, JsValue> {
    let answer = js_sys::Object::new();
    let events = events_to_js(events)?;
    let step = page.run.trainer.steps();
    js_sys::Reflect::set(&answer, &"events".into(), &events)?;
    js_sys::Reflect::set(&answer, &"step".into(), &step.into())?;
    js_sys::Reflect::set(&answer, &"ended".into(), &ended.into())?;
    Ok(answer.into())
}
