//! Test bodies shared by the native harness (`cargo test`, lavapipe in CI)
//! and the browser harness (`wasm-pack test --chrome`, SwiftShader in CI).
//! A body is `async fn(&Gpu) -> webtrain::Result<()>` and panics on a wrong
//! number; `gpu_tests!` turns one list of bodies into tests for both.

#![allow(dead_code)] // each harness uses its own half of the helpers

pub mod activation;
pub mod attention;
pub mod cast;
pub mod check;
pub mod checkpoint;
pub mod decode;
pub mod embedding;
pub mod formats;
pub mod harness;
pub mod histogram;
pub mod infrastructure;
pub mod linear;
pub mod loss;
pub mod model;
pub mod muon;
pub mod norm;
pub mod optimizer;
pub mod parity;
pub mod pipelines;
pub mod quartet;
pub mod rope;
pub mod sf16;
pub mod training;
pub mod units;

/// Three lists of bodies, three sets of tests: native f16 storage and
/// packed f16 storage natively, the first two lists; the browser's own
/// mode (packed on SwiftShader), the first. `native_only` holds whole runs
/// — training steps in a mode, checkpoint resume, mode switches,
/// generation — whose kernels the first list proves in the browser (every
/// kernel against its twin, the whole model's forward and backward in fp32
/// and f16, PyTorch parity, 20 fp32 steps tracking the reference) and
/// which the e2e tier drives in the page: SwiftShader compiles and steps
/// slowly, and CI's machine runs it 2.3-3.5x slower still.
/// `f16_storage_only` holds bodies whose kernels read `array<f16>` in
/// every storage mode (the matrix units' operands): they run once, under
/// native f16 storage (an adapter without shader-f16 fails them there),
/// and are reported ignored, with the reason, in the other two sets.
#[macro_export]
macro_rules! gpu_tests {
    (
        everywhere: [$($module:ident :: $name:ident),* $(,)?],
        native_only: [$($n_module:ident :: $n_name:ident),* $(,)?],
        f16_storage_only: [$($h_module:ident :: $h_name:ident),* $(,)?] $(,)?
    ) => {
        #[cfg(not(target_arch = "wasm32"))]
        mod native_f16 {
            $(#[test] fn $name() {
                let gpu = $crate::common::harness::native_gpu(webtrain::F16Storage::Native);
                $crate::common::harness::block_on_checked(stringify!($name), $crate::common::$module::$name(&gpu));
            })*
            $(#[test] fn $n_name() {
                let gpu = $crate::common::harness::native_gpu(webtrain::F16Storage::Native);
                $crate::common::harness::block_on_checked(stringify!($n_name), $crate::common::$n_module::$n_name(&gpu));
            })*
            $(#[test] fn $h_name() {
                let gpu = $crate::common::harness::native_gpu(webtrain::F16Storage::Native);
                $crate::common::harness::block_on_checked(stringify!($h_name), $crate::common::$h_module::$h_name(&gpu));
            })*
        }
        #[cfg(not(target_arch = "wasm32"))]
        mod packed_f16 {
            $(#[test] fn $name() {
                let gpu = $crate::common::harness::native_gpu(webtrain::F16Storage::Packed);
                $crate::common::harness::block_on_checked(stringify!($name), $crate::common::$module::$name(&gpu));
            })*
            $(#[test] fn $n_name() {
                let gpu = $crate::common::harness::native_gpu(webtrain::F16Storage::Packed);
                $crate::common::harness::block_on_checked(stringify!($n_name), $crate::common::$n_module::$n_name(&gpu));
            })*
            $(#[test] #[ignore = "reads array<f16> in either storage mode: runs under native_f16"]
            fn $h_name() {})*
        }
        #[cfg(target_arch = "wasm32")]
        mod browser {
            $(#[wasm_bindgen_test::wasm_bindgen_test] async fn $name() {
                let gpu = $crate::common::harness::browser_gpu().await;
                if let Err(e) = $crate::common::$module::$name(&gpu).await {
                    panic!("{} ({} f16 storage): {e}", stringify!($name), gpu.f16_storage());
                }
            })*
            $(#[wasm_bindgen_test::wasm_bindgen_test]
            #[ignore = "reads array<f16>: SwiftShader has no shader-f16; runs natively under native_f16"]
            async fn $h_name() {})*
        }
    };
}
