// Setup, step 1: the text. The built-in Brown corpus, or the user's files
// (picker or drag-and-drop). The worker checks each file; a refused one
// is listed with the worker's reason and the others stay.

import { $, el, bytes, attempt } from './dom.js';
import { state, busy, update, subscribe } from './state.js';

let worker;
/// Files the worker refused since the text last changed: [{name, bytes, message}].
let refused = [];

function render(files) {
  const list = $('corpus-files');
  list.textContent = '';
  for (const f of files) {
    list.append(el('li', { dataset: { name: f.name, state: 'ok' } }, [
      el('span', { className: 'name', textContent: f.name }), ` — ${bytes(f.bytes)}`,
    ]));
  }
  for (const f of refused) {
    list.append(el('li', { className: 'refused', dataset: { name: f.name, state: 'refused' } }, [
      el('span', { className: 'name', textContent: f.name }), ` — ${bytes(f.bytes)} — refused: `,
      el('span', { className: 'reason', textContent: f.message }),
    ]));
  }
  if (files.length === 0 && refused.length === 0) {
    list.append(el('li', { className: 'muted', textContent: 'No text yet: drop files above, or choose the built-in corpus.' }));
  }
  list.dataset.count = files.length;
}

/// The text changed: the worker dropped its tokenizer, so does the page.
function changed(files) {
  render(files);
  update({ tokenizer: null });
}

export function loadBuiltin() {
  return busy('corpus', () => attempt($('setup-error'), async () => {
    $('corpus-builtin').checked = true;
    refused = [];
    changed(await worker.call('corpus.builtin'));
  }));
}

async function useFiles() {
  await busy('corpus', () => attempt($('setup-error'), async () => {
    refused = [];
    changed(await worker.call('corpus.clear'));
  }));
}

async function addFiles(fileList) {
  const files = [...fileList];
  if (files.length === 0 || state.busy.has('corpus') || state.busy.has('tokenizer')) return;
  await busy('corpus', () => attempt($('setup-error'), async () => {
    if ($('corpus-builtin').checked) {
      $('corpus-user').checked = true;
      refused = [];
      await worker.call('corpus.clear');
    }
    for (const file of files) {
      const data = await file.arrayBuffer();
      try {
        await worker.call('corpus.add', { name: file.name, bytes: data }, undefined, [data]);
      } catch (e) {
        refused = refused.filter((r) => r.name !== file.name);
        refused.push({ name: file.name, bytes: file.size, message: e.message });
      }
    }
    changed(await worker.call('corpus.files'));
  }));
}

export function initCorpus(w) {
  worker = w;
  $('corpus-builtin').addEventListener('change', loadBuiltin);
  $('corpus-user').addEventListener('change', useFiles);
  $('corpus-input').addEventListener('change', async (e) => {
    await addFiles(e.target.files);
    e.target.value = ''; // the same file can be chosen again
  });
  const drop = $('corpus-drop');
  drop.addEventListener('dragover', (e) => {
    e.preventDefault();
    e.dataTransfer.dropEffect = 'copy';
    drop.dataset.over = 'true';
  });
  drop.addEventListener('dragleave', () => { drop.dataset.over = 'false'; });
  drop.addEventListener('drop', (e) => {
    e.preventDefault();
    drop.dataset.over = 'false';
    addFiles(e.dataTransfer.files);
  });
  // a file dropped anywhere else must not navigate away from the run
  window.addEventListener('dragover', (e) => e.preventDefault());
  window.addEventListener('drop', (e) => e.preventDefault());
  subscribe((s) => {
    const disabled = s.busy.has('corpus') || s.busy.has('tokenizer');
    for (const id of ['corpus-builtin', 'corpus-user', 'corpus-input']) $(id).disabled = disabled;
    drop.dataset.disabled = disabled;
  });
  render([]);
}
