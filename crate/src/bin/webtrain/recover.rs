//! `webtrain train` on a lost GPU device: the snapshot of the run to go
//! back to (the checkpoint last saved, or the run as it started) and the
//! run rebuilt from it on a new device. The steps after the snapshot are
//! trained again and their JSON lines printed again: a reader keeps the
//! last line of each step.

use std::path::PathBuf;

use webtrain::checkpoint::Checkpoint;
use webtrain::run::Run;
use webtrain::{Error, Gpu, GpuOptions, Result};

/// Losses in a row after which the run gives up: the first, then each that
/// comes at or before the furthest step a loss came at (no progress).
const MAX_LOSSES_IN_A_ROW: u32 = 3;

/// The run at a step, as checkpoint bytes (`Run::save`).
pub struct Snapshot {
    pub step: u32,
    pub bytes: Vec<u8>,
    /// The file it was written to or read from, if any.
    pub file: Option<PathBuf>,
}

pub struct Recovery {
    snapshot: Snapshot,
    /// How the first device was made.
    options: GpuOptions,
    validation_batches: usize,
    /// The run's last step.
    end: u32,
    /// `--lose-device-at`: steps after whose submission the device is
    /// destroyed, each once.
    lose_at: Vec<u32>,
    losses: u32,
    in_a_row: u32,
    /// The furthest step a loss happened at.
    lost_at: u32,
}

impl Recovery {
    pub fn new(
        snapshot: Snapshot,
        options: GpuOptions,
        validation_batches: usize,
        end: u32,
        lose_at: Vec<u32>,
    ) -> Recovery {
        Recovery {
            snapshot,
            options,
            validation_batches,
            end,
            lose_at,
            losses: 0,
            in_a_row: 0,
            lost_at: 0,
        }
    }

    /// Devices lost (and replaced) so far.
    pub fn losses(&self) -> u32 {
        self.losses
    }

    /// The run was saved: go back to this from now on.
    pub fn saved(&mut self, snapshot: Snapshot) {
        self.snapshot = snapshot;
    }

    /// `--lose-device-at`: destroys the device once `step` has been
    /// submitted, as a driver reset or an unplugged GPU would lose it.
    /// `Device::destroy` is WebGPU's way to lose a device on purpose; wgpu
    /// marks the device invalid and, as the spec says, loses it once the
    /// work already queued is done: the next poll that finds the queue empty
    /// calls the lost callback with the reason `Destroyed`. The wait here
    /// makes that poll happen now rather than at a later read-back, so the
    /// loss is seen at a known step: the next submission's health check is
    /// `Error::DeviceLost` (as it would be after a real loss, which wgpu
    /// reports as soon as a driver call returns `DEVICE_LOST`).
    pub fn inject(&mut self, run: &Run, step: u32) {
        if let Some(i) = self.lose_at.iter().position(|&s| s == step) {
            self.lose_at.swap_remove(i);
            let device = &run.trainer.gpu.device;
            device.destroy();
            let _ = device.poll(wgpu::PollType::wait_indefinitely());
        }
    }

    /// After `error` from `run`: where the device was lost, the run rebuilt
    /// from the snapshot on a new device, its next step the snapshot's + 1;
    /// any other error as it is. Gives up (with `error`) after
    /// `MAX_LOSSES_IN_A_ROW` losses without progress, or where no new
    /// device can be made, saying where the run can be resumed from.
    pub async fn recover(&mut self, error: Error, run: Run) -> Result<Run> {
        // a loss may surface as another error first (a write or submission
        // refused by the invalid device): the callback tells
        let reason = match &error {
            Error::DeviceLost { reason } => reason.clone(),
            _ => match run.trainer.gpu.lost_reason() {
                Some(reason) => reason,
                None => return Err(error),
            },
        };
        let lost_at = run.trainer.steps();
        self.losses += 1;
        self.in_a_row = match self.in_a_row > 0 && lost_at <= self.lost_at {
            true => self.in_a_row + 1,
            false => 1,
        };
        self.lost_at = self.lost_at.max(lost_at);
        let from = self.snapshot.step;
        if self.in_a_row >= MAX_LOSSES_IN_A_ROW {
            eprintln!(
                "train: the GPU device was lost at step {lost_at} ({reason}), {} times in a row without getting past step {}: giving up; {}",
                self.in_a_row,
                self.lost_at,
                self.resume_hint()
            );
            return Err(error);
        }
        let repeating = lost_at.saturating_sub(from);
        eprintln!(
            "train: the GPU device was lost at step {lost_at} ({reason}); resuming from step {from} ({}), repeating {repeating} step{}",
            self.snapshot
                .file
                .as_ref()
                .map_or("the snapshot in memory".into(), |f| f.display().to_string()),
            if repeating == 1 { "" } else { "s" }
        );
        // the GEMM variants chosen on the lost device: nothing timed again
        // (they are checked against the new device's adapter and driver)
        let options = GpuOptions {
            kernel_config: Some(run.trainer.gpu.kernel_config()),
            ..self.options.clone()
        };
        let Run { trainer, text, .. } = run;
        drop(trainer);
        let rebuilt = async {
            let gpu = Gpu::new(&options).await?;
            let checkpoint = Checkpoint::from_bytes(&self.snapshot.bytes)?;
            Run::resume(&gpu, &checkpoint, text, self.validation_batches).await
        };
        rebuilt.await.inspect_err(|_| {
            eprintln!(
                "train: the run could not be rebuilt on a new device; {}",
                self.resume_hint()
            )
        })
    }

    /// Where the run can be taken up again by hand.
    fn resume_hint(&self) -> String {
        let s = &self.snapshot;
        match &s.file {
            Some(file) => format!(
                "continue from step {} with `webtrain train --resume {} --steps {}`",
                s.step,
                file.display(),
                self.end - s.step
            ),
            None => "no checkpoint of the run was written (--out FILE --save-every N writes them)"
                .into(),
        }
    }
}
