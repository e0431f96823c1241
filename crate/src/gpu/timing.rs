//! GPU time of recorded work, from pass-level timestamp queries (these work
//! natively and in Chrome; timestamps inside passes are native only).

use super::{Dispatch, Gpu};
use crate::error::{Error, Result};

impl Gpu {
    /// GPU seconds per repetition of `dispatches`, recorded `reps` times in
    /// one compute pass bracketed by timestamps. Needs `caps.timestamps`.
    pub async fn time_dispatches(&self, dispatches: &[&Dispatch], reps: u32) -> Result<f64> {
        let ticks = self
            .timed_passes("time_dispatches", 2, |encoder, queries| {
                let mut pass = encoder.begin_compute_pass(&timed_pass(queries, 0));
                for _ in 0..reps {
                    for d in dispatches {
                        d.record(&mut pass);
                    }
                }
            })
            .await?;
        Ok(self.seconds(&ticks) / reps.max(1) as f64)
    }

    /// GPU seconds per repetition of `timed` run on what `setup` leaves:
    /// each repetition records `setup` in an untimed pass, then `timed` in a
    /// pass of its own between timestamps, so only `timed` is counted (no
    /// difference of two noisy timings). At most 2048 repetitions (a query
    /// set's timestamps); more are timed as 2048. Needs `caps.timestamps`.
    pub async fn time_after(
        &self,
        setup: &[&Dispatch],
        timed: &[&Dispatch],
        reps: u32,
    ) -> Result<f64> {
        let reps = reps.clamp(1, wgpu::QUERY_SET_MAX_QUERIES / 2);
        let ticks = self
            .timed_passes("time_after", 2 * reps, |encoder, queries| {
                for r in 0..reps {
                    {
                        let mut pass = encoder.begin_compute_pass(&Default::default());
                        for d in setup {
                            d.record(&mut pass);
                        }
                    }
                    let mut pass = encoder.begin_compute_pass(&timed_pass(queries, 2 * r));
                    for d in timed {
                        d.record(&mut pass);
                    }
                }
            })
            .await?;
        Ok(self.seconds(&ticks) / reps as f64)
    }

    /// Records what `record` writes into a query set of `count` timestamps
    /// (pairs: begin, end), submits it and reads the ticks back.
    async fn timed_passes(
        &self,
        label: &str,
        count: u32,
        record: impl FnOnce(&mut wgpu::CommandEncoder, &wgpu::QuerySet),
    ) -> Result<Vec<u64>> {
        if !self.caps.timestamps {
            return Err(Error::Unsupported(format!(
                "{:?} has no timestamp queries",
                self.info.name
            )));
        }
        let queries = self.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some(label),
            ty: wgpu::QueryType::Timestamp,
            count,
        });
        let resolved = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: 8 * count as u64,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let validation = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(label) });
        record(&mut encoder, &queries);
        encoder.resolve_query_set(&queries, 0..count, &resolved, 0);
        self.queue.submit([encoder.finish()]);
        if let Some(e) = validation.pop().await {
            return Err(Error::Gpu {
                op: label.into(),
                message: e.to_string(),
            });
        }
        self.read_back((&resolved).into()).await
    }

    /// Seconds between each pair of `ticks` (begin, end), summed.
    fn seconds(&self, ticks: &[u64]) -> f64 {
        let period_ns = self.queue.get_timestamp_period() as f64;
        let ticks: u64 = ticks.chunks(2).map(|p| p[1].saturating_sub(p[0])).sum();
        ticks as f64 * period_ns * 1e-9
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

/// A compute pass writing timestamps `first` (begin) and `first + 1` (end).
fn timed_pass(queries: &wgpu::QuerySet, first: u32) -> wgpu::ComputePassDescriptor<'_> {
    wgpu::ComputePassDescriptor {
        label: Some("timed"),
        timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
            query_set: queries,
            beginning_of_pass_write_index: Some(first),
            end_of_pass_write_index: Some(first + 1),
        }),
    }
}
