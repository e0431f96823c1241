// The training worker: owns the wasm module, the GPU device, the text and
// the run, and answers the page's requests (www/protocol.js) one at a
// time, in arrival order (a queue, www/worker-queue.js, which the training
// loop's calls share: www/worker-train.js), so the page's thread only
// draws. The handlers are www/worker-handlers.js; a failure's answer, and
// the run rebuilt where the device was lost, www/worker-recovery.js.

import { checkRequestType, failureMessage, progressMessage, resultMessage } from './protocol.js';
import { ready } from './worker-run.js';
import { handlers } from './worker-handlers.js';
import { failureOf } from './worker-recovery.js';
import { enqueue } from './worker-queue.js';

self.onmessage = ({ data: { id, type, payload } }) => {
  enqueue(() => answer(id, type, payload));
};

/// Runs the request's handler and posts its progress and its answer.
async function answer(id, type, payload) {
  const progress = (value) => self.postMessage(progressMessage(id, value));
  try {
    await ready;
    checkRequestType(type);
    const result = await handlers[type](payload, progress);
    const transfer = result instanceof ArrayBuffer ? [result] : [];
    self.postMessage(resultMessage(id, result), transfer);
  } catch (e) {
    self.postMessage(failureMessage(id, await failureOf(e)));
  }
}
