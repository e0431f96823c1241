//! Where a step's time goes: one real training step recorded with each
//! dispatch in its own compute pass between two timestamps (pass-level
//! timestamps work in Chrome and natively), summed by kernel name. The
//! extra passes cost a little; the numbers are GPU time, not wall time.
//! Chrome rounds timestamps to 100 µs unless its WebGPU developer features
//! are on, so short kernels read as 0 or 0.1 ms there.

use serde::Serialize;

use crate::data::Batch;
use crate::error::{Error, Result};
use crate::train::{StepStats, Trainer};

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KernelTime {
    pub kernel: String,
    pub dispatches: u32,
    pub ms: f64,
}

impl Trainer {
    /// Trains one step on `batch` (it counts like any other) and returns its
    /// stats with the GPU time of each kernel, largest first.
    pub async fn profiled_step(
        &mut self,
        batch: &Batch,
    ) -> Result<(Vec<StepStats>, Vec<KernelTime>)> {
        if !self.gpu.caps.timestamps {
            return Err(Error::Unsupported(format!(
                "{:?} has no timestamp queries: per-kernel times are not available",
                self.gpu.info.name
            )));
        }
        let mut stats = self.flush().await?;
        let labels: Vec<&'static str> = self.step_dispatches().iter().map(|d| d.label).collect();
        let count = 2 * labels.len() as u32;
        let queries = self.gpu.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("profile"),
            ty: wgpu::QueryType::Timestamp,
            count,
        });
        let resolved = self.gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("profile"),
            size: 8 * count as u64,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        self.submit(batch, Some(&queries))?;
        let mut encoder = self
            .gpu
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("profile"),
            });
        encoder.resolve_query_set(&queries, 0..count, &resolved, 0);
        self.gpu.queue.submit([encoder.finish()]);
        stats.extend(self.flush().await?);
        let ticks: Vec<u64> = self.gpu.read_back((&resolved).into()).await?;
        let period_ms = self.gpu.queue.get_timestamp_period() as f64 * 1e-6;
        let mut times: Vec<KernelTime> = Vec::new();
        for (i, label) in labels.iter().enumerate() {
            let ms = ticks[2 * i + 1].saturating_sub(ticks[2 * i]) as f64 * period_ms;
            match times.iter_mut().find(|t| t.kernel == *label) {
                Some(t) => {
                    t.dispatches += 1;
                    t.ms += ms;
                }
                None => times.push(KernelTime {
                    kernel: label.to_string(),
                    dispatches: 1,
                    ms,
                }),
            }
        }
        times.sort_by(|a, b| b.ms.total_cmp(&a.ms));
        Ok((stats, times))
    }
}
