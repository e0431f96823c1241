//! `Session`: the training loop both front ends drive. It owns the run,
//! trains it in calls of `advance(n)` and does what falls due at each step
//! (`Cadence`: validate, save, inspect, measure ranges, the end); it keeps
//! a recent copy of the run in memory (`Snapshots`, at most 2% of the
//! time), and where the GPU device is lost it rebuilds the run from that
//! copy on a new device and goes on (`Losses`: one retry policy). What
//! happened comes back as `Event`s: the CLI prints them as JSON lines, the
//! page's worker forwards them to the page, which only draws.

use serde::{Deserialize, Serialize};

use super::{Run, Validation};
use crate::checkpoint::Checkpoint;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::inspect::ranges::{self, FormatRange, Range};
use crate::inspect::{Inspection, Inspector};
use crate::model::Recipe;
use crate::optim::OptimState;
use crate::train::{StepStats, now_s};

/// Where a session gets a device to rebuild on after a loss, and how it
/// waits between tries: a front end's own (the CLI makes one as it made the
/// first; the page's worker also keeps it as its device).
#[allow(async_fn_in_trait)] // used as a generic, never as `dyn`
pub trait Devices {
    /// A device in place of `lost`, given `lost`'s GEMM choices (nothing
    /// timed again: the tuner checks them against the new device).
    async fn replace(&self, lost: &Gpu) -> Result<Gpu>;
    async fn sleep(&self, ms: u32);
}

/// What falls due at which step: each `*_every` a step count (0: never).
/// The page sends it with each call, camelCase, fields left out are 0.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Cadence {
    pub validate_every: u32,
    pub save_every: u32,
    /// An inspected step (`Inspector::step`): update survival, softmax tails.
    pub inspect_every: u32,
    /// Every tensor's value range on the first held-out batch (`ranges`).
    pub measure_every: u32,
    /// The last step to train: `advance` stops there, and validates (and,
    /// with `save_at_end`, saves) once it is trained.
    pub end: Option<u32>,
    pub save_at_end: bool,
}

const fn every(n: u32, step: u32) -> bool {
    n > 0 && step.is_multiple_of(n)
}

/// What a call of the session did, in order.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// A step completed (steps complete up to two after their submission).
    Stepped(StepStats),
    Inspected(Inspection),
    /// Every tensor's range, and the formats' ranges to draw them against.
    Measured {
        step: u32,
        ranges: Vec<Range>,
        formats: &'static [FormatRange],
    },
    Validated {
        step: u32,
        validation: Validation,
    },
    /// The run saved at `step` (the caller keeps `bytes`: a file, storage).
    Saved {
        step: u32,
        #[serde(skip)]
        bytes: Vec<u8>,
    },
    /// A snapshot taken, or a save kept as one.
    Snapshot(SnapshotReport),
    /// The device was lost after step `at` had been submitted; the run was
    /// rebuilt on a new one from its snapshot of step `from`.
    Lost {
        at: u32,
        reason: String,
        from: u32,
    },
}

/// The run at a step, as checkpoint bytes (`Run::save`).
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub step: u32,
    pub bytes: Vec<u8>,
}

/// The latest snapshot, the interval and what snapshots cost so far.
#[derive(Clone, Debug, Serialize)]
pub struct SnapshotReport {
    pub step: u32,
    pub every: u32,
    pub ms: f64,
    /// Of the session's time training and snapshotting.
    pub share: f64,
    pub bytes: usize,
}

/// Taking a snapshot waits for the steps in flight and reads the state
/// back, so the interval follows what the last one cost and what a step
/// costs now: snapshots take at most `COST_SHARE` of the training time,
/// every `MIN_EVERY` to `MAX_EVERY` steps. (Fixed when a snapshot is taken,
/// the first interval would be set before any step was timed.)
struct Snapshots {
    latest: Option<Snapshot>,
    last_s: f64,
    snapshot_s: f64,
    step_s: f64,
    steps: u32,
}

impl Snapshots {
    const COST_SHARE: f64 = 0.02;
    const MIN_EVERY: u32 = 10;
    const MAX_EVERY: u32 = 1000;

    fn new() -> Snapshots {
        Snapshots {
            latest: None,
            last_s: 0.0,
            snapshot_s: 0.0,
            step_s: 0.0,
            steps: 0,
        }
    }

    /// Steps between snapshots at the costs measured so far.
    fn every(&self) -> u32 {
        if self.steps == 0 || self.step_s <= 0.0 {
            return Self::MIN_EVERY;
        }
        let per_step = self.step_s / self.steps as f64;
        let every = (self.last_s / (Self::COST_SHARE * per_step)).ceil();
        (every.min(Self::MAX_EVERY as f64) as u32).max(Self::MIN_EVERY)
    }

    fn due(&self, step: u32) -> bool {
        self.latest
            .as_ref()
            .is_none_or(|s| step.saturating_sub(s.step) >= self.every())
    }

    /// Keeps `snapshot`, which took `seconds`.
    fn keep(&mut self, snapshot: Snapshot, seconds: f64) -> SnapshotReport {
        self.latest = Some(snapshot);
        self.last_s = seconds;
        self.snapshot_s += seconds;
        self.report().expect("just kept")
    }

    fn report(&self) -> Option<SnapshotReport> {
        let latest = self.latest.as_ref()?;
        let total = self.step_s + self.snapshot_s;
        Some(SnapshotReport {
            step: latest.step,
            every: self.every(),
            ms: 1e3 * self.last_s,
            share: if total > 0.0 {
                self.snapshot_s / total
            } else {
                0.0
            },
            bytes: latest.bytes.len(),
        })
    }
}

/// The retry policy: a run gives up after `MAX_IN_A_ROW` losses without
/// progress (the first, then each at or before the furthest step a loss
/// came at), or where no new device comes after `DEVICE_WAITS_MS` (a
/// browser may offer no adapter for a moment after its GPU process crashed).
#[derive(Default)]
struct Losses {
    total: u32,
    in_a_row: u32,
    furthest: u32,
}

impl Losses {
    const MAX_IN_A_ROW: u32 = 3;
    const DEVICE_WAITS_MS: [u32; 2] = [5_000, 10_000];

    /// Counts a loss at step `at`: whether the run may try again.
    fn count(&mut self, at: u32) -> bool {
        self.total += 1;
        self.in_a_row = match self.in_a_row > 0 && at <= self.furthest {
            true => self.in_a_row + 1,
            false => 1,
        };
        self.furthest = self.furthest.max(at);
        self.in_a_row < Self::MAX_IN_A_ROW
    }
}

pub struct Session<D: Devices> {
    pub run: Run,
    /// Looks into the inspected steps (and the page's Inspect panel's).
    pub inspector: Inspector,
    devices: D,
    snapshots: Snapshots,
    losses: Losses,
    /// The step validated last.
    validated_at: Option<u32>,
    /// The retry policy gave up (`Error::RunLost`): nothing is rebuilt again.
    gave_up: bool,
    /// Tests: steps after whose submission the device is destroyed, each once.
    lose_at: Vec<u32>,
}

impl<D: Devices> Session<D> {
    pub fn new(run: Run, inspector: Inspector, devices: D) -> Session<D> {
        Session {
            run,
            inspector,
            devices,
            snapshots: Snapshots::new(),
            losses: Losses::default(),
            validated_at: None,
            gave_up: false,
            lose_at: vec![],
        }
    }

    /// The run is `snapshot` already (a checkpoint it was resumed from):
    /// no snapshot of it need be taken.
    pub fn starting_from(mut self, snapshot: Snapshot) -> Session<D> {
        self.snapshots.latest = Some(snapshot);
        self
    }

    /// Tests: destroys the device once each of `steps` has been submitted.
    pub fn lose_device_after(&mut self, steps: Vec<u32>) {
        self.lose_at = steps;
    }

    /// Devices lost (and replaced) so far.
    pub fn losses(&self) -> u32 {
        self.losses.total
    }

    /// The run's latest snapshot (what a reload can restore when no device comes).
    pub fn snapshot(&self) -> Option<&Snapshot> {
        self.snapshots.latest.as_ref()
    }

    /// The run changed under its snapshot (a precision switch): the next
    /// call takes a new one.
    pub fn forget_snapshot(&mut self) {
        self.snapshots = Snapshots::new();
    }

    /// Trains up to `n` steps (never past `cadence.end`), with what falls
    /// due at each, and a snapshot first where the run has none. A lost
    /// device is replaced and the steps after the snapshot trained again
    /// (within the `n`); where the run cannot go on, the error says why.
    pub async fn advance(&mut self, n: u32, cadence: &Cadence) -> Result<Vec<Event>> {
        let mut events = Vec::new();
        if self.snapshots.latest.is_none() {
            let report = self.take_snapshot(&mut events).await?;
            events.push(Event::Snapshot(report));
        }
        for _ in 0..n {
            let step = self.run.trainer.steps() + 1;
            if cadence.end.is_some_and(|end| step > end) {
                break;
            }
            if let Err(e) = self.train(step, cadence, &mut events).await {
                events.push(self.recover(e).await?);
            }
        }
        Ok(events)
    }

    /// Every submitted step collected, and a validation unless the run was
    /// validated at this step: a pause.
    pub async fn pause(&mut self) -> Result<Vec<Event>> {
        let mut events = self.flush().await?;
        let step = self.run.trainer.steps();
        if self.validated_at != Some(step) && !self.run.validation.is_empty() {
            events.push(self.validate().await?);
        }
        Ok(events)
    }

    /// Every submitted step collected.
    pub async fn flush(&mut self) -> Result<Vec<Event>> {
        let done = self.run.trainer.flush().await?;
        Ok(done.into_iter().map(Event::Stepped).collect())
    }

    /// Switches the precision recipe and the optimizer state at a pause
    /// (`Trainer::reconfigure`: weights kept, moments converted); the
    /// steps still in flight come back, and the next call snapshots the
    /// converted run.
    pub async fn reconfigure(
        &mut self,
        precision: Recipe,
        state: OptimState,
    ) -> Result<Vec<Event>> {
        let done = self.run.trainer.reconfigure(precision, state).await?;
        self.forget_snapshot();
        Ok(done.into_iter().map(Event::Stepped).collect())
    }

    /// The held-out validation at the current weights.
    pub async fn validate(&mut self) -> Result<Event> {
        let validation = self.run.validate().await?;
        let step = self.run.trainer.steps();
        self.validated_at = Some(step);
        Ok(Event::Validated { step, validation })
    }

    /// Trains `step` and does what falls due at it.
    async fn train(&mut self, step: u32, cadence: &Cadence, events: &mut Vec<Event>) -> Result<()> {
        let started = now_s();
        let mut done = match every(cadence.inspect_every, step) {
            true => {
                let inspection = self.inspector.step(&mut self.run, false).await?;
                let done = inspection.steps.clone();
                events.push(Event::Inspected(inspection));
                done
            }
            false => self.run.step().await?,
        };
        self.inject_loss(step);
        let end = cadence.end == Some(step);
        if end || every(cadence.validate_every, step) {
            done.extend(self.run.trainer.flush().await?);
        }
        events.extend(done.into_iter().map(Event::Stepped));
        self.snapshots.step_s += now_s() - started;
        self.snapshots.steps += 1;

        if every(cadence.measure_every, step)
            && let Some(batch) = self.run.validation.first().cloned()
        {
            let t = &mut self.run.trainer;
            events.extend(t.flush().await?.into_iter().map(Event::Stepped));
            // every N steps while training: the histograms alone, not six
            // quantizer passes per tensor
            let ranges = ranges::measure(t, &batch, ranges::BlockFormats::Skipped).await?;
            let formats = &ranges::FORMATS;
            events.push(Event::Measured {
                step,
                ranges,
                formats,
            });
        }
        if (end || every(cadence.validate_every, step)) && !self.run.validation.is_empty() {
            events.push(self.validate().await?);
        }
        if (end && cadence.save_at_end) || every(cadence.save_every, step) {
            let started = now_s();
            let bytes = self.run.save().await?;
            let snapshot = Snapshot {
                step,
                bytes: bytes.clone(),
            };
            let report = self.snapshots.keep(snapshot, now_s() - started);
            events.push(Event::Saved { step, bytes });
            events.push(Event::Snapshot(report));
        } else if self.snapshots.due(step) {
            let report = self.take_snapshot(events).await?;
            events.push(Event::Snapshot(report));
        }
        Ok(())
    }

    /// A snapshot of the run after every step submitted; the steps it
    /// waited for go into `events`.
    async fn take_snapshot(&mut self, events: &mut Vec<Event>) -> Result<SnapshotReport> {
        let started = now_s();
        events.extend(self.flush().await?);
        let bytes = self.run.save().await?;
        let step = self.run.trainer.steps();
        Ok(self
            .snapshots
            .keep(Snapshot { step, bytes }, now_s() - started))
    }

    /// Destroys the device once `step` has been submitted where a test
    /// asked, as a driver reset or an unplugged GPU would lose it.
    /// `Device::destroy` is WebGPU's way to lose a device on purpose; wgpu
    /// loses it once the work already queued is done, at the next poll that
    /// finds the queue empty. The wait makes that poll happen now, so the
    /// loss is seen at a known step: the next submission's health check is
    /// `Error::DeviceLost`, as after a real loss.
    fn inject_loss(&mut self, step: u32) {
        if let Some(i) = self.lose_at.iter().position(|&s| s == step) {
            self.lose_at.swap_remove(i);
            let device = &self.run.trainer.gpu.device;
            device.destroy();
            let _ = device.poll(wgpu::PollType::wait_indefinitely());
        }
    }

    /// After `error`: where the device was lost, the run rebuilt from its
    /// snapshot on a new device (`Event::Lost`); any other error as it is.
    /// `Error::RunLost` where the retry policy gives up, no new device
    /// comes, or there is no snapshot to go back to.
    pub async fn recover(&mut self, error: Error) -> Result<Event> {
        // a loss may surface as another error first (a write or submission
        // refused by the invalid device): the lost callback tells
        let lost = self.run.trainer.gpu.lost_reason();
        match (error, lost) {
            (_, Some(reason)) | (Error::DeviceLost { reason }, None) => self.rebuild(reason).await,
            (error, None) => Err(error),
        }
    }

    /// After any call of the front end failed: where the device was lost
    /// (the one way a loss is told: its lost callback, given
    /// `LOST_SETTLE_MS` to arrive after the failure it caused), the run
    /// rebuilt as `recover` does; else nothing. After the session gave
    /// up, nothing: the run is gone.
    pub async fn after_failure(&mut self) -> Result<Option<Event>> {
        const LOST_SETTLE_MS: u32 = 50;
        if self.gave_up {
            return Ok(None);
        }
        if self.run.trainer.gpu.lost_reason().is_none() {
            self.devices.sleep(LOST_SETTLE_MS).await;
        }
        match self.run.trainer.gpu.lost_reason() {
            Some(reason) => self.rebuild(reason).await.map(Some),
            None => Ok(None),
        }
    }

    /// The run rebuilt from its snapshot on a new device after a loss for
    /// `reason`, within the retry policy.
    async fn rebuild(&mut self, reason: String) -> Result<Event> {
        let at = self.run.trainer.steps();
        let gave_up = |why: String, snapshot: Option<u32>| Error::RunLost {
            at,
            reason: reason.clone(),
            why,
            snapshot,
        };
        let Some(snapshot) = self.snapshots.latest.clone() else {
            self.gave_up = true;
            return Err(gave_up("the run had no snapshot yet".into(), None));
        };
        if !self.losses.count(at) {
            let why = format!(
                "{} times in a row without getting past step {}",
                self.losses.in_a_row, self.losses.furthest
            );
            self.gave_up = true;
            return Err(gave_up(why, Some(snapshot.step)));
        }
        let checkpoint = Checkpoint::from_bytes(&snapshot.bytes)?;
        let mut waits = Losses::DEVICE_WAITS_MS.iter();
        loop {
            let tried = async {
                let gpu = self.devices.replace(&self.run.trainer.gpu).await?;
                self.run.rewind(&gpu, &checkpoint).await
            };
            match (tried.await, waits.next()) {
                (Ok(()), _) => break,
                (Err(_), Some(&ms)) => self.devices.sleep(ms).await,
                (Err(e), None) => {
                    let why = format!("no new device could be had ({e})");
                    self.gave_up = true;
                    return Err(gave_up(why, Some(snapshot.step)));
                }
            }
        }
        self.validated_at = None;
        self.inspector.forget(); // its last weights were on the lost device
        Ok(Event::Lost {
            at,
            reason,
            from: snapshot.step,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_cost_at_most_their_share() {
        let mut s = Snapshots::new();
        assert!(s.due(0), "a run without a snapshot takes one");
        // a costly first snapshot, before any step was timed
        s.keep(
            Snapshot {
                step: 0,
                bytes: vec![0; 8],
            },
            0.5,
        );
        assert_eq!(s.every(), Snapshots::MIN_EVERY);
        s.step_s = 1.0;
        s.steps = 10; // 0.1 s a step: 0.5 s every 250 steps is 2%
        assert_eq!(s.every(), 250);
        assert!(!s.due(249) && s.due(250));
        s.keep(
            Snapshot {
                step: 250,
                bytes: vec![],
            },
            1e-6,
        );
        assert_eq!(s.every(), Snapshots::MIN_EVERY);
        s.keep(
            Snapshot {
                step: 260,
                bytes: vec![],
            },
            1e3,
        );
        assert_eq!(s.every(), Snapshots::MAX_EVERY);
    }

    #[test]
    fn three_losses_without_progress_give_up() {
        let mut l = Losses::default();
        assert!(l.count(5) && l.count(5), "a second loss at the same step");
        assert!(!l.count(4), "a third without getting past step 5");
        let mut l = Losses::default();
        assert!(l.count(5) && l.count(5) && l.count(6) && l.count(6));
        assert_eq!(l.total, 4);
    }

    #[test]
    fn cadence_counts_from_one() {
        assert!(!every(0, 0) && !every(0, 4) && every(4, 8) && !every(4, 6));
    }
}
