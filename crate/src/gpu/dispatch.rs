//! Dispatch geometry and submission.
//!
//! A 1-D launch of more workgroups than `max_compute_workgroups_per_dimension`
//! (65 535 almost everywhere) becomes a 2-D grid; kernels recover the flat
//! index with `flat_id` (00_common.wgsl) and bounds-check the surplus.

use super::Gpu;
use super::coop::Route;
use crate::error::{Error, Result};

/// Invocations per workgroup of the 1-D kernels: `WG` in 00_common.wgsl.
pub const WG: u32 = 256;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grid {
    pub x: u32,
    pub y: u32,
    /// Products of a batch (the GEMM's); 1 elsewhere.
    pub z: u32,
}

impl Gpu {
    /// The grid covering `invocations` one per flat index, `WG` per workgroup.
    pub fn grid_1d(&self, op: &'static str, invocations: u64) -> Result<Grid> {
        grid_1d(
            op,
            invocations,
            self.limits.max_compute_workgroups_per_dimension,
        )
    }

    /// The grid of `groups` workgroups, e.g. one per row (`flat_group` in WGSL).
    pub fn grid_groups(&self, op: &'static str, groups: u64) -> Result<Grid> {
        grid_groups(op, groups, self.limits.max_compute_workgroups_per_dimension)
    }

    /// Records `dispatches` in one compute pass, submits, and reports any
    /// validation or out-of-memory error raised on the way.
    pub async fn run(&self, dispatches: &[&Dispatch]) -> Result<()> {
        self.check_health()?;
        let validation = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let label = dispatches.first().map_or("run", |d| d.label);
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(label) });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some(label),
                timestamp_writes: None,
            });
            for d in dispatches {
                d.record(&mut pass);
            }
        }
        self.queue.submit([encoder.finish()]);
        let oom = oom.pop().await;
        let validation = validation.pop().await;
        if let Some(e) = oom.or(validation) {
            let ops: Vec<&str> = dispatches.iter().map(|d| d.label).collect();
            return Err(Error::Gpu {
                op: ops.join(", "),
                message: e.to_string(),
            });
        }
        Ok(())
    }
}

pub fn grid_1d(op: &'static str, invocations: u64, max_per_dim: u32) -> Result<Grid> {
    grid_groups(op, invocations.div_ceil(WG as u64), max_per_dim)
}

pub fn grid_groups(op: &'static str, groups: u64, max_per_dim: u32) -> Result<Grid> {
    let groups = groups.max(1);
    let max = max_per_dim as u64;
    if groups <= max {
        return Ok(Grid {
            x: groups as u32,
            y: 1,
            z: 1,
        });
    }
    let y = groups.div_ceil(max);
    if y > max {
        return Err(Error::Limit {
            op,
            what: "workgroups".into(),
            needed: groups,
            limit: max * max,
        });
    }
    Ok(Grid {
        x: max_per_dim,
        y: y as u32,
        z: 1,
    })
}

/// A kernel bound to its buffers: record it as often as needed.
pub struct Dispatch {
    pub label: &'static str,
    pub(super) pipeline: wgpu::ComputePipeline,
    pub(super) bind_group: wgpu::BindGroup,
    pub grid: Grid,
    /// Where a kernel recorded before writes the workgroup counts this one
    /// runs with (`grid` or none at all: `units_gate`'s choice), if so.
    pub(super) indirect: Option<(wgpu::Buffer, u64)>,
    /// A matrix product's route, on its scalar GEMM's dispatch.
    pub route: Option<Route>,
}

impl Dispatch {
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &self.bind_group, &[]);
        match &self.indirect {
            Some((buffer, offset)) => pass.dispatch_workgroups_indirect(buffer, *offset),
            None => pass.dispatch_workgroups(self.grid.x, self.grid.y, self.grid.z),
        }
    }

    /// Run with the workgroup counts found at `offset` of `buffer` when it
    /// runs (three u32: x, y, z; a buffer made with `INDIRECT` usage).
    pub fn indirect(self, buffer: &wgpu::Buffer, offset: u64) -> Dispatch {
        Dispatch {
            indirect: Some((buffer.clone(), offset)),
            ..self
        }
    }

    /// This dispatch as the scalar GEMM of a product that takes `route`.
    pub fn routed(self, route: Route) -> Dispatch {
        Dispatch {
            route: Some(route),
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_launches_stay_one_dimensional() {
        assert_eq!(grid_1d("t", 0, 65535).unwrap(), Grid { x: 1, y: 1, z: 1 });
        assert_eq!(grid_1d("t", 257, 65535).unwrap(), Grid { x: 2, y: 1, z: 1 });
        assert_eq!(
            grid_1d("t", 65535 * 256, 65535).unwrap(),
            Grid {
                x: 65535,
                y: 1,
                z: 1
            }
        );
    }

    #[test]
    fn large_launches_fold_into_rows_that_cover_every_invocation() {
        let g = grid_1d("t", 65535 * 256 + 1, 65535).unwrap();
        assert_eq!(
            g,
            Grid {
                x: 65535,
                y: 2,
                z: 1
            }
        );
        let g = grid_1d("t", 10_000_000_000, 65535).unwrap();
        assert!(g.x as u64 * g.y as u64 * 256 >= 10_000_000_000);
        assert!(grid_1d("t", u64::MAX / 2, 65535).is_err());
    }
}
