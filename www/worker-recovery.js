// A lost GPU device, in the training worker: a call that failed because
// the device was lost rebuilds the run on a new device from its latest
// snapshot (www/snapshots.js), tried again for a while (a browser may offer
// no adapter for a moment after its GPU process crashed); where no new
// device can be had, the snapshot is kept in origin-private storage for a
// reload to restore. What the page hears is protocol.js's Failure.

import { deviceLost } from '../pkg/webtrain.js';
import { currentTrainer, replaceTrainer, snapshots } from './worker-run.js';
import { forgetGivenKernels, withKernels } from './worker-kernels.js';
import { keepForReload } from './worker-storage.js';

/// Waits between tries for a new device: tried after 5 and 15 s.
const RETRY_WAITS_MS = [5_000, 10_000];
/// The device's lost promise may settle just after the failed call.
const LOST_SETTLE_MS = 50;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const messageOf = (error) => (error instanceof Error ? error.message : String(error));

/// The Failure a failed call answers: its message, and where the device
/// was lost, the run rebuilt from its snapshot (`recovered`) or why it
/// could not be (`gone`).
export async function failureOf(error) {
  const message = messageOf(error);
  const reason = currentTrainer() ? await lostReason(error) : null;
  if (!reason) return { error: message };
  try {
    const recovered = await recover(reason);
    return {
      error: `the GPU device was lost at step ${recovered.lostAt}; the run resumed from its snapshot of step ${recovered.resumedFrom}`,
      recovered,
    };
  } catch (gone) {
    return { error: gone.message, gone: gone.gone };
  }
}

/// Why the device was lost, if `error` came from a lost device.
async function lostReason(error) {
  await sleep(LOST_SETTLE_MS);
  const reason = deviceLost();
  if (reason) return reason;
  const message = messageOf(error);
  return /GPU device was lost/i.test(message) ? message : null;
}

/// The step the run had reached when the device was lost, as far as is known.
function stepWhenLost(trainer, snapshot) {
  try {
    return trainer.info().step;
  } catch {
    return snapshot?.step ?? 0; // busy: the snapshot's step is all that is known
  }
}

/// The run rebuilt on a new device from its latest snapshot: resolves with
/// `recovered` ({lostAt, resumedFrom, reason, info}); throws an error with
/// `gone` ({lostAt, snapshotStep, reason}) where it cannot be.
async function recover(reason) {
  const trainer = currentTrainer();
  const snapshot = snapshots.latest;
  const lostAt = stepWhenLost(trainer, snapshot);
  if (!snapshot) {
    replaceTrainer(null);
    throw goneError(`the GPU device was lost at step ${lostAt} (${reason}) before the run's first snapshot: create the model again`,
      { lostAt, snapshotStep: null, reason });
  }
  forgetGivenKernels(); // the new device is given the kept kernel choices again
  try {
    await withRetries(() => withKernels(() => trainer.rewind(snapshot.bytes)));
  } catch (e) {
    throw await noNewDevice(e, { lostAt, snapshot, reason });
  }
  return { lostAt, resumedFrom: snapshot.step, reason, info: trainer.info() };
}

/// No new device could be had: the run is dropped, its snapshot kept in
/// storage for a reload where storage takes it; the error says which.
async function noNewDevice(cause, { lostAt, snapshot, reason }) {
  replaceTrainer(null);
  const kept = await keepForReload(snapshot.bytes, snapshot.step);
  return goneError(`the GPU device was lost at step ${lostAt} (${reason}) and no new device could be had (${cause.message}). `
    + (kept ? `The run as it was at step ${snapshot.step} is kept in this browser's storage: reload the page to restore it.`
      : `This browser's storage refused the run's snapshot of step ${snapshot.step}: reload the page and create the model again.`),
  { lostAt, snapshotStep: snapshot.step, reason });
}

function goneError(message, gone) {
  return Object.assign(new Error(message), { gone });
}

/// `make()`, tried again after each of RETRY_WAITS_MS.
async function withRetries(make) {
  for (const wait of RETRY_WAITS_MS) {
    try {
      return await make();
    } catch {
      await sleep(wait);
    }
  }
  return make();
}
