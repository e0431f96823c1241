// The Checkpoints panel: Save downloads the run as one .safetensors file,
// Export downloads the model as a zipped Hugging Face folder (transformers'
// LlamaForCausalLM loads it), Load resumes a checkpoint (the charts go on
// from its step), autosave writes one to the origin-private storage every
// N steps, and a page that finds one there offers to restore it.

import { $, bytes, count, attempt, intValue, showError } from './dom.js';
import { subscribe, busy } from './state.js';
import { adoptRun, every, currentRunName, submittedSteps } from './train-panel.js';

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

async function save() {
  const name = `webtrain-${currentRunName()}-step${submittedSteps()}.safetensors`;
  const buffer = await busy('save', () => attempt($('checkpoint-error'), () => worker.call('checkpoint.save')));
  if (!buffer) return;
  download(buffer, name);
  $('checkpoint-status').textContent = `Saved ${name} (${bytes(buffer.byteLength)}).`;
}

async function exportHf() {
  const folder = `webtrain-${currentRunName()}-step${submittedSteps()}-hf`;
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
  const data = await file.arrayBuffer();
  const info = await busy('load', () => attempt($('checkpoint-error'), () =>
    worker.call('checkpoint.load', { bytes: data }, undefined, [data])));
  if (!info) return;
  adoptRun(info, { name: runNameOf(file.name) });
  $('checkpoint-status').textContent = `Loaded ${file.name}: step ${count(info.step)}; training goes on from there.`;
}

async function autosave() {
  try {
    const { step } = await worker.call('checkpoint.autosave');
    $('checkpoint-status').textContent = `Autosaved at step ${count(step)} (${new Date().toLocaleTimeString()}), in this browser's storage.`;
  } catch (e) {
    // a failed autosave must not stop the training
    showError($('checkpoint-error'), new Error(`autosave failed: ${e.message}`));
  }
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
  adoptRun(info, { name: 'autosave' });
  $('checkpoint-status').textContent = `Restored the autosaved run at step ${count(info.step)}.`;
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
  $('restore').addEventListener('click', restore);
  every(() => intValue('autosave-every') || 0, autosave);
  subscribe((s) => {
    const loading = s.busy.has('load') || s.busy.has('create');
    $('save').disabled = !s.run || s.busy.has('save') || loading;
    $('export-hf').disabled = !s.run || s.busy.has('export') || loading;
    $('load-input').disabled = s.training || loading;
    $('restore').disabled = s.training || loading;
    document.querySelector('label[for="load-input"]').dataset.disabled = $('load-input').disabled;
  });
}
