//! The JavaScript API (wasm32 only), used by www/worker.js. Every export
//! returns a promise or a `Result`, so a failure reaches JavaScript as a
//! rejected promise or a thrown `Error` with the error's text; nothing here
//! panics. Calls on one `Trainer` run one at a time: a call made while
//! another is running is refused as busy (the worker queues them).

mod data;
mod trainer;

use std::cell::RefCell;

use wasm_bindgen::prelude::*;

use crate::gpu::{Gpu, GpuOptions};

pub use data::Data;
pub use trainer::Trainer;

#[wasm_bindgen(start)]
fn start() {
    console_error_panic_hook::set_once();
}

thread_local! {
    /// The worker's one device, made on first use.
    static GPU: RefCell<Option<Gpu>> = const { RefCell::new(None) };
}

/// The worker's device; a lost one is replaced by a fresh device.
async fn gpu() -> crate::Result<Gpu> {
    if let Some(gpu) = GPU
        .with(|g| g.borrow().clone())
        .filter(|g| g.lost_reason().is_none())
    {
        return Ok(gpu);
    }
    let gpu = Gpu::new(&GpuOptions::default()).await?;
    GPU.with(|g| *g.borrow_mut() = Some(gpu.clone()));
    Ok(gpu)
}

/// The adapter report (see `AdapterReport`) as a plain object. Rejects with
/// a readable message where WebGPU or an adapter is missing.
#[wasm_bindgen(js_name = adapterInfo)]
pub async fn adapter_info() -> Result<JsValue, JsError> {
    to_js(&gpu().await.map_err(js_error)?.report())
}

fn to_js<T: serde::Serialize + ?Sized>(value: &T) -> Result<JsValue, JsError> {
    value
        .serialize(&serde_wasm_bindgen::Serializer::json_compatible())
        .map_err(|e| JsError::new(&e.to_string()))
}

fn from_js<T: serde::de::DeserializeOwned>(value: JsValue) -> Result<T, JsError> {
    serde_wasm_bindgen::from_value(value).map_err(|e| JsError::new(&format!("bad settings: {e}")))
}

fn js_error(e: crate::Error) -> JsError {
    JsError::new(&e.to_string())
}
