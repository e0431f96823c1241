//! What the adapter is and what that means for training, in one serialisable
//! report shared by `webtrain info` and the page's adapter card.

use serde::Serialize;

use super::Gpu;
use crate::shaders::F16Storage;

#[derive(Clone, Debug, Serialize)]
pub struct AdapterReport {
    pub name: String,
    pub backend: String,
    pub device_type: String,
    pub driver: String,
    pub features: FeatureReport,
    pub limits: LimitReport,
    /// The f16 storage mode kernels are built with on this device.
    pub f16_storage: &'static str,
    /// What the features mean for a person choosing a precision mode.
    pub mixed_precision: String,
    /// Whether per-kernel GPU timing is available, and how precise.
    pub timing: String,
    /// Which matrix units a recipe's f16 products may run on, or why none;
    /// absent where none were asked for.
    pub matrix_units: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct FeatureReport {
    pub shader_f16: bool,
    pub subgroups: bool,
    pub timestamps: bool,
    pub timestamps_inside_passes: bool,
}

/// The limits that decide how big a model fits and how kernels are tiled.
#[derive(Clone, Debug, Serialize)]
pub struct LimitReport {
    pub max_buffer_size: u64,
    pub max_storage_buffer_binding_size: u64,
    pub max_storage_buffers_per_shader_stage: u32,
    pub max_compute_workgroup_storage_size: u32,
    pub max_compute_invocations_per_workgroup: u32,
    pub max_compute_workgroups_per_dimension: u32,
    pub min_storage_buffer_offset_alignment: u32,
}

impl Gpu {
    pub fn report(&self) -> AdapterReport {
        let l = &self.limits;
        let on_web = cfg!(target_arch = "wasm32");
        let mixed_precision = match (self.caps.shader_f16, self.f16_storage()) {
            (true, F16Storage::Native) => "f16 mixed precision runs natively (shader-f16)".to_string(),
            (true, F16Storage::Packed) => {
                "f16 mixed precision runs on packed f16 (forced; the adapter has shader-f16)".to_string()
            }
            (false, _) => "f16 mixed precision runs on packed f16 (no shader-f16: two halves per 32-bit word, \
                           same numbers, somewhat slower)"
                .to_string(),
        };
        let timing = match (self.caps.timestamps, on_web) {
            (false, _) => {
                "no GPU timestamps on this adapter: per-kernel timing unavailable".to_string()
            }
            (true, true) => {
                "GPU timestamps available per pass; Chrome rounds them to 100 µs unless \
                             chrome://flags/#enable-webgpu-developer-features is on"
                    .to_string()
            }
            (true, false) => "GPU timestamps available, per kernel".to_string(),
        };
        AdapterReport {
            name: self.info.name.clone(),
            backend: format!("{:?}", self.info.backend),
            device_type: format!("{:?}", self.info.device_type),
            driver: [self.info.driver.as_str(), self.info.driver_info.as_str()]
                .iter()
                .filter(|s| !s.is_empty())
                .copied()
                .collect::<Vec<_>>()
                .join(" "),
            features: FeatureReport {
                shader_f16: self.caps.shader_f16,
                subgroups: self.caps.subgroups,
                timestamps: self.caps.timestamps,
                timestamps_inside_passes: self.caps.timestamps_inside_passes,
            },
            limits: LimitReport {
                max_buffer_size: l.max_buffer_size,
                max_storage_buffer_binding_size: l.max_storage_buffer_binding_size,
                max_storage_buffers_per_shader_stage: l.max_storage_buffers_per_shader_stage,
                max_compute_workgroup_storage_size: l.max_compute_workgroup_storage_size,
                max_compute_invocations_per_workgroup: l.max_compute_invocations_per_workgroup,
                max_compute_workgroups_per_dimension: l.max_compute_workgroups_per_dimension,
                min_storage_buffer_offset_alignment: l.min_storage_buffer_offset_alignment,
            },
            f16_storage: self.f16_storage().name(),
            mixed_precision,
            timing,
            matrix_units: self.matrix_units.as_ref().map(|units| match units {
                Ok(u) => format!("{}, for f16 products (amp-f16)", u.describe()),
                Err(why) => format!("none: {why}"),
            }),
        }
    }
}
