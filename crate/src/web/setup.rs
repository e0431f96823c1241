//! What a new run starts from, before there is a `Trainer`: a preset's
//! or a task's run, what each setting takes, the tasks offered, and the
//! memory plan of a run in every mode on this adapter.

use serde::Serialize;
use wasm_bindgen::prelude::*;

use super::{from_js, gpu, js_error, to_js};
use crate::data::tasks::TaskSpec;
use crate::model::{ParamLayout, Recipe};
use crate::optim::OptimState;
use crate::run::RunSpec;
use crate::train::{self, Memory};

/// What a new run of `preset` starts from (`run::RunSpec::preset`): the
/// page's form is filled from it.
#[wasm_bindgen(js_name = runDefaults)]
pub fn run_defaults(preset: &str) -> Result<JsValue, JsError> {
    to_js(&RunSpec::preset(preset).map_err(js_error)?)
}

/// Every setting of a new run (`run::settings::SETTINGS`): `[{field, kind,
/// group, min?, max?, choices?, help}]`. The page derives its form's ranges,
/// its address's fields and the settings runs are compared by from it.
#[wasm_bindgen(js_name = runSettings)]
pub fn run_settings() -> Result<JsValue, JsError> {
    to_js(crate::run::settings::SETTINGS)
}

/// The caps the page holds a user's files to (`hf::Limits::PAGE`,
/// `checkpoint::PAGE_MAX_BYTES`): `{modelFiles, jsonFile, checkpoint}` in
/// bytes. www/limits.js spells them again so the page can refuse a file
/// before reading it; the worker checks the two agree when it starts.
#[wasm_bindgen(js_name = pageLimits)]
pub fn page_limits() -> Result<JsValue, JsError> {
    let page = crate::hf::Limits::PAGE;
    to_js(&serde_json::json!({
        "modelFiles": page.files,
        "jsonFile": page.json_file,
        "checkpoint": crate::checkpoint::PAGE_MAX_BYTES,
    }))
}

/// Every task the page offers: `[{name, title, summary, options: [{name,
/// summary, default, min, max}]}]`.
#[wasm_bindgen]
pub fn tasks() -> Result<JsValue, JsError> {
    to_js(&crate::data::tasks::TASKS)
}

/// What a run of task `name` starts from (`run::RunSpec::task`), with
/// `options` (`{name: value}`; undefined: the defaults): the page's form
/// is filled from it.
#[wasm_bindgen(js_name = taskDefaults)]
pub fn task_defaults(name: String, options: JsValue) -> Result<JsValue, JsError> {
    let options = match options.is_undefined() || options.is_null() {
        true => Default::default(),
        false => from_js(options)?,
    };
    to_js(&RunSpec::task(&TaskSpec { name, options }).map_err(js_error)?)
}

/// Memory per recipe × optimizer state for one model on this adapter,
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
    /// A named recipe's name, or a custom recipe's parts.
    precision: Recipe,
    optim_state: &'static str,
    memory: Memory,
}

/// The memory a run of `spec` takes in every named recipe, and in its own
/// where that is a custom one, with each optimizer state; `fits` is false,
/// with the reason, where this adapter cannot bind or allocate it.
#[wasm_bindgen(js_name = planModel)]
pub async fn plan_model(spec: JsValue) -> Result<JsValue, JsError> {
    let spec: RunSpec = from_js(spec)?;
    let c = spec.config().map_err(js_error)?;
    let gpu = gpu().await.map_err(js_error)?;
    let fits = train::check_limits(&c.model, c.shape, &gpu.limits);
    let binding = gpu.limits.max_storage_buffer_binding_size;
    let mut modes = Vec::new();
    let mut recipes = Recipe::all_named();
    if !c.precision.is_named() {
        recipes.push(c.precision.clone());
    }
    for precision in recipes {
        for state in OptimState::ALL {
            let kind = (c.optim.optimizer, state, c.optim.master.storage());
            let memory = match Memory::of(&c.model, c.shape, &precision, kind, binding) {
                Ok(m) => m,
                Err(_) => continue, // reported by `fits`
            };
            modes.push(PlanMode {
                precision: precision.clone(),
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
