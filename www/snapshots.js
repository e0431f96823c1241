// The worker's recent copy of the run, to rebuild it after a lost device:
// a checkpoint's bytes (weights, optimizer state, step, data position),
// kept in memory. Taking one waits for the steps in flight and reads the
// state back, so it pauses training for a moment: the interval between
// snapshots is chosen from what the last one cost, so that they take at
// most COST_SHARE of the training time, within [MIN_EVERY, MAX_EVERY] steps.

const COST_SHARE = 0.02;
const MIN_EVERY = 10;
const MAX_EVERY = 1000;

export class Snapshots {
  constructor() {
    this.forget();
  }

  /// A new run (or a converted one): the old snapshot no longer applies.
  forget() {
    /// {bytes: Uint8Array, step}
    this.latest = null;
    this.every = MIN_EVERY;
    this.lastMs = 0;
    this.snapshotMs = 0;
    this.stepMs = 0;
    this.steps = 0;
  }

  /// `n` steps took `ms` of the worker's time.
  stepped(n, ms) {
    this.steps += n;
    this.stepMs += ms;
  }

  /// Whether the run at `step` should be snapshotted now.
  due(step) {
    return !this.latest || step - this.latest.step >= this.every;
  }

  /// Snapshots `trainer`; resolves with the stats of the steps it waited for.
  async take(trainer) {
    const t0 = performance.now();
    const stats = await trainer.flush();
    const bytes = await trainer.save();
    this.keep(bytes, trainer.info().step, performance.now() - t0);
    return stats;
  }

  /// Keeps `bytes`, the run at `step` after every step submitted (an
  /// autosave's checkpoint serves as a snapshot too), which took `ms`.
  keep(bytes, step, ms) {
    this.latest = { bytes, step };
    this.lastMs = ms;
    this.snapshotMs += ms;
    const perStep = this.steps > 0 ? this.stepMs / this.steps : 0;
    if (perStep > 0) {
      this.every = Math.min(MAX_EVERY, Math.max(MIN_EVERY, Math.ceil(ms / (COST_SHARE * perStep))));
    }
  }

  /// What the page shows: the snapshot's step, the interval, the last one's
  /// time and the share of the worker's time snapshots took so far.
  report() {
    if (!this.latest) return null;
    const total = this.stepMs + this.snapshotMs;
    return {
      step: this.latest.step,
      every: this.every,
      ms: this.lastMs,
      share: total > 0 ? this.snapshotMs / total : 0,
      bytes: this.latest.bytes.byteLength,
    };
  }
}
