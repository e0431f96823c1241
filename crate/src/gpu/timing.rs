//! GPU time of recorded work, from pass-level timestamp queries (these work
//! natively and in Chrome; timestamps inside passes are native only).

use super::{Dispatch, Gpu};
use crate::error::{Error, Result};

impl Gpu {
    /// GPU seconds per repetition of `dispatches`, recorded `reps` times in
    /// one compute pass bracketed by timestamps. Needs `caps.timestamps`.
    pub async fn time_dispatches(&self, dispatches: &[&Dispatch], reps: u32) -> Result<f64> {
        if !self.caps.timestamps {
            return Err(Error::Unsupported(format!(
                "{:?} has no timestamp queries",
                self.info.name
            )));
        }
        let queries = self.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("time_dispatches"),
            ty: wgpu::QueryType::Timestamp,
            count: 2,
        });
        let resolved = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("time_dispatches"),
            size: 16,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let validation = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("time_dispatches"),
            });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("time_dispatches"),
                timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                    query_set: &queries,
                    beginning_of_pass_write_index: Some(0),
                    end_of_pass_write_index: Some(1),
                }),
            });
            for _ in 0..reps {
                for d in dispatches {
                    d.record(&mut pass);
                }
            }
        }
        encoder.resolve_query_set(&queries, 0..2, &resolved, 0);
        self.queue.submit([encoder.finish()]);
        if let Some(e) = validation.pop().await {
            return Err(Error::Gpu {
                op: "time_dispatches".into(),
                message: e.to_string(),
            });
        }
        let ticks: Vec<u64> = self.read_back((&resolved).into()).await?;
        let ns =
            ticks[1].saturating_sub(ticks[0]) as f64 * self.queue.get_timestamp_period() as f64;
        Ok(ns * 1e-9 / reps.max(1) as f64)
    }

    /// Keeps the GPU busy with `dispatches` for `seconds` of GPU time: GPUs
    /// idle at a fraction of their clocks (an H100 at 345 of 1980 MHz) and
    /// take a while to ramp up, which short timings would otherwise catch
    /// (they read up to 5× slow on the H100). Needs `caps.timestamps`.
    pub async fn warm_up(&self, dispatches: &[&Dispatch], seconds: f64) -> Result<()> {
        let (mut busy, mut rounds) = (0.0, 1);
        while busy < seconds {
            busy += self.time_dispatches(dispatches, rounds).await? * rounds as f64;
            rounds = (rounds * 2).min(64);
        }
        Ok(())
    }
}
