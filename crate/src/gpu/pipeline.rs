//! Compute pipelines with explicit bind-group layouts. A shader module is
//! built inside an error scope, so a kernel that does not compile is a
//! returned error naming the kernel and its source line, never a panic.
//! Modules and pipelines are cached per device by what they are built
//! from, and a pipeline is created the first time a dispatch needs it: a
//! kernel set built again (another `Kernels`, each test, a recovered run)
//! compiles nothing twice, and a kernel never dispatched is never compiled
//! (SwiftShader and lavapipe JIT-compile each pipeline for up to seconds).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::Gpu;
use super::buffers::Bind;
use super::dispatch::{Dispatch, Grid};
use crate::error::{Error, Result};
use crate::shaders::{Composed, F16Storage, Module, ShaderFile, compose_variant};

/// One binding of a kernel, in the order of its `@binding` numbers. A
/// storage slot carries the name its launcher's errors give the buffer
/// bound to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Slot {
    /// `var<uniform>` params struct: bound unchecked.
    Uniform(u32),
    /// `var<storage, read>` input.
    Read(u32, &'static str),
    /// `var<storage, read_write>` output.
    ReadWrite(u32, &'static str),
    /// `boundary_counts` (00_common.wgsl, binding 15), the clamp counters of
    /// the forward boundaries: bound by [`Kernel::dispatch`] itself, from
    /// the device handle, so launchers pass no resource for it.
    BoundaryCounts,
}

/// `boundary_counts`' binding in 00_common.wgsl.
const BOUNDARY_COUNTS_BINDING: u32 = 15;

impl Slot {
    fn binding(self) -> u32 {
        match self {
            Slot::Uniform(b) | Slot::Read(b, _) | Slot::ReadWrite(b, _) => b,
            Slot::BoundaryCounts => BOUNDARY_COUNTS_BINDING,
        }
    }
}

/// A kernel's entry point and its bindings, written out like a C header in
/// each kernel module.
pub struct KernelDesc {
    pub entry: &'static str,
    pub slots: &'static [Slot],
}

impl KernelDesc {
    /// Entry `entry` over `slots`: for entries that share a slot table.
    pub const fn of(entry: &'static str, slots: &'static [Slot]) -> KernelDesc {
        KernelDesc { entry, slots }
    }
}

/// A kernel of a built module: what a launcher turns into [`Dispatch`]es.
/// Its pipeline is created by its first dispatch.
pub struct Kernel {
    pub entry: &'static str,
    slots: &'static [Slot],
    module: Arc<CachedModule>,
}

#[derive(Clone)]
struct Built {
    layout: wgpu::BindGroupLayout,
    pipeline: wgpu::ComputePipeline,
}

/// A compiled module and the pipelines made from it so far, by entry point.
struct CachedModule {
    module: wgpu::ShaderModule,
    pipelines: Mutex<HashMap<(&'static str, &'static [Slot]), Built>>,
}

/// Every module built on one device, by composed source (which spells out
/// the f16 storage mode, the numeric mode and the variant's constants):
/// shared by every handle of the device.
#[derive(Default)]
pub struct PipelineCache {
    modules: Mutex<HashMap<String, Arc<CachedModule>>>,
}

impl PipelineCache {
    /// How many pipelines have been created on this device: what the
    /// tests check laziness by.
    pub fn pipelines_created(&self) -> usize {
        lock(&self.modules)
            .values()
            .map(|m| lock(&m.pipelines).len())
            .sum()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned lock only means a panic elsewhere; the map is intact.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Builds every kernel of one shader file (a `ShaderFile`, or a `Module`
/// with a prelude) in the handle's f16 storage mode.
pub async fn build_kernels<const N: usize>(
    gpu: &Gpu,
    module: impl Into<Module>,
    descs: [KernelDesc; N],
) -> Result<[Kernel; N]> {
    build_variant_kernels(gpu, module, "", descs).await
}

/// `build_kernels` of one variant of a file: `constants` declared ahead of
/// it (`shaders::compose_variant`).
pub async fn build_variant_kernels<const N: usize>(
    gpu: &Gpu,
    module: impl Into<Module>,
    constants: &str,
    descs: [KernelDesc; N],
) -> Result<[Kernel; N]> {
    let storage = gpu.f16_storage();
    let module = module.into();
    let file = module.file;
    let composed = compose_variant(module, storage, gpu.numerics(), constants);
    build_composed_kernels(gpu, (file, storage), composed, descs).await
}

/// The kernels of a composed module (`compose_variant`'s, perhaps changed
/// by its launcher), compiled once per device; `file` and `storage` name
/// it in a compile error.
pub async fn build_composed_kernels<const N: usize>(
    gpu: &Gpu,
    (file, storage): (ShaderFile, F16Storage),
    composed: Composed,
    descs: [KernelDesc; N],
) -> Result<[Kernel; N]> {
    let cached = lock(&gpu.pipelines.modules).get(&composed.source).cloned();
    let module = match cached {
        Some(module) => module,
        None => {
            let scope = gpu.device.push_error_scope(wgpu::ErrorFilter::Validation);
            let module = gpu
                .device
                .create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some(file.name),
                    source: wgpu::ShaderSource::Wgsl(composed.source.as_str().into()),
                });
            if let Some(error) = scope.pop().await {
                let info = module.get_compilation_info().await;
                let located: Vec<String> = info
                    .messages
                    .iter()
                    .map(|m| match &m.location {
                        Some(loc) => format!("{}: {}", composed.locate(loc.line_number), m.message),
                        None => m.message.clone(),
                    })
                    .collect();
                let message = if located.is_empty() {
                    error.to_string()
                } else {
                    located.join("; ")
                };
                return Err(Error::Shader {
                    kernel: file.name,
                    storage: storage.name(),
                    message,
                });
            }
            let module = Arc::new(CachedModule {
                module,
                pipelines: Mutex::default(),
            });
            lock(&gpu.pipelines.modules).insert(composed.source, Arc::clone(&module));
            module
        }
    };
    Ok(descs.map(|d| Kernel {
        entry: d.entry,
        slots: d.slots,
        module: Arc::clone(&module),
    }))
}

/// The layout and pipeline of `entry` in `module`, created on first use.
fn build_one(
    gpu: &Gpu,
    module: &CachedModule,
    entry: &'static str,
    slots: &'static [Slot],
) -> Built {
    if let Some(built) = lock(&module.pipelines).get(&(entry, slots)) {
        return built.clone();
    }
    let entries: Vec<wgpu::BindGroupLayoutEntry> = slots
        .iter()
        .map(|slot| {
            let ty = match *slot {
                Slot::Uniform(_) => wgpu::BufferBindingType::Uniform,
                Slot::Read(..) => wgpu::BufferBindingType::Storage { read_only: true },
                Slot::ReadWrite(..) | Slot::BoundaryCounts => {
                    wgpu::BufferBindingType::Storage { read_only: false }
                }
            };
            let binding = slot.binding();
            wgpu::BindGroupLayoutEntry {
                binding,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty,
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            }
        })
        .collect();
    let layout = gpu
        .device
        .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some(entry),
            entries: &entries,
        });
    let pipeline_layout = gpu
        .device
        .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some(entry),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
    let pipeline = gpu
        .device
        .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(entry),
            layout: Some(&pipeline_layout),
            module: &module.module,
            entry_point: Some(entry),
            compilation_options: Default::default(),
            cache: None,
        });
    let built = Built { layout, pipeline };
    lock(&module.pipelines).insert((entry, slots), built.clone());
    built
}

impl Kernel {
    /// Creates the pipeline now, in a validation scope: for callers that
    /// want a kernel the device refuses as an error before any dispatch
    /// (`webtrain bench`'s variants), not at its first dispatch.
    pub async fn prepare(&self, gpu: &Gpu) -> Result<()> {
        let scope = gpu.device.push_error_scope(wgpu::ErrorFilter::Validation);
        build_one(gpu, &self.module, self.entry, self.slots);
        match scope.pop().await {
            Some(error) => Err(Error::Gpu {
                op: self.entry.to_string(),
                message: error.to_string(),
            }),
            None => Ok(()),
        }
    }

    /// Binds `binds` (one per slot, in slot order, `BoundaryCounts` left
    /// out) for a dispatch of `grid`, each storage binding first checked
    /// against its slot (`Gpu::check_binding`; errors name `op` and the
    /// slot's name).
    pub fn dispatch(
        &self,
        gpu: &Gpu,
        op: &'static str,
        binds: &[Bind<'_>],
        grid: Grid,
    ) -> Result<Dispatch> {
        let given: Vec<Slot> = self
            .slots
            .iter()
            .copied()
            .filter(|s| *s != Slot::BoundaryCounts)
            .collect();
        if binds.len() != given.len() {
            return Err(Error::shape(
                self.entry,
                "bindings",
                given.len(),
                binds.len(),
            ));
        }
        let mut entries = Vec::with_capacity(self.slots.len());
        for (slot, bind) in given.iter().zip(binds) {
            if let Slot::Read(_, name) | Slot::ReadWrite(_, name) = *slot {
                gpu.check_binding(op, name, &bind.range, bind.needed)?;
            }
            entries.push(wgpu::BindGroupEntry {
                binding: slot.binding(),
                resource: bind.range.binding(),
            });
        }
        if given.len() < self.slots.len() {
            entries.push(wgpu::BindGroupEntry {
                binding: BOUNDARY_COUNTS_BINDING,
                resource: gpu.boundary_counts.as_entire_binding(),
            });
        }
        let built = build_one(gpu, &self.module, self.entry, self.slots);
        let bind_group = gpu.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(self.entry),
            layout: &built.layout,
            entries: &entries,
        });
        Ok(Dispatch {
            label: self.entry,
            pipeline: built.pipeline.clone(),
            bind_group,
            grid,
            indirect: None,
            route: None,
        })
    }
}
