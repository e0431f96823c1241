//! Cooperative matrices (tensor cores), as wgpu 30 offers them natively:
//! the `EXPERIMENTAL_COOPERATIVE_MATRIX` feature and the configurations the
//! adapter reports (`Adapter::cooperative_matrix_properties`), and which
//! matrix units a device runs a recipe's f16 products on (`MatrixUnits`).
//! Only a device asked for them (`UnitsRequest::Auto`, or `webtrain bench
//! --what coop`) enables the experimental feature.
//!
//! wgpu's Vulkan backend lists a configuration only if it is subgroup-scoped,
//! 8 or 16 on each side, with A = B and C = result types among f16, f32,
//! i32, u32; it offers the feature only if the device also has the Vulkan
//! memory model at device scope. Its WebGPU backend reports none.

use super::{Gpu, GpuOptions};
use crate::error::Result;

/// What the adapter offers, and what the device was created with.
pub struct CoopSupport {
    /// Every configuration the adapter reports (empty where it has none).
    pub configs: Vec<wgpu::CooperativeMatrixProperties>,
    /// The adapter offers `EXPERIMENTAL_COOPERATIVE_MATRIX`.
    pub adapter_feature: bool,
    /// The device has both `EXPERIMENTAL_COOPERATIVE_MATRIX` and `SHADER_F16`.
    pub enabled: bool,
}

impl CoopSupport {
    /// The square f16 × f16 → f32 configuration of edge `edge`, if offered.
    pub fn f16_f32(&self, edge: u32) -> Option<wgpu::CooperativeMatrixProperties> {
        self.configs.iter().copied().find(|c| {
            (c.m_size, c.n_size, c.k_size) == (edge, edge, edge)
                && c.ab_type == wgpu::CooperativeScalarType::F16
                && c.cr_type == wgpu::CooperativeScalarType::F32
        })
    }

    /// Why no f16 GEMM on cooperative matrices can run, if it cannot.
    pub fn unavailable(&self, gpu: &Gpu) -> Option<String> {
        let name = &gpu.info.name;
        if !self.adapter_feature {
            return Some(format!(
                "{name:?} ({:?}) offers no cooperative matrices (wgpu's EXPERIMENTAL_COOPERATIVE_MATRIX)",
                gpu.info.backend
            ));
        }
        if !self.enabled {
            return Some(format!(
                "{name:?} has cooperative matrices but no shader-f16: f16 inputs cannot be read"
            ));
        }
        if self.f16_f32(16).is_none() && self.f16_f32(8).is_none() {
            return Some(format!(
                "{name:?} offers no square f16 x f16 -> f32 configuration of 8 or 16"
            ));
        }
        if !gpu.caps.subgroups {
            return Some(format!(
                "{name:?} has no subgroups: the kernels find their subgroup by `subgroup_id`"
            ));
        }
        if gpu.info.subgroup_min_size != gpu.info.subgroup_max_size {
            return Some(format!(
                "{name:?}'s subgroup size varies ({}..{}): the kernels size workgroups in whole subgroups",
                gpu.info.subgroup_min_size, gpu.info.subgroup_max_size
            ));
        }
        None
    }
}

/// Which matrix units serve a recipe's f16 products (kernels::linear::units).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatrixUnits {
    /// The device's cooperative matrices (tensor cores), in `edge`-sided
    /// fragments.
    Cooperative { edge: u32 },
    /// Chrome's subgroup matrices (Dawn's
    /// `chromium-experimental-subgroup-matrix`, requested by the page's
    /// worker: www/matrix-units-patch.js), in `edge`-sided fragments on
    /// subgroups of `subgroup` invocations.
    Subgroup { edge: u32, subgroup: u32 },
    /// Emulated in plain code, 8-sided fragments in 16×16 tiles: the same
    /// sources on any adapter with shader-f16 (tests).
    Emulated,
}

impl MatrixUnits {
    /// What `support` offers — 16-sided fragments where it can (NVIDIA),
    /// else 8 — or why nothing.
    pub fn offered(gpu: &Gpu, support: &CoopSupport) -> std::result::Result<MatrixUnits, String> {
        if let Some(why) = support.unavailable(gpu) {
            return Err(why);
        }
        let edge = [16, 8].into_iter().find(|&e| support.f16_f32(e).is_some());
        edge.map(|edge| MatrixUnits::Cooperative { edge })
            .ok_or_else(|| "no square f16 configuration".into())
    }

    pub fn describe(&self) -> String {
        match self {
            MatrixUnits::Cooperative { edge } => {
                format!("cooperative matrices {edge}x{edge}, f16 x f16 -> f32")
            }
            MatrixUnits::Subgroup { edge, subgroup } => format!(
                "subgroup matrices {edge}x{edge}, f16 x f16 -> f32, subgroups of {subgroup} (Dawn)"
            ),
            MatrixUnits::Emulated => "emulated (plain code, 8x8 fragments)".into(),
        }
    }
}

/// Where one of a step's matrix products runs, and why (`Dispatch::route`,
/// set on its scalar GEMM's dispatch): counted per step beside the gate's
/// own counts (`UnitCounts`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// Through the units' gate: on the units, or on the scalar GEMM where
    /// a value is not exact (the gate counts which).
    Gated,
    /// Scalar: an operand is not f16 values times a scale (f32, a layer
    /// kept wide, the f16 and sf16 modes' storage).
    Operand,
    /// Scalar: no matrix units (the adapter offers none, or they are off).
    NoUnits,
    /// Scalar: the shape is not a multiple of the units' tiles.
    Shape,
    /// Scalar: the tuner timed the scalar GEMM faster at this shape.
    Slower,
}

/// One configuration as a line: `16x16x16 A,B f16 C f32 (saturating)`.
pub fn describe(c: &wgpu::CooperativeMatrixProperties) -> String {
    format!(
        "M{}xN{}xK{} A,B {:?} C {:?}{}",
        c.m_size,
        c.n_size,
        c.k_size,
        c.ab_type,
        c.cr_type,
        if c.saturating_accumulation {
            " (saturating accumulation)"
        } else {
            ""
        }
    )
}

impl Gpu {
    /// A device as `Gpu::new` makes it, also with cooperative matrices and
    /// the experimental-features token where the adapter has them.
    pub async fn new_cooperative(options: &GpuOptions) -> Result<(Gpu, CoopSupport)> {
        let extra = wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX;
        let (gpu, adapter) = Gpu::with_extra_features(options, extra).await?;
        let features = gpu.device.features();
        let support = CoopSupport {
            configs: adapter.cooperative_matrix_properties(),
            adapter_feature: adapter.features().contains(extra),
            enabled: features.contains(extra | wgpu::Features::SHADER_F16),
        };
        Ok((gpu, support))
    }
}
