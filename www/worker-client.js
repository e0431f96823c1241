// Request/response over the training worker: call(type, payload, onProgress,
// transfer) -> Promise; the worker may send progress values before the answer.
// The worker owns the wasm module and the GPU device; this thread only draws.

/// `onFail(message)` hears that the worker could not start; later calls
/// reject at once. A call that lost the GPU device rejects with the error's
/// `recovered` (the run rebuilt from its snapshot) or `gone` (no new device)
/// set, after `onRecovered(recovered)` or `onGone(message, gone)` heard it.
export function startWorker({ onFail = () => {}, onRecovered = () => {}, onGone = () => {} } = {}) {
  const worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
  const pending = new Map();
  let nextId = 1;
  let failure = null;
  worker.onmessage = ({ data }) => {
    const entry = pending.get(data.id);
    if (!entry) return;
    if (data.progress !== undefined) {
      entry.onProgress?.(data.progress);
      return;
    }
    pending.delete(data.id);
    if (data.error === undefined) return entry.resolve(data.result);
    const error = Object.assign(new Error(data.error), { recovered: data.recovered, gone: data.gone });
    if (data.recovered) onRecovered(data.recovered);
    if (data.gone) onGone(data.error, data.gone);
    entry.reject(error);
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
    call(type, payload = {}, onProgress = undefined, transfer = []) {
      if (failure) return Promise.reject(failure);
      const id = nextId++;
      return new Promise((resolve, reject) => {
        pending.set(id, { resolve, reject, onProgress });
        worker.postMessage({ id, type, payload }, transfer);
      });
    },
  };
}
