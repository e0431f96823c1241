// The training worker's one queue: requests (www/worker.js) and the
// training loop's calls (www/worker-train.js) run one at a time, in the
// order they were queued, so a request made while the run trains is
// answered between two calls of the loop.

let queue = Promise.resolve();

/// Runs `fn` after everything queued before it.
export function enqueue(fn) {
  queue = queue.then(fn);
  return queue;
}
