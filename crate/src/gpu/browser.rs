//! What only the browser needs: WebGPU detection and the adapter's name.

use wasm_bindgen::{JsCast, JsValue};

use super::coop::MatrixUnits;
use crate::error::{Error, Result};

pub(super) async fn choose_adapter(
    instance: &wgpu::Instance,
    _wanted: Option<&str>,
) -> Result<wgpu::Adapter> {
    if navigator_gpu().is_none() {
        return Err(Error::NoWebGpu);
    }
    instance
        .request_adapter(&wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            ..Default::default()
        })
        .await
        .map_err(|_| Error::NoAdapter {
            wanted: None,
            available: Vec::new(),
            hint: "this browser has WebGPU but offered no adapter: its GPU may be blocklisted (see chrome://gpu); \
                   enable chrome://flags/#enable-unsafe-webgpu, or on Linux start Chrome with \
                   --enable-unsafe-webgpu --enable-features=Vulkan",
        })
}

fn get(object: &JsValue, key: &str) -> Option<JsValue> {
    js_sys::Reflect::get(object, &JsValue::from_str(key))
        .ok()
        .filter(|v| !v.is_undefined() && !v.is_null())
}

/// `navigator.gpu`, in a window or a worker.
fn navigator_gpu() -> Option<JsValue> {
    get(&js_sys::global(), "navigator").and_then(|nav| get(&nav, "gpu"))
}

/// wgpu 30 names a browser adapter by `GPUAdapterInfo.description` alone,
/// which Chrome leaves empty for many adapters (SwiftShader among them);
/// vendor and architecture say what it is.
pub(super) async fn adapter_info(adapter: &wgpu::Adapter) -> wgpu::AdapterInfo {
    let mut info = adapter.get_info();
    if info.name.is_empty() {
        info.name = adapter_info_fields()
            .await
            .unwrap_or_else(|| "unnamed browser adapter".to_string());
    }
    info
}

async fn adapter_info_fields() -> Option<String> {
    let gpu = navigator_gpu()?;
    let request: js_sys::Function = get(&gpu, "requestAdapter")?.dyn_into().ok()?;
    let options = js_sys::Object::new();
    js_sys::Reflect::set(
        &options,
        &"powerPreference".into(),
        &"high-performance".into(),
    )
    .ok()?;
    let promise: js_sys::Promise = request.call1(&gpu, &options).ok()?.dyn_into().ok()?;
    let adapter = wasm_bindgen_futures::JsFuture::from(promise).await.ok()?;
    let info = get(&adapter, "info")?;
    let parts: Vec<String> = ["vendor", "architecture", "device", "description"]
        .iter()
        .filter_map(|k| get(&info, k)?.as_string())
        .filter(|s| !s.is_empty())
        .collect();
    (!parts.is_empty()).then(|| parts.join(" "))
}

/// Dawn's subgroup matrices as the worker's patch of `requestDevice`
/// (www/matrix-units-patch.js) left them in
/// `globalThis.webtrainSubgroupMatrices`: `{edge, subgroup}` where the
/// device has them, else `{unavailable}` saying why.
pub(super) fn subgroup_matrices() -> std::result::Result<MatrixUnits, String> {
    let Some(grant) = get(&js_sys::global(), "webtrainSubgroupMatrices") else {
        return Err("the page requested no subgroup matrices (www/matrix-units-patch.js)".into());
    };
    let number = |key| get(&grant, key).and_then(|v| v.as_f64()).map(|v| v as u32);
    match (number("edge"), number("subgroup")) {
        (Some(edge @ (8 | 16)), Some(subgroup)) if subgroup > 0 => {
            Ok(MatrixUnits::Subgroup { edge, subgroup })
        }
        _ => Err(get(&grant, "unavailable")
            .and_then(|v| v.as_string())
            .unwrap_or_else(|| "the page's subgroup-matrix grant is malformed".into())),
    }
}
