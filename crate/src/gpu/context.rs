//! Adapter choice, device creation and the device's health.
//!
//! The device is requested with the adapter's own limits (not WebGPU's
//! defaults: 128 MiB bindings would cap the model size) and with every
//! feature webtrain can use that the adapter has.

use std::sync::{Arc, Mutex};

use super::KernelConfig;
use super::coop::MatrixUnits;
use super::pipeline::PipelineCache;
use crate::error::{Error, Result};
use crate::shaders::{F16Storage, Numerics};

/// Clamp counters in `Gpu::boundary_counts`: room for every forward
/// boundary (`kernels::boundary::Site`).
pub const BOUNDARY_COUNTERS: u64 = 16;

/// How to pick the adapter and build pipelines.
#[derive(Clone, Debug, Default)]
pub struct GpuOptions {
    /// Pick the first adapter whose name contains this (case-insensitive).
    /// Native only; the browser chooses its own adapter.
    pub adapter: Option<String>,
    /// Build f16 kernels in packed mode even where `shader-f16` exists.
    pub force_packed_f16: bool,
    /// GEMM variants to use (`KernelConfig::pinned_from_json`), or a
    /// config cached earlier (the page's storage); natively, else the
    /// cache file's entry for this adapter.
    pub kernel_config: Option<KernelConfig>,
    /// Whether a recipe's f16 products may run on matrix units.
    pub matrix_units: UnitsRequest,
}

/// Whether to run a recipe's f16 products on matrix units (`MatrixUnits`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UnitsRequest {
    /// The scalar GEMMs everywhere.
    #[default]
    Off,
    /// The adapter's matrix units, where it offers them: natively its
    /// cooperative matrices (the device then enables wgpu's experimental
    /// feature); in the browser Dawn's subgroup matrices, where the
    /// worker's patch got them (www/matrix-units-patch.js).
    Auto,
    /// Emulated in plain code, on any adapter with shader-f16: the same
    /// tiles, to check the path where no matrix unit is.
    Emulated,
}

impl UnitsRequest {
    pub fn parse(name: &str) -> Result<UnitsRequest> {
        match name {
            "off" => Ok(UnitsRequest::Off),
            "auto" => Ok(UnitsRequest::Auto),
            "emulated" => Ok(UnitsRequest::Emulated),
            _ => Err(Error::Unsupported(format!(
                "matrix units {name:?}: off, auto or emulated"
            ))),
        }
    }
}

impl GpuOptions {
    /// `WEBTRAIN_ADAPTER=name` and `WEBTRAIN_F16=packed`, for tests and CI.
    pub fn from_env() -> Self {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        GpuOptions {
            adapter: var("WEBTRAIN_ADAPTER"),
            force_packed_f16: var("WEBTRAIN_F16").is_some_and(|v| v.eq_ignore_ascii_case("packed")),
            kernel_config: None,
            matrix_units: UnitsRequest::Off,
        }
    }
}

/// What the device can do beyond core WebGPU, as enabled on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capabilities {
    pub shader_f16: bool,
    /// Native only in wgpu 30: its WebGPU backend does not map `subgroups`.
    pub subgroups: bool,
    pub timestamps: bool,
    /// Timestamps between dispatches of one pass: native only.
    pub timestamps_inside_passes: bool,
}

/// Failures reported by the device outside any call: kept until asked for,
/// because a callback must not panic (on the web it would kill the worker).
#[derive(Default)]
struct Health {
    lost: Mutex<Option<String>>,
    uncaptured: Mutex<Option<String>>,
}

/// A device, its queue and what was learned about its adapter. Cheap to
/// clone; clones share the device.
#[derive(Clone)]
pub struct Gpu {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub info: wgpu::AdapterInfo,
    pub caps: Capabilities,
    pub limits: wgpu::Limits,
    f16_storage: F16Storage,
    numerics: Numerics,
    /// The forward boundaries' clamp counters (`kernels::boundary`), this
    /// handle's own: kernels bind them through `Slot::BoundaryCounts`.
    pub boundary_counts: wgpu::Buffer,
    health: Arc<Health>,
    /// The GEMM variants chosen on this adapter (kernels::linear::tune),
    /// shared by every handle of the device.
    pub kernels: Arc<Mutex<KernelConfig>>,
    /// The modules and pipelines built on the device so far.
    pub pipelines: Arc<PipelineCache>,
    /// Where a recipe's f16 products may run on matrix units, where they
    /// were asked for (`GpuOptions::matrix_units`): the units, or why none.
    pub matrix_units: Option<std::result::Result<MatrixUnits, String>>,
}

impl Gpu {
    pub async fn new(options: &GpuOptions) -> Result<Gpu> {
        match options.matrix_units {
            UnitsRequest::Off => Ok(Gpu::with_extra_features(options, wgpu::Features::empty())
                .await?
                .0),
            #[cfg(not(target_arch = "wasm32"))]
            UnitsRequest::Auto => {
                let (mut gpu, support) = Gpu::new_cooperative(options).await?;
                gpu.matrix_units = Some(MatrixUnits::offered(&gpu, &support));
                Ok(gpu)
            }
            // the worker's patch requests Dawn's subgroup matrices for wgpu
            #[cfg(target_arch = "wasm32")]
            UnitsRequest::Auto => {
                let mut gpu = Gpu::with_extra_features(options, wgpu::Features::empty())
                    .await?
                    .0;
                gpu.matrix_units = Some(super::browser::subgroup_matrices());
                Ok(gpu)
            }
            UnitsRequest::Emulated => {
                let mut gpu = Gpu::with_extra_features(options, wgpu::Features::empty())
                    .await?
                    .0;
                gpu.matrix_units = Some(match gpu.caps.shader_f16 {
                    true => Ok(MatrixUnits::Emulated),
                    false => Err(format!(
                        "{} has no shader-f16, which the emulated units read",
                        gpu.info.name
                    )),
                });
                Ok(gpu)
            }
        }
    }

    /// `new`, also requesting those of `extra` the adapter has; an
    /// experimental one (`EXPERIMENTAL_COOPERATIVE_MATRIX`) is allowed
    /// only here. Returns the adapter too, for what only it reports.
    pub(super) async fn with_extra_features(
        options: &GpuOptions,
        extra: wgpu::Features,
    ) -> Result<(Gpu, wgpu::Adapter)> {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle());
        let adapter = choose_adapter(&instance, options.adapter.as_deref()).await?;
        let info = adapter_info(&adapter).await;
        let wanted = wgpu::Features::SHADER_F16
            | wgpu::Features::SUBGROUP
            | wgpu::Features::TIMESTAMP_QUERY
            | wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES
            | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS
            | extra;
        let features = adapter.features() & wanted;
        let experimental = match features.intersects(wgpu::Features::all_experimental_mask()) {
            // SAFETY: only the cooperative-matrix probe asks for an
            // experimental feature, on a device of its own (wgpu's
            // contract: its bugs may be UB, and are to be reported).
            true => unsafe { wgpu::ExperimentalFeatures::enabled() },
            false => wgpu::ExperimentalFeatures::disabled(),
        };
        let limits = adapter.limits();
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("webtrain"),
                required_features: features,
                required_limits: limits.clone(),
                experimental_features: experimental,
                ..Default::default()
            })
            .await
            .map_err(|e| Error::DeviceRequest {
                adapter: info.name.clone(),
                message: e.to_string(),
            })?;

        let health = Arc::new(Health::default());
        let h = Arc::clone(&health);
        device.set_device_lost_callback(move |reason, message| {
            let reason = match message.is_empty() {
                true => format!("{reason:?}"),
                false => format!("{reason:?}: {message}"),
            };
            set_once(&h.lost, reason);
        });
        let h = Arc::clone(&health);
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            set_once(&h.uncaptured, e.to_string())
        }));

        let caps = Capabilities {
            shader_f16: features.contains(wgpu::Features::SHADER_F16),
            subgroups: features.contains(wgpu::Features::SUBGROUP),
            timestamps: features.contains(wgpu::Features::TIMESTAMP_QUERY),
            timestamps_inside_passes: features
                .contains(wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES),
        };
        let f16_storage = if caps.shader_f16 && !options.force_packed_f16 {
            F16Storage::Native
        } else {
            F16Storage::Packed
        };
        let boundary_counts = counters(&device);
        let kernels = Arc::new(Mutex::new(
            options.kernel_config.clone().unwrap_or_default(),
        ));
        let gpu = Gpu {
            device,
            queue,
            info,
            caps,
            limits,
            f16_storage,
            numerics: Numerics::Exact,
            boundary_counts,
            health,
            kernels,
            pipelines: Arc::default(),
            matrix_units: None,
        };
        Ok((gpu, adapter))
    }

    /// Whether this is a CPU rasterizer (lavapipe, SwiftShader): its
    /// timings say nothing of a GPU, so kernels are chosen by rule.
    pub fn is_software(&self) -> bool {
        let name = self.info.name.to_lowercase();
        self.info.device_type == wgpu::DeviceType::Cpu
            || ["llvmpipe", "lavapipe", "swiftshader"]
                .iter()
                .any(|s| name.contains(s))
    }

    /// The kernel choices made on this device so far (a copy).
    pub fn kernel_config(&self) -> KernelConfig {
        lock(&self.kernels).clone()
    }

    /// The storage mode pipelines built for this handle use.
    pub fn f16_storage(&self) -> F16Storage {
        self.f16_storage
    }

    /// The same device, building pipelines in another f16 storage mode.
    pub fn with_f16_storage(&self, storage: F16Storage) -> Result<Gpu> {
        if storage == F16Storage::Native && !self.caps.shader_f16 {
            return Err(Error::Unsupported(format!(
                "native f16 storage needs the shader-f16 feature, which {:?} lacks",
                self.info.name
            )));
        }
        Ok(Gpu {
            f16_storage: storage,
            ..self.clone()
        })
    }

    /// The numeric mode pipelines built for this handle use.
    pub fn numerics(&self) -> Numerics {
        self.numerics
    }

    /// The same device, building pipelines in another numeric mode, with
    /// clamp counters of its own (handles used at once do not share them).
    pub fn with_numerics(&self, numerics: Numerics) -> Gpu {
        Gpu {
            numerics,
            boundary_counts: counters(&self.device),
            ..self.clone()
        }
    }

    /// Fails if the device was lost or reported an error nobody caught.
    pub fn check_health(&self) -> Result<()> {
        if let Some(reason) = lock(&self.health.lost).clone() {
            return Err(Error::DeviceLost { reason });
        }
        if let Some(message) = lock(&self.health.uncaptured).take() {
            return Err(Error::Gpu {
                op: "device".into(),
                message,
            });
        }
        Ok(())
    }

    /// Why the device was lost, if it was: for a caller that polls.
    pub fn lost_reason(&self) -> Option<String> {
        lock(&self.health.lost).clone()
    }
}

fn counters(device: &wgpu::Device) -> wgpu::Buffer {
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("boundary_counts"),
        size: 4 * BOUNDARY_COUNTERS,
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_SRC
            | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned lock only means a panic elsewhere; the Option inside is intact.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn set_once(slot: &Mutex<Option<String>>, message: String) {
    lock(slot).get_or_insert(message);
}

#[cfg(target_arch = "wasm32")]
use super::browser::{adapter_info, choose_adapter};

#[cfg(not(target_arch = "wasm32"))]
async fn adapter_info(adapter: &wgpu::Adapter) -> wgpu::AdapterInfo {
    adapter.get_info()
}

#[cfg(not(target_arch = "wasm32"))]
async fn choose_adapter(instance: &wgpu::Instance, wanted: Option<&str>) -> Result<wgpu::Adapter> {
    let adapters = instance.enumerate_adapters(wgpu::Backends::all()).await;
    let names: Vec<String> = adapters
        .iter()
        .map(|a| format!("{} ({:?})", a.get_info().name, a.get_info().backend))
        .collect();
    let no_adapter = || Error::NoAdapter {
        wanted: wanted.map(str::to_owned),
        available: names.clone(),
        hint: "none found (on Linux without a GPU, install mesa-vulkan-drivers for lavapipe)",
    };
    match wanted {
        Some(w) => {
            let w = w.to_lowercase();
            adapters
                .into_iter()
                .find(|a| a.get_info().name.to_lowercase().contains(&w))
                .ok_or_else(no_adapter)
        }
        None => adapters
            .into_iter()
            .max_by_key(|a| preference(a.get_info().device_type))
            .ok_or_else(no_adapter),
    }
}

/// Higher is better: what "high performance" means among enumerated adapters.
#[cfg(not(target_arch = "wasm32"))]
fn preference(t: wgpu::DeviceType) -> u8 {
    match t {
        wgpu::DeviceType::DiscreteGpu => 4,
        wgpu::DeviceType::IntegratedGpu => 3,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Cpu => 1,
        wgpu::DeviceType::Other => 0,
    }
}
