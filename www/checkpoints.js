// The Checkpoints panel: Save downloads the run as one .safetensors file,
// Export downloads the model as a zipped Hugging Face folder (transformers'
// LlamaForCausalLM loads it), Load resumes a checkpoint (the charts go on
// from its step), Import starts a run from a Hugging Face folder (picked,
// zipped or dropped) to fine-tune or evaluate, autosave writes a
// checkpoint to the origin-private storage every N steps, and a page that
// finds one there offers to restore it.

import { $, bytes, count, attempt, showError, clearError } from './dom.js';
import { state, subscribe, busy } from './state.js';
import { adoptRun, every, on } from './train-panel.js';
import { changes } from './setup.js';
import { modelFolder } from './hf-folder.js';
import { checkCheckpoint, checkModelFiles, checkZip } from './limits.js';
import { taskLabel } from './tasks.js';

let worker;

function download(buffer, name, type = 'application/octet-stream') {
  const url = URL.createObjectURL(new Blob([buffer], { type }));
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/// "tiny-step40": the run's name and step, for file names.
const runLabel = () => `${state.progress.name}-step${state.progress.submitted}`;

async function save() {
  const name = `webtrain-${runLabel()}.safetensors`;
  const buffer = await busy('save', () => attempt($('checkpoint-error'), () => worker.call('checkpoint.save')));
  if (!buffer) return;
  download(buffer, name);
  $('checkpoint-status').textContent = `Saved ${name} (${bytes(buffer.byteLength)}).`;
}

async function exportHf() {
  const folder = `webtrain-${runLabel()}-hf`;
  const buffer = await busy('export', () => attempt($('checkpoint-error'), () => worker.call('hf.export', { folder })));
  if (!buffer) return;
  download(buffer, `${folder}.zip`, 'application/zip');
  $('checkpoint-status').textContent = `Exported ${folder}.zip (${bytes(buffer.byteLength)}): unzip it, then `
    + `LlamaForCausalLM.from_pretrained("${folder}") loads the model.`;
}

/// "webtrain-tiny-step40.safetensors" → "tiny"
function runNameOf(fileName) {
  return fileName.replace(/\.safetensors$/i, '').replace(/^webtrain-/, '').replace(/-step\d+$/, '') || 'loaded';
}

async function load(file) {
  const info = await busy('load', () => attempt($('checkpoint-error'), async () => {
    checkCheckpoint(file.name, file.size); // before it is read
    const data = await file.arrayBuffer();
    return worker.call('checkpoint.load', { bytes: data }, undefined, [data]);
  }));
  if (!info) return;
  adoptRun(info, { name: runNameOf(file.name), origin: 'loaded' });
  $('checkpoint-status').textContent = `Loaded ${file.name}: ${ofTask(info)}step ${count(info.step)}; training goes on from there.`;
}

/// "the task reverse (len 8), " for a task run's info.
const ofTask = (info) => (info.task ? `the task ${taskLabel(info.task)}, ` : '');

/// A new run from a Hugging Face folder: `read()` checks the files' sizes
/// (www/limits.js), then reads them and resolves with {payload: {files:
/// {path: ArrayBuffer}} or {zip: ArrayBuffer}, transfer}; `name` names the
/// run. A refusal, the page's or the worker's, leaves the run as it was.
async function importHf(name, read) {
  const info = await busy('load', () => attempt($('checkpoint-error'), async () => {
    const { payload, transfer } = await read();
    const wanted = await changes();
    return worker.call('hf.import', { ...payload, changes: wanted }, undefined, transfer);
  }));
  if (!info) {
    $('checkpoint-status').textContent = `Did not import ${name}: the reason is above.${state.run ? ' The run from before goes on.' : ''}`;
    return;
  }
  adoptRun(info, { name, origin: 'imported' });
  $('checkpoint-status').textContent = `Imported ${name}: ${count(info.parameters)} parameters on ${count(info.train_tokens)} training tokens. `
    + 'Validate scores it on the held-out text (Train panel); Start fine-tunes it.';
}

/// Says an import of `name` began (at once, before any file is read): a
/// status, and the last refusal cleared.
function announce(name) {
  $('checkpoint-status').textContent = `Importing ${name}…`;
  clearError($('checkpoint-error'));
}

/// Imports the model folder among `pairs` of [path, File] (only its files
/// are read); `name` names the run.
async function importEntries(pairs, name) {
  announce(name);
  await importHf(name, async () => {
    const chosen = Object.entries(modelFolder(pairs));
    checkModelFiles(chosen.map(([file, f]) => [file, f.size]));
    const files = Object.fromEntries(await Promise.all(chosen.map(async ([file, f]) => [file, await f.arrayBuffer()])));
    return { payload: { files }, transfer: Object.values(files) };
  });
}

/// Files picked with the folder picker (their paths start with the folder's name).
function importPicked(files) {
  const folder = files[0].webkitRelativePath.split('/')[0] || 'transformers folder';
  return importEntries(files.map((f) => [f.webkitRelativePath || f.name, f]), folder);
}

async function importZip(file) {
  announce(file.name);
  await importHf(file.name.replace(/\.zip$/i, ''), async () => {
    checkZip(file.name, file.size); // read whole: its entries' sizes are checked in the worker
    const zip = await file.arrayBuffer();
    return { payload: { zip }, transfer: [zip] };
  });
}

/// A dropped folder's own files (not its subfolders'), as [path, File].
async function folderFiles(dir) {
  const reader = dir.createReader();
  const entries = [];
  for (;;) { // Chrome hands over at most 100 entries a call
    const batch = await new Promise((resolve, reject) => reader.readEntries(resolve, reject));
    if (batch.length === 0) break;
    entries.push(...batch);
  }
  const files = entries.filter((e) => e.isFile);
  return Promise.all(files.map((e) => new Promise((resolve, reject) => e.file((f) => resolve([`${dir.name}/${f.name}`, f]), reject))));
}

/// A drop on the panel: a checkpoint loads; a transformers folder, its
/// .zip or its files import. Not while training or loading: like the
/// buttons, a drop waits for a pause.
async function dropped(e) {
  e.preventDefault();
  if (state.training || state.busy.has('load') || state.busy.has('create')) {
    return showError($('checkpoint-error'), new Error('pause the training (and let loading finish) before dropping a checkpoint or a model'));
  }
  const dir = [...e.dataTransfer.items].map((i) => i.webkitGetAsEntry?.()).find((entry) => entry?.isDirectory);
  if (dir) return importEntries(await folderFiles(dir), dir.name);
  const files = [...e.dataTransfer.files];
  const zip = files.find((f) => /\.zip$/i.test(f.name));
  if (zip) return importZip(zip);
  if (files.length === 1 && /\.safetensors$/i.test(files[0].name)) return load(files[0]);
  if (files.length > 0) return importEntries(files.map((f) => [f.name, f]), 'transformers folder');
}

/// The session saved the run (its `saved` event); the worker writes it to
/// storage in the background, and tells how the last write went with the
/// next save (a failed write does not stop the training).
function autosaved({ step, writeError }) {
  if (writeError) showError($('checkpoint-error'), new Error(`autosave failed: ${writeError}`));
  $('checkpoint-status').textContent = `Autosaved at step ${count(step)} (${new Date().toLocaleTimeString()}), in this browser's storage.`;
}

/// Offers the run autosaved in this browser, if there is one.
export async function offerRestore() {
  let stored = null;
  try {
    stored = await worker.call('checkpoint.stored');
  } catch {
    return; // no storage: nothing to offer
  }
  if (!stored) return;
  const at = new Date(stored.saved_at).toLocaleString();
  $('restore-text').textContent = `Restore the run autosaved at ${at}`
    + `${stored.step !== undefined ? ` (step ${count(stored.step)})` : ''} — ${bytes(stored.bytes)}?`;
  $('restore-offer').hidden = false;
}

async function restore() {
  const info = await busy('load', () => attempt($('checkpoint-error'), () => worker.call('checkpoint.restore')));
  if (!info) return;
  $('restore-offer').hidden = true;
  adoptRun(info, { name: 'autosave', origin: 'restored' });
  $('checkpoint-status').textContent = `Restored the autosaved run: ${ofTask(info)}step ${count(info.step)}.`;
}

export function initCheckpoints(w) {
  worker = w;
  $('save').addEventListener('click', save);
  $('export-hf').addEventListener('click', exportHf);
  $('load-input').addEventListener('change', async (e) => {
    const file = e.target.files[0];
    e.target.value = '';
    if (file) await load(file);
  });
  $('hf-folder-input').addEventListener('change', async (e) => {
    const files = [...e.target.files];
    e.target.value = '';
    if (files.length > 0) await importPicked(files);
  });
  $('hf-zip-input').addEventListener('change', async (e) => {
    const file = e.target.files[0];
    e.target.value = '';
    if (file) await importZip(file);
  });
  const panel = $('checkpoints');
  panel.addEventListener('dragover', (e) => e.preventDefault());
  panel.addEventListener('drop', dropped);
  $('restore').addEventListener('click', restore);
  every('saveEvery', 'autosave-every');
  on('saved', autosaved);
  subscribe((s) => {
    const loading = s.busy.has('load') || s.busy.has('create');
    $('save').disabled = !s.run || s.busy.has('save') || loading;
    $('export-hf').disabled = !s.run || s.busy.has('export') || loading;
    for (const id of ['load-input', 'hf-folder-input', 'hf-zip-input']) {
      $(id).disabled = s.training || loading;
      document.querySelector(`label[for="${id}"]`).dataset.disabled = $(id).disabled;
    }
    $('restore').disabled = s.training || loading;
  });
}
