// The training worker: owns the wasm module, the GPU device, the text and
// the run, and answers the page's calls one at a time (a queue), so the
// page's thread only draws. Requests and what they resolve with:
//
//   adapter                         AdapterReport
//   corpus.builtin                  [{name, bytes}]   the Brown corpus replaces the files
//   corpus.add {name, bytes}        {name, bytes}     a refused file rejects, naming it
//   corpus.clear                    []
//   corpus.files                    [{name, bytes}]
//   tokenizer.train {vocab}         {vocab_size, fingerprint, tokens}; progress: fraction
//   run.defaults {preset}           spec: what a run of the preset starts from (Rust's RunSpec::preset)
//   run.settings                    [{field, kind, group, min?, max?, choices?, help}]: every setting (run::settings)
//   tasks                           [{name, title, summary, options: [{name, summary, default, min, max}]}]
//   task.defaults {name, options?}  spec: the task's preset for those options (a custom model, rows of
//                                   whole examples; `task` with every option set)
//   model.plan {spec}               {parameters, fits, reason, modes: [{precision, optim_state, memory}]}
//   train.create {spec}             run info (parameters, memory, tokens, config, task); a spec
//                                   with `task` trains on its examples: no text or tokenizer needed
//   train.step {n}                  {stats: [StepStats] completed meanwhile (two steps late),
//                                   snapshot: {step, every, ms, share, bytes} or null}
//   train.flush                     [StepStats] of every submitted step
//   train.validate                  {loss, accuracy, char_accuracy, examples: [{prompt, answer, predicted}]}
//                                   (task runs; text runs: accuracies null, no examples)
//   train.inspect                   {step, tensors (each with its step's survival), memory, steps, kernels, kernels_error}
//   train.reconfigure {precision, optimState}   run info (weights kept, state converted)
//   look {text, topK}               {step, precision, tokens, ids, heads, truncated, predictions,
//                                   attention: [Float32Array [heads, T, T] per layer]}
//   ranges                          {step, ranges: [{tensor, kind, layer, count, zeros, rms,
//                                   binades: [[e, count]], outside: [{format, overflow, …}]}],
//                                   formats: [{name, smallest, normal, largest}], steps: [StepStats]}
//   generate {prompt, temperature, topK, length, seed}   {text}; progress: {token, text, prob}
//   checkpoint.save                 ArrayBuffer (a .safetensors file)
//   hf.export {folder}              ArrayBuffer (a .zip of folder/: config.json, model.safetensors,
//                                   generation_config.json, tokenizer.json, for transformers)
//   checkpoint.load {bytes}         run info (a text run's, where no text is loaded, on the built-in
//                                   corpus; a task run's reads none)
//   hf.import {files | zip, spec}   run info: a new run of a Hugging Face Llama folder (files:
//                                   {path: ArrayBuffer}, or a .zip of the folder), spec's batch and schedule;
//                                   files (or what a zip's entries declare) beyond www/limits.js's caps
//                                   are refused before anything is unpacked or handed to the module
//   checkpoint.autosave             {step, stats} the step saved and the steps it waited for; the
//                                   write to origin-private storage goes on in the background
//   memory                          {gpuBuffers, gpuBytes, wasmBytes, heapBytes}: what this worker holds
//   checkpoint.stored               {step, bytes, saved_at} or null
//   checkpoint.restore              run info, from origin-private storage
//   kernels.get                     {config, pinned}: the GEMM variants chosen on this adapter
//   kernels.pin {json}              {config, pinned}: use this kernel config as it is (a run's reproducible speed)
//   kernels.unpin                   {config, pinned}: tune (or reuse what was tuned) again
//
// A call that fails because the GPU device was lost rebuilds the run from
// its latest snapshot on a new device (www/snapshots.js) and rejects with
// `recovered: {lostAt, resumedFrom, reason, info}`; where no new
// device can be had, with `gone: {lostAt, snapshotStep, reason}` after
// keeping the snapshot in origin-private storage for a reload.
//
// spec: {preset, model?, batch, seq, precision, optimState, lr, warmup,
//        steps, minLrRatio?, weightDecay?, clip?, beta1?, beta2?, eps?, seed?,
//        valFraction?, task?: {name, options: {key: integer}}} (run::RunSpec)

import { unzipSync, zipSync } from 'fflate';
import { isModelFile, modelFolder } from './hf-folder.js';
import { checkCheckpoint, checkModelFiles, checkZip } from './limits.js';
import { Snapshots } from './snapshots.js';
import init, { adapterInfo, deviceLost, kernelConfig, planModel, runDefaults, runSettings, setKernelConfig, taskDefaults, tasks, Data, Trainer } from '../pkg/webtrain.js';

const ready = init();
const gpuBuffers = countGpuBuffers();
const AUTOSAVE = 'autosave.safetensors';
const AUTOSAVE_STEP = 'autosave.json'; // {step}, so the offer can name it without reading the file
// The GEMM variants the tuner chose (a KernelConfig), and whether the user pinned them.
const KERNELS = 'kernels.json'; // {config, pinned}

let data = null;
let trainer = null;
const snapshots = new Snapshots();
/// The autosave being written to storage, if one is.
let writing = Promise.resolve();

function needTrainer() {
  if (!trainer) throw new Error('create a model first (Setup → Create model)');
  return trainer;
}

function corpus() {
  if (!data) data = new Data();
  return data;
}

async function autosaveFile(create, name = AUTOSAVE) {
  const root = await navigator.storage.getDirectory();
  return root.getFileHandle(name, { create });
}

async function writeFile(handle, contents) {
  const writable = await handle.createWritable();
  await writable.write(contents);
  await writable.close();
}

async function storedKernels() {
  try {
    return JSON.parse(await (await (await autosaveFile(false, KERNELS)).getFile()).text());
  } catch {
    return null; // nothing stored yet
  }
}

// Before a model is made: what earlier page loads chose on this adapter
// (the tuner ignores a config timed on another adapter, driver or kernels).
let kernelsGiven = false;
async function giveKernels() {
  if (kernelsGiven) return;
  kernelsGiven = true;
  const stored = await storedKernels();
  if (stored) await setKernelConfig(JSON.stringify(stored.config), stored.pinned);
}

// After: what the device chose, for the next page load.
async function keepKernels(pinned) {
  pinned ??= (await storedKernels())?.pinned ?? false;
  const kept = { config: JSON.parse(await kernelConfig()), pinned };
  await writeFile(await autosaveFile(true, KERNELS), JSON.stringify(kept));
  return kept;
}

// A model made with the device's kernel choices given first and kept after.
async function withKernels(make) {
  await giveKernels();
  const made = await make();
  await keepKernels();
  return made;
}

/// The model folder's files in `zip` ([path, Uint8Array]), unpacked only
/// once what their entries declare they unpack to is within the caps
/// (www/limits.js): fflate allocates each entry's declared size, and
/// never writes past it, so a zip that lies about a size gives a truncated
/// file, refused when read, never more memory. Only the first entry of a
/// path is taken.
function unzipModel(zip) {
  const data = new Uint8Array(zip);
  checkZip('the zip', data.byteLength);
  const declared = new Map();
  unzipSync(data, {
    filter: (f) => {
      if (isModelFile(f.name) && !declared.has(f.name)) declared.set(f.name, Math.max(f.size, f.originalSize));
      return false; // listed, not unpacked
    },
  });
  const chosen = Object.values(modelFolder([...declared.keys()].map((path) => [path, path])));
  checkModelFiles(chosen.map((path) => [path, declared.get(path)]), { unpacked: true });
  const wanted = new Set(chosen);
  return Object.entries(unzipSync(data, { filter: (f) => wanted.delete(f.name) }));
}

/// A loaded or imported run replaces the current one; the text is read
/// with its tokenizer from now on (not before: a refused run changes
/// nothing), unless it is a task run, whose characters are its own.
function adopt(next) {
  if (!next.info().task) corpus().setTokenizer(next.tokenizerJson());
  replaceTrainer(next);
  return trainer.info();
}

/// `next` (or none) is the run from now on; the old one is freed.
function replaceTrainer(next) {
  trainer?.free();
  trainer = next;
  snapshots.forget();
}

/// GPU buffers this worker's device holds: counted as made and as the
/// garbage collector frees them (wgpu's web backend leaves freeing to it).
function countGpuBuffers() {
  const count = { live: 0, bytes: 0 };
  if (typeof GPUDevice === 'undefined') return count;
  const freed = new FinalizationRegistry((size) => { count.live--; count.bytes -= size; });
  const createBuffer = GPUDevice.prototype.createBuffer;
  GPUDevice.prototype.createBuffer = function (descriptor) {
    const buffer = createBuffer.call(this, descriptor);
    count.live++;
    count.bytes += descriptor.size;
    freed.register(buffer, descriptor.size);
    return buffer;
  };
  return count;
}

/// Why the device was lost, if `error` came from a lost device.
async function lostReason(error) {
  // the device's lost promise may settle just after the failed call
  await new Promise((resolve) => setTimeout(resolve, 50));
  const reason = deviceLost();
  if (reason) return reason;
  const message = error instanceof Error ? error.message : String(error);
  return /GPU device was lost/i.test(message) ? message : null;
}

/// The run rebuilt on a new device from its latest snapshot.
async function recover(reason) {
  const snapshot = snapshots.latest;
  let lostAt = snapshot?.step ?? 0;
  try {
    lostAt = trainer.info().step;
  } catch { /* busy: the snapshot's step is all that is known */ }
  if (!snapshot) {
    replaceTrainer(null);
    const error = new Error(`the GPU device was lost at step ${lostAt} (${reason}) before the run's first snapshot: create the model again`);
    error.gone = { lostAt, snapshotStep: null, reason };
    throw error;
  }
  kernelsGiven = false; // the new device is given the kept kernel choices again
  try {
    await withRetries(() => withKernels(() => trainer.rewind(snapshot.bytes)));
  } catch (e) {
    replaceTrainer(null);
    await writing.catch(() => {});
    const kept = await storeAutosave(snapshot.bytes, snapshot.step).then(() => true, () => false);
    const error = new Error(`the GPU device was lost at step ${lostAt} (${reason}) and no new device could be had (${e.message}). `
      + (kept ? `The run as it was at step ${snapshot.step} is kept in this browser's storage: reload the page to restore it.`
        : `This browser's storage refused the run's snapshot of step ${snapshot.step}: reload the page and create the model again.`));
    error.gone = { lostAt, snapshotStep: snapshot.step, reason };
    throw error;
  }
  return { lostAt, resumedFrom: snapshot.step, reason, info: trainer.info() };
}

/// `make()`, tried again after 5 and 15 s: a browser may offer no adapter
/// for a moment after its GPU process crashed.
async function withRetries(make) {
  for (const wait of [5_000, 10_000]) {
    try {
      return await make();
    } catch {
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }
  return make();
}

async function storeAutosave(bytes, step) {
  await writeFile(await autosaveFile(true), bytes);
  await writeFile(await autosaveFile(true, AUTOSAVE_STEP), JSON.stringify({ step }));
}

const handlers = {
  adapter: () => adapterInfo(),

  'corpus.builtin': async () => {
    const response = await fetch('/corpus/brown.txt');
    if (!response.ok) throw new Error(`the built-in corpus could not be loaded (HTTP ${response.status}): run npm run build`);
    const bytes = new Uint8Array(await response.arrayBuffer());
    corpus().setBuiltin(bytes);
    return corpus().files();
  },
  'corpus.add': ({ name, bytes }) => corpus().addFile(name, new Uint8Array(bytes)),
  'corpus.clear': () => { corpus().clear(); return []; },
  'corpus.files': () => corpus().files(),

  'tokenizer.train': ({ vocab }, progress) => corpus().trainTokenizer(vocab, (fraction) => progress({ fraction })),

  'run.defaults': ({ preset }) => runDefaults(preset),
  'run.settings': () => runSettings(),
  tasks: () => tasks(),
  'task.defaults': ({ name, options }) => taskDefaults(name, options),
  'model.plan': ({ spec }) => planModel(spec),

  'train.create': async ({ spec }) => {
    replaceTrainer(await withKernels(() => Trainer.create(spec, corpus())));
    return trainer.info();
  },
  'train.step': async ({ n }) => {
    const t = needTrainer();
    if (snapshots.due(t.info().step)) await snapshots.take(t); // the run as made or loaded
    const t0 = performance.now();
    const stats = await t.step(n);
    snapshots.stepped(n, performance.now() - t0);
    if (snapshots.due(t.info().step)) stats.push(...await snapshots.take(t));
    return { stats, snapshot: snapshots.report() };
  },
  'train.flush': () => needTrainer().flush(),
  'train.validate': () => needTrainer().validate(),
  'train.inspect': () => needTrainer().inspect(),
  look: ({ text, topK }) => needTrainer().look(text, topK),
  ranges: () => needTrainer().ranges(),
  'train.reconfigure': async ({ precision, optimState }) => {
    await needTrainer().reconfigure(precision, optimState);
    snapshots.forget(); // the next step snapshots the converted run
    return trainer.info();
  },

  generate: ({ prompt, temperature, topK, length, seed }, progress) =>
    needTrainer().generate(prompt, { temperature, topK, length, seed }, (token, text, prob) => progress({ token, text, prob })),

  'checkpoint.save': async () => (await needTrainer().save()).buffer,
  'hf.export': async ({ folder }) => {
    const files = await needTrainer().exportHf();
    // stored, not deflated: f32 weights barely compress and would cost seconds
    const entries = Object.fromEntries(Object.entries(files).map(([name, bytes]) => [`${folder}/${name}`, [bytes, { level: 0 }]]));
    const zip = zipSync(entries);
    return zip.byteLength === zip.buffer.byteLength ? zip.buffer : zip.slice().buffer;
  },
  'checkpoint.load': async ({ bytes }) => {
    checkCheckpoint('the checkpoint', bytes.byteLength);
    const load = async () => adopt(await withKernels(() => Trainer.load(new Uint8Array(bytes), corpus())));
    if (corpus().files().length > 0) return load();
    // no text loaded: a task run reads none, and most text runs trained
    // on the built-in corpus
    try {
      return await load();
    } catch {
      await handlers['corpus.builtin']();
      return load();
    }
  },
  'hf.import': async ({ files, zip, spec }) => {
    // refused before the text is loaded or anything unpacked: the run that was there goes on
    const entries = zip ? unzipModel(zip) : Object.entries(files).map(([path, buffer]) => [path, new Uint8Array(buffer)]);
    if (!zip) checkModelFiles(entries.map(([path, bytes]) => [path, bytes.byteLength]));
    if (corpus().files().length === 0) await handlers['corpus.builtin']();
    return adopt(await withKernels(() => Trainer.importHf(modelFolder(entries), spec, corpus())));
  },
  'checkpoint.autosave': async () => {
    const previous = writing;
    writing = Promise.resolve();
    await previous; // the last write's failure is told here, once
    const t0 = performance.now();
    const stats = await needTrainer().flush();
    const bytes = await trainer.save();
    const { step } = trainer.info();
    snapshots.keep(bytes, step, performance.now() - t0);
    writing = storeAutosave(bytes, step);
    return { step, stats };
  },
  'checkpoint.stored': async () => {
    try {
      const file = await (await autosaveFile(false)).getFile();
      const { step } = JSON.parse(await (await (await autosaveFile(false, AUTOSAVE_STEP)).getFile()).text());
      return { step, bytes: file.size, saved_at: file.lastModified };
    } catch {
      return null; // nothing saved yet
    }
  },
  'checkpoint.restore': async () => {
    const file = await (await autosaveFile(false)).getFile();
    checkCheckpoint('the autosaved checkpoint', file.size);
    return handlers['checkpoint.load']({ bytes: await file.arrayBuffer() });
  },
  memory: async () => {
    globalThis.gc?.(); // where Chrome exposes it (--js-flags=--expose-gc): counts without garbage
    await new Promise((resolve) => setTimeout(resolve, 100)); // finalizers run after a collection
    return {
      gpuBuffers: gpuBuffers.live,
      gpuBytes: gpuBuffers.bytes,
      wasmBytes: (await ready).memory.buffer.byteLength,
      heapBytes: performance.memory?.usedJSHeapSize || null, // Chrome reports 0 in a worker
    };
  },
  'kernels.get': async () => { await giveKernels(); return keepKernels(); },
  'kernels.pin': async ({ json }) => {
    await setKernelConfig(json, true);
    return keepKernels(true);
  },
  'kernels.unpin': async () => {
    await setKernelConfig(await kernelConfig(), false);
    return keepKernels(false);
  },
};

// One call at a time, in arrival order.
let queue = Promise.resolve();

self.onmessage = ({ data: { id, type, payload } }) => {
  const progress = (value) => self.postMessage({ id, progress: value });
  queue = queue.then(async () => {
    try {
      await ready;
      const handler = handlers[type];
      if (!handler) throw new Error(`unknown request ${JSON.stringify(type)}`);
      const result = await handler(payload, progress);
      const transfer = result instanceof ArrayBuffer ? [result] : [];
      self.postMessage({ id, result }, transfer);
    } catch (e) {
      self.postMessage({ id, ...await failure(e) });
    }
  });
};

/// The answer to a failed call: its message, and where the device was
/// lost, the run rebuilt from its snapshot (or why it could not be).
async function failure(e) {
  const message = e instanceof Error ? e.message : String(e);
  const reason = trainer ? await lostReason(e) : null;
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
