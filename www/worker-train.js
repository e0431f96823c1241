// The training loop, in the worker: `train.start` starts a drive of the
// session (run::Drive: where the run stops is the library's rule), whose
// calls (about a third of a second of steps each) go through the worker's
// queue, so the page's other requests are answered between them. Each
// call's events go to the page unasked, as a stream (www/protocol.js); a
// save is written to storage in the background, its bytes kept here. At
// the end, or after `train.pause`, the session pauses (the steps in
// flight, a validation) and the stream says how the drive finished.

import { streamMessage } from './protocol.js';
import { currentTrainer, needTrainer } from './worker-run.js';
import { failureOf } from './worker-recovery.js';
import { enqueue } from './worker-queue.js';
import { autosaveInBackground, finishBackgroundWrite } from './worker-storage.js';

/// The drive under way: {pauseAsked}, or null.
let drive = null;

const post = (report) => self.postMessage(streamMessage(report));

/// Saves among `events` go to storage in the background (their bytes
/// dropped), each told the last background write's failure or null.
export async function keepSaves(events) {
  for (const e of events.filter((e) => e.event === 'saved')) {
    e.writeError = await finishBackgroundWrite().then(() => null, (error) => error.message);
    autosaveInBackground(e.bytes, e.step);
    delete e.bytes;
  }
  return events;
}

/// `train.start`: the drive begins; its calls follow in the queue.
export function start({ cadence }) {
  if (drive) throw new Error('the run is training already');
  needTrainer().start(cadence);
  drive = { pauseAsked: false };
  enqueue(() => next(drive));
  return null;
}

/// `train.cadence`: the drive's cadence from its next call on.
export function setCadence({ cadence }) {
  currentTrainer()?.set_cadence(cadence);
  return null;
}

/// `train.pause`: the drive stops before its next call.
export function pause() {
  if (drive) drive.pauseAsked = true;
  return null;
}

/// The drive's next call, and the one after it queued; or its end.
async function next(d) {
  const trainer = currentTrainer();
  if (d !== drive || !trainer) return;
  if (d.pauseAsked) return finish(trainer, 'paused');
  try {
    const { events, step, ended } = await trainer.drive();
    const lost = events.some((e) => e.event === 'lost');
    post({ events: await keepSaves(events), step, info: lost ? trainer.info() : null });
    if (ended) return finish(trainer, 'ended');
    enqueue(() => next(d));
  } catch (e) {
    drive = null;
    post({ finished: { stopped: 'failed', ...(await failureOf(e)) } });
  }
}

/// The drive over: the session pauses, and the page hears how it ended.
async function finish(trainer, stopped) {
  drive = null;
  try {
    const events = await keepSaves(await trainer.pause());
    post({ events, step: null, info: null });
    post({ finished: { stopped } });
  } catch (e) {
    post({ finished: { stopped: 'failed', ...(await failureOf(e)) } });
  }
}
