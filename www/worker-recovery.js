// A lost GPU device, in the training worker. The session (run::Session)
// tells a lost device one way, by the device's lost callback, and rebuilds
// the run from its snapshot on a new device by itself: while it trains (a
// `lost` event), and after any other call that failed on the lost device
// (the call's error has `recovered` set). Where the session gives up (its
// error has `gone` set), the run is dropped and its snapshot kept in
// origin-private storage for a reload to restore. What the page hears is
// protocol.js's Failure.

import { currentTrainer, replaceTrainer } from './worker-run.js';
import { keepForReload } from './worker-storage.js';

const messageOf = (error) => (error instanceof Error ? error.message : String(error));

/// The Failure a failed call answers: its message, and where the device
/// was lost, the run rebuilt from its snapshot (`recovered`, with the run's
/// info) or why it could not be (`gone`).
export async function failureOf(error) {
  const trainer = currentTrainer();
  if (!trainer) return { error: messageOf(error) };
  if (error?.gone) return dropRun(trainer, error);
  if (error?.recovered) return { error: messageOf(error), recovered: { ...error.recovered, info: trainer.info() } };
  return { error: messageOf(error) };
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
