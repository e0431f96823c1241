//! webtrain: train a Llama-style language model from scratch on WebGPU.
//! docs/ARCHITECTURE.md draws how these depend on each other.

/// The native checkpoint: one .safetensors file that resumes a run exactly.
pub mod checkpoint;
/// Tokenizer (HF `tokenizers`), corpus checks, token files, batching.
pub mod data;
/// The one error type: every variant names the kernel, limit, file or adapter.
pub mod error;
/// FNV-1a fingerprints of tokenizers, token streams and shader sources.
pub mod fingerprint;
/// What each fuzz target (crate/fuzz) does with its bytes, shared with the corpora's replay.
pub mod fuzzing;
/// Device side: adapter, limits, buffers, pipelines, dispatches, timing.
pub mod gpu;
/// Hugging Face interop: LlamaForCausalLM folders out and in.
pub mod hf;
/// What the inspector shows of a step: tensors, update survival, softmax tails, kernel times.
pub mod inspect;
/// One launcher module per shader file: pipelines, shape checks, dispatches.
pub mod kernels;
/// The model on the GPU: config and presets, parameter layout, activations, schedules, decoding.
pub mod model;
/// What an op computes, shared by its kernel and its CPU twin: shapes, AdamW's tables, format constants.
pub mod ops;
/// AdamW on the host side: settings, LR schedule, state buffers, the optimizer's dispatches.
pub mod optim;
/// CPU twins of every kernel and of the whole model: plain loops, f64 sums.
pub mod reference;
/// The one seeded RNG (SplitMix64), shared by data, weights, sampling and tuning.
pub mod rng;
/// One training run as the page and the CLI drive it: defaults, data state, batches, save and resume.
pub mod run;
/// The WGSL registry, composition and the f16 storage modes.
pub mod shaders;
/// The training loop: one submission per step, stats read back late, memory by kind.
pub mod train;

/// The wasm-bindgen API the page's worker calls (wasm32 only).
#[cfg(target_arch = "wasm32")]
pub mod web;

pub use error::{Error, Result};
pub use gpu::{Gpu, GpuOptions};
pub use shaders::F16Storage;
