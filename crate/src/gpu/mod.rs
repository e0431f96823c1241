//! The device side: adapter and device, buffers, pipelines, dispatches.

#[cfg(target_arch = "wasm32")]
mod browser;
mod buffers;
mod context;
mod dispatch;
mod pipeline;
mod report;
mod timing;

pub use buffers::{f16_bytes, BufferRange};
pub use context::{Capabilities, Gpu, GpuOptions};
pub use dispatch::{grid_1d, grid_groups, Dispatch, Grid, WG};
pub use pipeline::{build_kernels, Kernel, KernelDesc, Slot};
pub use report::{AdapterReport, FeatureReport, LimitReport};
