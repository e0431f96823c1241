//! Compute pipelines with explicit bind-group layouts, built inside error
//! scopes so that a kernel that does not compile is a returned error naming
//! the kernel and its source line, never a panic.

use super::Gpu;
use super::dispatch::{Dispatch, Grid};
use crate::error::{Error, Result};
use crate::shaders::{Module, compose_variant};

/// One binding of a kernel, in the order of its `@binding` numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// `var<uniform>` params struct.
    Uniform(u32),
    /// `var<storage, read>` input.
    Read(u32),
    /// `var<storage, read_write>` output.
    ReadWrite(u32),
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
            Slot::Uniform(b) | Slot::Read(b) | Slot::ReadWrite(b) => b,
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

/// A built kernel: what a launcher turns into [`Dispatch`]es.
pub struct Kernel {
    pub entry: &'static str,
    slots: &'static [Slot],
    layout: wgpu::BindGroupLayout,
    pipeline: wgpu::ComputePipeline,
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
    let scope = gpu.device.push_error_scope(wgpu::ErrorFilter::Validation);
    let module = gpu
        .device
        .create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some(file.name),
            source: wgpu::ShaderSource::Wgsl(composed.source.as_str().into()),
        });
    let kernels = descs.map(|d| build_one(gpu, &module, d));
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
    Ok(kernels)
}

fn build_one(gpu: &Gpu, module: &wgpu::ShaderModule, desc: KernelDesc) -> Kernel {
    let entries: Vec<wgpu::BindGroupLayoutEntry> = desc
        .slots
        .iter()
        .map(|slot| {
            let ty = match *slot {
                Slot::Uniform(_) => wgpu::BufferBindingType::Uniform,
                Slot::Read(_) => wgpu::BufferBindingType::Storage { read_only: true },
                Slot::ReadWrite(_) | Slot::BoundaryCounts => {
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
            label: Some(desc.entry),
            entries: &entries,
        });
    let pipeline_layout = gpu
        .device
        .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some(desc.entry),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
    let pipeline = gpu
        .device
        .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(desc.entry),
            layout: Some(&pipeline_layout),
            module,
            entry_point: Some(desc.entry),
            compilation_options: Default::default(),
            cache: None,
        });
    Kernel {
        entry: desc.entry,
        slots: desc.slots,
        layout,
        pipeline,
    }
}

impl Kernel {
    /// Binds `resources` (one per slot, in slot order, `BoundaryCounts`
    /// left out) for a dispatch of `grid`.
    pub fn dispatch(
        &self,
        gpu: &Gpu,
        resources: &[wgpu::BindingResource<'_>],
        grid: Grid,
    ) -> Result<Dispatch> {
        let given: Vec<Slot> = self
            .slots
            .iter()
            .copied()
            .filter(|s| *s != Slot::BoundaryCounts)
            .collect();
        if resources.len() != given.len() {
            return Err(Error::shape(
                self.entry,
                "bindings",
                given.len(),
                resources.len(),
            ));
        }
        let mut entries: Vec<wgpu::BindGroupEntry> = given
            .iter()
            .zip(resources)
            .map(|(slot, resource)| wgpu::BindGroupEntry {
                binding: slot.binding(),
                resource: resource.clone(),
            })
            .collect();
        if given.len() < self.slots.len() {
            entries.push(wgpu::BindGroupEntry {
                binding: BOUNDARY_COUNTS_BINDING,
                resource: gpu.boundary_counts.as_entire_binding(),
            });
        }
        let bind_group = gpu.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(self.entry),
            layout: &self.layout,
            entries: &entries,
        });
        Ok(Dispatch {
            label: self.entry,
            pipeline: self.pipeline.clone(),
            bind_group,
            grid,
        })
    }
}
