// Request/response over the training worker (www/protocol.js):
// call(type, payload, onProgress, transfer) -> Promise; the worker may send
// progress values before the answer; listen(fn) hears the training loop's
// stream. The worker owns the wasm module, the GPU device and the training
// loop; this thread only draws.

import { failureError, requestMessage, responseKind } from './protocol.js';

/// `onFail(message)` hears that the worker could not start; later calls
/// reject at once, as does a call of a type the protocol does not define.
/// A call that lost the GPU device rejects with the error's `recovered`
/// (the run rebuilt from its snapshot) or `gone` (no new device) set, after
/// `onRecovered(recovered)` or `onGone(message, gone)` heard it.
export function startWorker({ onFail = () => {}, onRecovered = () => {}, onGone = () => {} } = {}) {
  const worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
  const pending = new Map();
  const listeners = new Set();
  let nextId = 1;
  let failure = null;

  /// The failure's error, after the page heard what became of the run.
  function failed(data) {
    if (data.recovered) onRecovered(data.recovered);
    if (data.gone) onGone(data.error, data.gone);
    return failureError(data);
  }

  worker.onmessage = ({ data }) => {
    if (data.stream !== undefined) {
      const { finished } = data.stream;
      if (finished?.recovered) onRecovered(finished.recovered);
      if (finished?.gone) onGone(finished.error, finished.gone);
      for (const fn of listeners) fn(data.stream);
      return;
    }
    const entry = pending.get(data.id);
    if (!entry) return;
    const kind = responseKind(data);
    if (kind === 'progress') {
      entry.onProgress?.(data.progress);
      return;
    }
    pending.delete(data.id);
    if (kind === 'result') entry.resolve(data.result);
    else entry.reject(failed(data));
  };
  // A worker that fails to load (no wasm support, a missing file) rejects
  // every outstanding call instead of leaving it hanging.
  worker.onerror = (event) => {
    const error = new Error(`the training worker failed to start: ${event.message || 'unknown error'}`);
    failure = error;
    for (const { reject } of pending.values()) reject(error);
    pending.clear();
    onFail(error.message);
  };
  return {
    /// `fn(report)` hears each report of the training loop (protocol.js's STREAM).
    listen(fn) {
      listeners.add(fn);
    },
    call(type, payload = {}, onProgress = undefined, transfer = []) {
      if (failure) return Promise.reject(failure);
      const id = nextId++;
      let message;
      try {
        message = requestMessage(id, type, payload);
      } catch (e) {
        return Promise.reject(e);
      }
      return new Promise((resolve, reject) => {
        pending.set(id, { resolve, reject, onProgress });
        worker.postMessage(message, transfer);
      });
    },
  };
}
