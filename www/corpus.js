// Setup, step 1: the text. The built-in Brown corpus, or the user's files
// (picker or drag-and-drop). The worker checks each file; a refused one
// is listed with the worker's reason and the others stay.

import { $, el, bytes, attempt } from './dom.js';
import { state, busy, update, subscribe } from './state.js';

let worker;
/// Files the worker refused since the text last changed: [{name, bytes, message}].
let refused = [];
/// Files cut at the cap, by name: their whole size.
const cut = new Map();

/// The text the page takes, all files together: tokenizer training and the
/// worker's memory grow with it, and past this a tiny or small model
/// learns nothing more from it in a session.
export const TEXT_CAP = 64 * 1024 * 1024;
/// Bytes read at a time, so a big file shows its progress.
const CHUNK = 8 * 1024 * 1024;

/// The first `limit` bytes of `file` (all of it if smaller), read in
/// chunks with `onProgress(fraction)`; a cut file ends at its last line
/// break in the last MiB, else at a whole UTF-8 character.
async function readUpTo(file, limit, onProgress) {
  const take = Math.min(file.size, limit);
  const bytes = new Uint8Array(take);
  for (let at = 0; at < take; at += CHUNK) {
    bytes.set(new Uint8Array(await file.slice(at, Math.min(take, at + CHUNK)).arrayBuffer()), at);
    onProgress(Math.min(take, at + CHUNK) / take);
  }
  if (take === file.size) return bytes;
  const lineEnd = bytes.lastIndexOf(0x0a);
  if (lineEnd >= take - (1 << 20)) return bytes.slice(0, lineEnd + 1);
  let lead = take - 1;
  while (lead > 0 && (bytes[lead] & 0xc0) === 0x80) lead--; // back to the last character's first byte
  const length = bytes[lead] >= 0xf0 ? 4 : bytes[lead] >= 0xe0 ? 3 : bytes[lead] >= 0xc0 ? 2 : 1;
  return bytes.slice(0, lead + length <= take ? lead + length : lead);
}

function render(files) {
  const list = $('corpus-files');
  list.textContent = '';
  for (const f of files) {
    const whole = cut.get(f.name);
    list.append(el('li', { dataset: { name: f.name, state: whole ? 'cut' : 'ok' } }, [
      el('span', { className: 'name', textContent: f.name }), ` — ${bytes(f.bytes)}`,
      whole ? el('span', { className: 'cut', textContent: ` — its first ${bytes(f.bytes)} of ${bytes(whole)}: the page takes at most ${bytes(TEXT_CAP)} of text in all` }) : '',
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

/// Reading `name`: `fraction` of it so far (null: done).
function showProgress(name, fraction) {
  $('corpus-progress').hidden = name === null;
  $('corpus-progress').value = fraction ?? 0;
  $('corpus-progress-text').textContent = name === null ? '' : `Reading ${name}: ${Math.round(100 * fraction)}%`;
}

/// The text changed: the worker dropped its tokenizer, so does the page.
function changed(files) {
  for (const name of cut.keys()) if (!files.some((f) => f.name === name)) cut.delete(name);
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
    let held = (await worker.call('corpus.files')).reduce((sum, f) => sum + f.bytes, 0);
    try {
      for (const file of files) {
        refused = refused.filter((r) => r.name !== file.name);
        cut.delete(file.name);
        if (held >= TEXT_CAP) {
          refused.push({ name: file.name, bytes: file.size, message: `the page's text is at its cap of ${bytes(TEXT_CAP)}: remove a file first (My files, then add them again)` });
          continue;
        }
        const text = await readUpTo(file, TEXT_CAP - held, (fraction) => showProgress(file.name, fraction));
        const length = text.byteLength; // the buffer goes to the worker
        try {
          await worker.call('corpus.add', { name: file.name, bytes: text.buffer }, undefined, [text.buffer]);
          held += length;
          if (length < file.size) cut.set(file.name, file.size);
        } catch (e) {
          refused.push({ name: file.name, bytes: file.size, message: e.message });
        }
      }
    } finally {
      showProgress(null);
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
