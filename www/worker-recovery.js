// A lost GPU device, in the training worker. The session (run::Session)
// rebuilds the run from its snapshot on a new device by itself while it
// trains; a lost device seen by any other call is handed to it here
// (`recover`). Where the session gives up (its error has `gone` set), the
// run is dropped and its snapshot kept in origin-private storage for a
// reload to restore. What the page hears is protocol.js's Failure.

import { deviceLost } from '../pkg/webtrain.js';
import { currentTrainer, replaceTrainer } from './worker-run.js';
import { keepForReload } from './worker-storage.js';

/// The device's lost promise may settle just after the failed call.
const LOST_SETTLE_MS = 50;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const messageOf = (error) => (error instanceof Error ? error.message : String(error));

/// The Failure a failed call answers: its message, and where the device
/// was lost, the run rebuilt from its snapshot (`recovered`) or why it
/// could not be (`gone`).
export async function failureOf(error) {
  const trainer = currentTrainer();
  if (!trainer) return { error: messageOf(error) };
  if (error?.gone) return dropRun(trainer, error);
  const reason = await lostReason(error);
  if (!reason) return { error: messageOf(error) };
  try {
    const { at, from } = await trainer.recover(reason);
    return {
      error: `the GPU device was lost at step ${at}; the run resumed from its snapshot of step ${from}`,
      recovered: { lostAt: at, resumedFrom: from, reason, info: trainer.info() },
    };
  } catch (e) {
    return e?.gone ? dropRun(trainer, e) : { error: messageOf(e) };
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

/// The session gave up on the run (`error.gone`: {lostAt, snapshotStep,
/// reason}): the run is dropped, its snapshot kept in storage for a reload
/// where storage takes it; the message says which.
async function dropRun(trainer, error) {
  const snapshot = trainer.snapshot();
  replaceTrainer(null);
  const kept = snapshot ? await keepForReload(snapshot.bytes, snapshot.step) : false;
  const next = kept
    ? `The run as it was at step ${snapshot.step} is kept in this browser's storage: reload the page to restore it.`
    : snapshot
      ? `This browser's storage refused the run's snapshot of step ${snapshot.step}: reload the page and create the model again.`
      : 'Create the model again.';
  return { error: `${error.message}. ${next}`, gone: error.gone };
}
