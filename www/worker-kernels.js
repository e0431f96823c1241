// The GEMM variants a device runs (a KernelConfig): what earlier page loads
// chose on this adapter is given to the wasm module before a model is made
// (the tuner ignores a config timed on another adapter, driver or kernels),
// and what the device chose is kept after, for the next page load.

import { kernelConfig, setKernelConfig } from '../pkg/webtrain.js';
import { storedKernels, storeKernels } from './worker-storage.js';

/// Whether the worker's device was given the kept config already (a device
/// made after a lost one is given the lost one's choices by the session).
let given = false;

/// Gives the kept config to the module, once per device.
export async function giveKernels() {
  if (given) return;
  given = true;
  const stored = await storedKernels();
  if (stored) await setKernelConfig(JSON.stringify(stored.config), stored.pinned);
}

/// Keeps what the device chose, pinned or not (by default as it was kept):
/// resolves with {config, pinned}.
export async function keepKernels(pinned) {
  pinned ??= (await storedKernels())?.pinned ?? false;
  const kept = { config: JSON.parse(await kernelConfig()), pinned };
  await storeKernels(kept);
  return kept;
}

/// A model made by `make()` with the device's kernel choices given first and kept after.
export async function withKernels(make) {
  await giveKernels();
  const made = await make();
  await keepKernels();
  return made;
}

/// Uses `json` (a KernelConfig) as it is: a run's reproducible speed.
export async function pinKernels(json) {
  await setKernelConfig(json, true);
  return keepKernels(true);
}

/// Tunes (or reuses what was tuned) again.
export async function unpinKernels() {
  await setKernelConfig(await kernelConfig(), false);
  return keepKernels(false);
}
