//! Step statistics read back without blocking the step loop: each step
//! copies its loss totals, gradient stats, the bad-token count and the
//! loss scale into a small staging buffer of its own and maps it. A step's
//! numbers are collected once `LAG` newer steps have been submitted (or on
//! a drain), so the host keeps the GPU fed: natively it waits for that one
//! submission, in the browser it awaits the map callback.

use std::collections::VecDeque;

use bytemuck::{Pod, Zeroable};

use crate::error::{Error, Result};
use crate::gpu::{BOUNDARY_COUNTERS, Gpu};
use crate::kernels::GradStats;
use crate::kernels::loss::LossTotals;
use crate::optim::LossScale;

/// Steps in flight before the oldest one's stats are collected.
pub const LAG: usize = 2;

/// What one step leaves for the host, 256 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct Record {
    pub loss: LossTotals,
    pub grads: GradStats,
    /// Input tokens ≥ V seen since the model was made.
    pub bad_tokens: u32,
    _pad: [u32; 3],
    /// The loss scale's state as the step began (with loss scaling).
    pub scale: LossScale,
    /// The step's forward boundary clamps (`Gpu::boundary_counts`).
    pub clamped: [u32; BOUNDARY_COUNTERS as usize],
    /// The step's operand counts (`Linear::copy_counts`).
    pub operands: [[u32; 4]; 6],
    /// The step's products on matrix units (`Linear::copy_unit_counts`).
    pub units: [u32; 4],
    /// The noise sums of dgrad's and wgrad's dY (`Linear::copy_noise`).
    pub noise: [[f32; 2]; 2],
}

struct Pending {
    step: u32,
    buffer: wgpu::Buffer,
    mapped: futures_channel::oneshot::Receiver<Result<(), wgpu::BufferAsyncError>>,
    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    submission: wgpu::SubmissionIndex,
}

#[derive(Default)]
pub struct Readback {
    free: Vec<wgpu::Buffer>,
    pending: VecDeque<Pending>,
}

impl Readback {
    /// A staging buffer for the step being encoded (recycled when possible).
    pub fn target(&mut self, gpu: &Gpu) -> wgpu::Buffer {
        self.free.pop().unwrap_or_else(|| {
            gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("step_record"),
                size: size_of::<Record>() as u64,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        })
    }

    /// Maps `buffer` once `submission` (which filled it) is done.
    pub fn submitted(
        &mut self,
        step: u32,
        buffer: wgpu::Buffer,
        submission: wgpu::SubmissionIndex,
    ) {
        let (tx, mapped) = futures_channel::oneshot::channel();
        buffer.map_async(wgpu::MapMode::Read, .., move |r| {
            let _ = tx.send(r);
        });
        self.pending.push_back(Pending {
            step,
            buffer,
            mapped,
            submission,
        });
    }

    pub fn in_flight(&self) -> usize {
        self.pending.len()
    }

    /// The oldest step's record, waiting for it.
    pub async fn collect_oldest(&mut self, gpu: &Gpu) -> Result<Option<(u32, Record)>> {
        let Some(p) = self.pending.pop_front() else {
            return Ok(None);
        };
        let failed = |message: String| Error::Gpu {
            op: "step read-back".into(),
            message,
        };
        #[cfg(not(target_arch = "wasm32"))]
        gpu.device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(p.submission),
                timeout: None,
            })
            .map_err(|e| failed(e.to_string()))?;
        let mapped = p
            .mapped
            .await
            .map_err(|_| failed("map callback dropped".into()))?;
        gpu.check_health()?;
        mapped.map_err(|e| failed(e.to_string()))?;
        let record = {
            let view = p
                .buffer
                .get_mapped_range(..)
                .map_err(|e| failed(e.to_string()))?;
            bytemuck::pod_read_unaligned::<Record>(&view)
        };
        p.buffer.unmap();
        self.free.push(p.buffer);
        Ok(Some((p.step, record)))
    }
}
