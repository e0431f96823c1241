// The training worker's answer to each request of www/protocol.js: a
// handler per request type, `(payload, progress) => result`, working on
// the run (www/worker-run.js), the storage and the kernel config.

import { adapterInfo, checkRecipe, planModel, recipeBook, runDefaults, runSettings, taskDefaults, tasks, Trainer } from '../pkg/webtrain.js';
import { modelFolder } from './hf-folder.js';
import { checkCheckpoint, checkModelFiles } from './limits.js';
import { registerHandlers } from './protocol.js';
import { countGpuBuffers } from './gpu-device-patch.js';
import { requestSubgroupMatrices } from './matrix-units-patch.js';
import { adopt, corpus, needTrainer, ready, replaceTrainer } from './worker-run.js';
import { giveKernels, keepKernels, pinKernels, unpinKernels, withKernels } from './worker-kernels.js';
import { autosaveFile, storedAutosave } from './worker-storage.js';
import { keepSaves, pause, setCadence, start } from './worker-train.js';
import { unzipModel, zipFolder } from './worker-zip.js';

const gpuBuffers = countGpuBuffers();
requestSubgroupMatrices();

async function loadBuiltinCorpus() {
  const response = await fetch('/corpus/brown.txt');
  if (!response.ok) throw new Error(`the built-in corpus could not be loaded (HTTP ${response.status}): run npm run build`);
  const bytes = new Uint8Array(await response.arrayBuffer());
  corpus().setBuiltin(bytes);
  return corpus().files();
}

async function createRun({ spec }) {
  replaceTrainer(await withKernels(() => Trainer.create(spec, corpus())));
  return needTrainer().info();
}

/// Single step: `n` steps and what falls due at them (the session's
/// events), outside any drive.
async function step({ n, cadence }) {
  const trainer = needTrainer();
  const { events, step } = await trainer.advance(n, cadence);
  const lost = events.some((e) => e.event === 'lost');
  return { events: await keepSaves(events), step, info: lost ? trainer.info() : null };
}

async function reconfigure({ precision, optimState }) {
  await needTrainer().reconfigure(precision, optimState);
  return needTrainer().info();
}

async function loadCheckpoint({ bytes }) {
  checkCheckpoint('the checkpoint', bytes.byteLength);
  const load = async () => adopt(await withKernels(() => Trainer.load(new Uint8Array(bytes), corpus())));
  if (corpus().files().length > 0) return load();
  // no text loaded: a task run reads none, and most text runs trained
  // on the built-in corpus
  try {
    return await load();
  } catch {
    await loadBuiltinCorpus();
    return load();
  }
}

async function importHf({ files, zip, changes }) {
  // refused before the text is loaded or anything unpacked: the run that was there goes on
  const entries = zip ? unzipModel(zip) : Object.entries(files).map(([path, buffer]) => [path, new Uint8Array(buffer)]);
  if (!zip) checkModelFiles(entries.map(([path, bytes]) => [path, bytes.byteLength]));
  if (corpus().files().length === 0) await loadBuiltinCorpus();
  return adopt(await withKernels(() => Trainer.importHf(modelFolder(entries), changes, corpus())));
}

async function restoreAutosave() {
  const file = await autosaveFile();
  checkCheckpoint('the autosaved checkpoint', file.size);
  return loadCheckpoint({ bytes: await file.arrayBuffer() });
}

async function memory() {
  globalThis.gc?.(); // where Chrome exposes it (--js-flags=--expose-gc): counts without garbage
  await new Promise((resolve) => setTimeout(resolve, 100)); // finalizers run after a collection
  return {
    gpuBuffers: gpuBuffers.live,
    gpuBytes: gpuBuffers.bytes,
    wasmBytes: (await ready).memory.buffer.byteLength,
    heapBytes: performance.memory?.usedJSHeapSize || null, // Chrome reports 0 in a worker
  };
}

export const handlers = registerHandlers({
  adapter: () => adapterInfo(),

  'corpus.builtin': loadBuiltinCorpus,
  'corpus.add': ({ name, bytes }) => corpus().addFile(name, new Uint8Array(bytes)),
  'corpus.clear': () => { corpus().clear(); return []; },
  'corpus.files': () => corpus().files(),
  'tokenizer.train': ({ vocab }, progress) => corpus().trainTokenizer(vocab, (fraction) => progress({ fraction })),

  'run.defaults': ({ preset }) => runDefaults(preset),
  'run.settings': () => runSettings(),
  'recipe.book': () => recipeBook(),
  'recipe.check': ({ recipe }) => checkRecipe(recipe),
  tasks: () => tasks(),
  'task.defaults': ({ name, options }) => taskDefaults(name, options),
  'model.plan': ({ spec }) => planModel(spec),

  'train.create': createRun,
  'train.start': start,
  'train.pause': pause,
  'train.cadence': setCadence,
  'train.step': step,
  'train.flush': () => needTrainer().flush(),
  'train.validate': () => needTrainer().validate(),
  'train.inspect': () => needTrainer().inspect(),
  'train.reconfigure': reconfigure,
  look: ({ text, topK }) => needTrainer().look(text, topK),
  ranges: () => needTrainer().ranges(),
  generate: ({ prompt, temperature, topK, length, seed }, progress) =>
    needTrainer().generate(prompt, { temperature, topK, length, seed }, (token, text, prob) => progress({ token, text, prob })),

  'checkpoint.save': async () => (await needTrainer().save()).buffer,
  'hf.export': async ({ folder }) => zipFolder(folder, await needTrainer().exportHf()),
  'checkpoint.load': loadCheckpoint,
  'hf.import': importHf,
  'checkpoint.stored': storedAutosave,
  'checkpoint.restore': restoreAutosave,
  memory,

  'kernels.get': async () => { await giveKernels(); return keepKernels(); },
  'kernels.pin': ({ json }) => pinKernels(json),
  'kernels.unpin': unpinKernels,
});
