//! The JavaScript API (wasm32 only), used by the worker (www/worker*.js).
//! Every export returns a promise or a `Result`, so a failure reaches
//! JavaScript as a rejected promise or a thrown `Error` with the error's
//! text; nothing here panics. Calls on one `WorkerRun` (JS `Trainer`) run one at a time: a
//! call made while another is running is refused as busy (the worker
//! queues them).

mod data;
mod events;
mod recipes;
mod setup;
mod views;
mod worker_run;

use std::cell::RefCell;

use wasm_bindgen::prelude::*;

use crate::gpu::{Gpu, GpuOptions, UnitsRequest};
use crate::run::Devices;

pub use data::Data;
pub use worker_run::WorkerRun;

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
    let gpu = Gpu::new(&page_options()).await?;
    GPU.with(|g| *g.borrow_mut() = Some(gpu.clone()));
    Ok(gpu)
}

/// The page's device: its matrix units where the browser gave the worker
/// subgroup matrices (only a person who turned on Chrome's unsafe WebGPU
/// gets them).
fn page_options() -> GpuOptions {
    GpuOptions {
        matrix_units: UnitsRequest::Auto,
        ..GpuOptions::default()
    }
}

/// The worker's devices for a session: a lost one is replaced by a new
/// device, given its GEMM choices, which becomes the worker's device.
pub(super) struct PageDevices;

impl Devices for PageDevices {
    async fn replace(&self, lost: &Gpu) -> crate::Result<Gpu> {
        let options = GpuOptions {
            kernel_config: Some(lost.kernel_config()),
            ..page_options()
        };
        let gpu = Gpu::new(&options).await?;
        GPU.with(|g| *g.borrow_mut() = Some(gpu.clone()));
        Ok(gpu)
    }

    async fn sleep(&self, ms: u32) {
        // a worker's global setTimeout; without one, no wait
        let wait = js_sys::Promise::new(&mut |resolve, _| {
            let set_timeout = js_sys::Reflect::get(&js_sys::global(), &"setTimeout".into())
                .ok()
                .and_then(|f| f.dyn_into::<js_sys::Function>().ok());
            let _ = match set_timeout {
                Some(f) => f.call2(&JsValue::NULL, &resolve, &ms.into()),
                None => resolve.call0(&JsValue::NULL),
            };
        });
        let _ = wasm_bindgen_futures::JsFuture::from(wait).await;
    }
}

/// The adapter report (see `AdapterReport`) as a plain object. Rejects with
/// a readable message where WebGPU or an adapter is missing.
#[wasm_bindgen(js_name = adapterInfo)]
pub async fn adapter_info() -> Result<JsValue, JsError> {
    to_js(&gpu().await.map_err(js_error)?.report())
}

/// The GEMM variants chosen on this device (`KernelConfig`), as JSON: the
/// worker keeps it in origin-private storage so the next page load need not
/// time them again.
#[wasm_bindgen(js_name = kernelConfig)]
pub async fn kernel_config() -> Result<String, JsError> {
    Ok(gpu().await.map_err(js_error)?.kernel_config().to_json())
}

/// Gives the device a kernel config saved earlier (`pinned`: the user's,
/// used as it is; else a cache that the tuner checks and extends).
#[wasm_bindgen(js_name = setKernelConfig)]
pub async fn set_kernel_config(json: String, pinned: bool) -> Result<(), JsError> {
    let config = if pinned {
        crate::gpu::KernelConfig::pinned_from_json(&json).map_err(js_error)?
    } else {
        let mut c: crate::gpu::KernelConfig = serde_json::from_str(&json)
            .map_err(|e| JsError::new(&format!("kernel config: {e}")))?;
        c.pinned = false;
        c
    };
    let gpu = gpu().await.map_err(js_error)?;
    *gpu.kernels.lock().unwrap_or_else(|p| p.into_inner()) = config;
    Ok(())
}

/// The f16 GEMMs on matrix units in Dawn's syntax for subgroups of
/// `subgroup` invocations and attention's forward on them, as [{name,
/// entry, source, invocations, workgroup_bytes}]: every variant the page
/// could compile where Chrome offers subgroup matrices, for the check that
/// Tint accepts them (tests/e2e/dawn.test.mjs).
#[wasm_bindgen(js_name = matrixUnitKernels)]
pub fn matrix_unit_kernels(subgroup: u32) -> Result<JsValue, JsError> {
    let kernels = crate::kernels::units::dawn_sources(subgroup).map_err(js_error)?;
    to_js(&kernels)
}

fn to_js<T: serde::Serialize + ?Sized>(value: &T) -> Result<JsValue, JsError> {
    value
        .serialize(&serde_wasm_bindgen::Serializer::json_compatible())
        .map_err(|e| JsError::new(&e.to_string()))
}

fn from_js<T: serde::de::DeserializeOwned>(value: JsValue) -> Result<T, JsError> {
    serde_wasm_bindgen::from_value(value)
        .map_err(|e| JsError::new(&format!("bad settings: {}", de_message(e))))
}

/// A deserializing error's own words (its `Display` is the JS Error's
/// `String()`, which puts "Error: " before them).
fn de_message(e: serde_wasm_bindgen::Error) -> String {
    let value = JsValue::from(e);
    match value.dyn_ref::<js_sys::Error>() {
        Some(error) => error.message().into(),
        None => format!("{value:?}"),
    }
}

fn js_error(e: crate::Error) -> JsError {
    JsError::new(&e.to_string())
}
