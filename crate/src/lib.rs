//! webtrain: train a Llama-style language model from scratch on WebGPU.
//!
//! Layout: `gpu` (device, buffers, pipelines, dispatches), `shaders` (the
//! WGSL registry and the f16 storage modes), `kernels` (one launcher module
//! per shader file), `reference` (CPU twins of every kernel), `web` (the
//! wasm-bindgen API, wasm32 only).

pub mod checkpoint;
pub mod data;
pub mod error;
pub mod gpu;
pub mod hf;
pub mod kernels;
pub mod model;
pub mod optim;
pub mod reference;
pub mod shaders;
pub mod train;

#[cfg(target_arch = "wasm32")]
pub mod web;

pub use error::{Error, Result};
pub use gpu::{Gpu, GpuOptions};
pub use shaders::F16Storage;
