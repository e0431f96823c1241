//! Where the device comes from in each harness.

use webtrain::Gpu;

/// One device per test process, shared by every native test (tests run in
/// parallel threads; wgpu devices are thread-safe natively).
#[cfg(not(target_arch = "wasm32"))]
pub fn native_gpu(storage: webtrain::F16Storage) -> Gpu {
    use std::sync::OnceLock;
    static GPU: OnceLock<Result<Gpu, String>> = OnceLock::new();
    let shared = GPU.get_or_init(|| {
        pollster::block_on(Gpu::new(&webtrain::GpuOptions::from_env())).map_err(|e| e.to_string())
    });
    match shared {
        Ok(gpu) => gpu
            .with_f16_storage(storage)
            .unwrap_or_else(|e| panic!("{e}")),
        Err(e) => panic!("no native GPU for the tests: {e}"),
    }
}

#[cfg(not(target_arch = "wasm32"))]
pub fn block_on_checked(name: &str, body: impl std::future::Future<Output = webtrain::Result<()>>) {
    if let Err(e) = pollster::block_on(body) {
        panic!("{name}: {e}");
    }
}

/// One device per page: the browser harness runs tests one after another.
#[cfg(target_arch = "wasm32")]
pub async fn browser_gpu() -> Gpu {
    thread_local! {
        static GPU: std::cell::RefCell<Option<Gpu>> = const { std::cell::RefCell::new(None) };
    }
    if let Some(gpu) = GPU.with(|g| g.borrow().clone()) {
        return gpu;
    }
    let gpu = Gpu::new(&webtrain::GpuOptions::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    web_sys::console::log_1(
        &format!(
            "adapter {:?}, {} f16 storage",
            gpu.info.name,
            gpu.f16_storage()
        )
        .into(),
    );
    GPU.with(|g| *g.borrow_mut() = Some(gpu.clone()));
    gpu
}
