//! The device side: adapter and device, buffers, pipelines, dispatches.

#[cfg(target_arch = "wasm32")]
mod browser;
mod buffers;
mod context;
pub mod coop;
mod dispatch;
pub mod kernel_config;
mod pipeline;
mod report;
mod timing;

pub use buffers::{Bind, BufferRange, f16_bytes};
pub use context::{BOUNDARY_COUNTERS, Capabilities, Gpu, GpuOptions, UnitsRequest};
pub use dispatch::{Dispatch, Grid, WG, grid_1d, grid_groups};
pub use kernel_config::{GemmPick, KernelConfig};
pub use pipeline::{
    Kernel, KernelDesc, PipelineCache, Slot, build_composed_kernels, build_kernels,
    build_variant_kernels,
};
pub use report::{AdapterReport, FeatureReport, LimitReport};
