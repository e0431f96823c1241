// The training worker: loads the wasm module and answers the page's calls.
// WebGPU is available in workers, so the page's thread never blocks on it.

import init, { adapterInfo } from '../pkg/webtrain.js';

const ready = init();

const handlers = {
  adapter: () => adapterInfo(),
};

self.onmessage = async ({ data: { id, type, payload } }) => {
  try {
    await ready;
    const handler = handlers[type];
    if (!handler) throw new Error(`unknown request ${JSON.stringify(type)}`);
    self.postMessage({ id, result: await handler(payload) });
  } catch (e) {
    self.postMessage({ id, error: e instanceof Error ? e.message : String(e) });
  }
};
