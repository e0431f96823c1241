//! The JavaScript API (wasm32 only). Every export is async and turns errors
//! into rejected promises with the error's text; nothing here panics.

use wasm_bindgen::prelude::*;

use crate::gpu::{Gpu, GpuOptions};

#[wasm_bindgen(start)]
fn start() {
    console_error_panic_hook::set_once();
}

/// The adapter report (see `AdapterReport`) as a plain object. Rejects with
/// a readable message where WebGPU or an adapter is missing.
#[wasm_bindgen(js_name = adapterInfo)]
pub async fn adapter_info() -> Result<JsValue, JsError> {
    let gpu = Gpu::new(&GpuOptions::default()).await.map_err(|e| JsError::new(&e.to_string()))?;
    to_js(&gpu.report())
}

fn to_js<T: serde::Serialize>(value: &T) -> Result<JsValue, JsError> {
    value
        .serialize(&serde_wasm_bindgen::Serializer::json_compatible())
        .map_err(|e| JsError::new(&e.to_string()))
}
