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
//   model.plan {spec}               {parameters, fits, reason, modes: [{precision, optim_state, memory}]}
//   train.create {spec}             run info (parameters, memory, tokens, config)
//   train.step {n}                  [StepStats] completed meanwhile (two steps late)
//   train.flush                     [StepStats] of every submitted step
//   train.validate                  validation loss
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
//   checkpoint.load {bytes}         run info (loads the built-in corpus first if no text is loaded)
//   hf.import {files | zip, spec}   run info: a new run of a Hugging Face Llama folder (files:
//                                   {path: ArrayBuffer}, or a .zip of the folder), spec's batch and schedule
//   checkpoint.autosave             {step} after writing it to origin-private storage
//   checkpoint.stored               {step, bytes, saved_at} or null
//   checkpoint.restore              run info, from origin-private storage
//   kernels.get                     {config, pinned}: the GEMM variants chosen on this adapter
//   kernels.pin {json}              {config, pinned}: use this kernel config as it is (a run's reproducible speed)
//   kernels.unpin                   {config, pinned}: tune (or reuse what was tuned) again
//
// spec: {preset, model?, batch, seq, precision, optimState, lr, warmup,
//        steps, minLrRatio?, weightDecay?, clip?, beta1?, beta2?, eps?, seed?,
//        valFraction?} (run::RunSpec)

import { unzipSync, zipSync } from 'fflate';
import { isModelFile, modelFolder } from './hf-folder.js';
import init, { adapterInfo, kernelConfig, planModel, runDefaults, setKernelConfig, Data, Trainer } from '../pkg/webtrain.js';

const ready = init();
const AUTOSAVE = 'autosave.safetensors';
const AUTOSAVE_STEP = 'autosave.json'; // {step}, so the offer can name it without reading the file
// The GEMM variants the tuner chose (a KernelConfig), and whether the user pinned them.
const KERNELS = 'kernels.json'; // {config, pinned}

let data = null;
let trainer = null;

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

/// A loaded or imported run replaces the current one; the text is read
/// with its tokenizer from now on (not before: a refused run changes nothing).
function adopt(next) {
  corpus().setTokenizer(next.tokenizerJson());
  trainer?.free();
  trainer = next;
  return trainer.info();
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
  'model.plan': ({ spec }) => planModel(spec),

  'train.create': async ({ spec }) => {
    const next = await withKernels(() => Trainer.create(spec, corpus()));
    trainer?.free();
    trainer = next;
    return trainer.info();
  },
  'train.step': ({ n }) => needTrainer().step(n),
  'train.flush': () => needTrainer().flush(),
  'train.validate': () => needTrainer().validate(),
  'train.inspect': () => needTrainer().inspect(),
  look: ({ text, topK }) => needTrainer().look(text, topK),
  ranges: () => needTrainer().ranges(),
  'train.reconfigure': async ({ precision, optimState }) => {
    await needTrainer().reconfigure(precision, optimState);
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
    // a fresh page has no text yet: most runs train on the built-in corpus
    if (corpus().files().length === 0) await handlers['corpus.builtin']();
    return adopt(await withKernels(() => Trainer.load(new Uint8Array(bytes), corpus())));
  },
  'hf.import': async ({ files, zip, spec }) => {
    if (corpus().files().length === 0) await handlers['corpus.builtin']();
    const entries = zip ? Object.entries(unzipSync(new Uint8Array(zip), { filter: (f) => isModelFile(f.name) }))
      : Object.entries(files).map(([path, buffer]) => [path, new Uint8Array(buffer)]);
    return adopt(await withKernels(() => Trainer.importHf(modelFolder(entries), spec, corpus())));
  },
  'checkpoint.autosave': async () => {
    const bytes = await needTrainer().save();
    const { step } = trainer.info();
    await writeFile(await autosaveFile(true), bytes);
    await writeFile(await autosaveFile(true, AUTOSAVE_STEP), JSON.stringify({ step }));
    return { step };
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
    return handlers['checkpoint.load']({ bytes: await file.arrayBuffer() });
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
      self.postMessage({ id, error: e instanceof Error ? e.message : String(e) });
    }
  });
};
