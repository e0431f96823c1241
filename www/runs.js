// The Runs panel: a row per run of this page (created, loaded, imported or
// restored) and per run an earlier visit kept — its text or task, model,
// modes, the settings that differ from its preset's, steps, latest loss and
// validation — and a tick choosing whether the charts overlay its curves
// (the live run is always drawn).
//
// Kept in localStorage: at most KEEP runs, their curves thinned to about
// POINTS points of 5 digits (under half a MiB of JSON in all), read once at
// load and written whole, which its synchronous, string-keyed API suits;
// IndexedDB's transactions would buy nothing at this size. Never their
// weights (a checkpoint keeps those).

import { $, el, num, count } from './dom.js';
import { modeLabel } from './state.js';
import * as charts from './charts.js';
import { configSettings, baseOf, specOf, differences, sameModel } from './defaults.js';
import { taskLabel } from './tasks.js';

const STORE = 'webtrain.runs';
const KEEP = 20;
const POINTS = 400;

/// Oldest first: {n, name, origin, text, model, modes, settings, step, loss,
/// val: {step, loss, accuracy} | null, overlay, kept (from an earlier visit)}.
let rows = [];
let next = 1;
/// The live run's number, or null.
let live = null;

/// "64 wide × 2 layers, 4 heads (2 kv), ffn 256, vocab 301"
function sizes(m) {
  return `${m.hidden_size} wide × ${m.num_hidden_layers} layers, ${m.num_attention_heads} heads`
    + `${m.num_key_value_heads !== m.num_attention_heads ? ` (${m.num_key_value_heads} kv)` : ''}, ffn ${m.intermediate_size}, vocab ${m.vocab_size}`;
}

/// "sort (len 8)", or the text's file names as the Setup panel lists them.
function textOf(info) {
  if (info.task) return taskLabel(info.task);
  const files = [...document.querySelectorAll('#corpus-files li[data-state="ok"], #corpus-files li[data-state="cut"]')];
  return files.map((li) => li.dataset.name).join(', ') || '—';
}

const find = (n) => rows.find((r) => r.n === n);

/// A new row for `info`, the live run from now on; the previous live run
/// stays overlaid. Returns its number, the charts' owner of its curves.
export function begin(info, { name, origin }) {
  const previous = find(live);
  if (previous) previous.overlay = true;
  const row = {
    n: next++, name, origin, text: textOf(info), model: '…', modes: [modeLabel(info.config.precision, info.config.optim)],
    settings: [], step: info.step, loss: null, val: null, overlay: false, kept: false,
  };
  rows.push(row);
  live = row.n;
  while (rows.length > KEEP) {
    const gone = rows.findIndex((r) => r.n !== live);
    charts.forget(rows[gone].n);
    rows.splice(gone, 1);
  }
  describe(row, info);
  changed();
  return row.n;
}

/// The model's preset (or sizes) and the settings that differ from the preset's.
async function describe(row, info) {
  try {
    const { model } = info.config;
    const { preset, defaults } = await baseOf(model, info.task);
    row.model = info.task && sameModel(defaults.model, model) ? `${info.task.name}'s` : preset === 'custom' ? sizes(model) : preset;
    row.settings = differences(specOf(info.config), defaults, await configSettings());
  } catch {
    row.model = sizes(info.config.model); // no defaults to compare with: the sizes say what it is
  }
  changed();
}

/// The live run was converted to another precision or optimizer state.
export function switched(info) {
  const row = find(live);
  const mode = modeLabel(info.config.precision, info.config.optim);
  if (row.modes[row.modes.length - 1] !== mode) row.modes.push(mode);
  changed();
  return live;
}

/// The live run reached `step` with this loss.
export function progress(step, loss) {
  const row = find(live);
  if (!row) return;
  Object.assign(row, { step, loss: Number.isFinite(loss) ? loss : row.loss });
  changed();
}

/// A validation of the live run (accuracy: null for a text run).
export function validated(step, loss, accuracy) {
  const row = find(live);
  if (!row) return;
  row.val = { step, loss, accuracy };
  changed();
}

function remove(n) {
  rows = rows.filter((r) => r.n !== n);
  charts.forget(n);
  changed();
}

// --- the table -------------------------------------------------------

/// Each row's <tr>, made once and updated in place: a tick clicked while
/// the live row redraws several times a second is not lost.
const trs = new Map();

const COLS = ['text', 'model', 'modes', 'settings', 'step', 'loss', 'val', 'accuracy'];
/// Columns of numbers, right-aligned; the others are words.
const NUMBERS = new Set(['step', 'loss', 'val', 'accuracy']);

function made(r) {
  const tick = el('input', {
    type: 'checkbox', 'aria-label': `overlay run #${r.n}`,
    onchange: (e) => { r.overlay = e.target.checked; changed(); },
  });
  const swatch = el('span', { className: 'swatch' });
  swatch.style.background = charts.runColor(r.n);
  const drop = el('button', { type: 'button', className: 'remove', textContent: '×', title: 'remove from the table', 'aria-label': `remove run #${r.n}`, onclick: () => remove(r.n) });
  const cells = COLS.map((col) => el('td', { className: NUMBERS.has(col) ? '' : 'name', dataset: { col } }));
  const tr = el('tr', { dataset: { run: r.n } }, [el('td', {}, [tick, swatch]), el('td', { className: 'name', dataset: { col: 'name' } }), ...cells, el('td', {}, [drop])]);
  trs.set(r.n, tr);
  return tr;
}

function show(tr, r) {
  const isLive = r.n === live;
  const tick = tr.querySelector('input');
  tick.checked = isLive || r.overlay;
  tick.disabled = isLive;
  tick.title = isLive ? 'the live run is always drawn' : 'overlay its curves on the charts';
  tr.querySelector('button.remove').disabled = isLive;
  Object.assign(tr.dataset, { live: isLive, kept: r.kept, overlay: isLive || r.overlay });
  const status = isLive ? 'live' : r.kept ? 'finished; weights not kept' : 'finished';
  const cell = (col) => tr.querySelector(`td[data-col="${col}"]`);
  cell('name').textContent = '';
  cell('name').append(`#${r.n} ${r.name}`, el('span', { className: 'muted small', textContent: ` ${r.origin} · ${status}` }));
  const text = {
    text: r.text,
    model: r.model,
    modes: r.modes.join(' → '),
    settings: r.settings.map(([k, v]) => `${k} ${typeof v === 'number' ? num(v, 4) : v}`).join(', ') || 'the defaults',
    step: count(r.step),
    loss: r.loss === null ? '—' : r.loss.toFixed(4),
    val: r.val ? `${Number.isFinite(r.val.loss) ? r.val.loss.toFixed(4) : r.val.loss} (step ${count(r.val.step)})` : '—',
    accuracy: r.val?.accuracy === null || r.val?.accuracy === undefined ? '—' : `${(100 * r.val.accuracy).toFixed(1)}%`,
  };
  for (const col of COLS) cell(col).textContent = text[col];
  cell('loss').dataset.value = r.loss ?? '';
  cell('val').dataset.value = r.val?.loss ?? '';
}

function render() {
  const body = $('runs-table').querySelector('tbody');
  for (const [n, tr] of trs) {
    if (!find(n)) {
      tr.remove();
      trs.delete(n);
    }
  }
  [...rows].reverse().forEach((r, i) => { // newest first
    const tr = trs.get(r.n) ?? made(r);
    show(tr, r);
    if (body.children[i] !== tr) body.insertBefore(tr, body.children[i] ?? null);
  });
  $('runs-table').dataset.count = rows.length;
  $('runs-empty').hidden = rows.length > 0;
}

// --- keeping ---------------------------------------------------------

let saveTimer = 0;
let drawnOverlays = '';

/// Redraws the table, the charts' overlays if the ticks changed, and
/// keeps the runs two seconds later (steps come several times a second).
function changed() {
  render();
  const overlays = rows.filter((r) => r.overlay && r.n !== live).map((r) => r.n);
  if (overlays.join(' ') !== drawnOverlays) {
    drawnOverlays = overlays.join(' ');
    charts.overlay(overlays);
  }
  if (!saveTimer) saveTimer = setTimeout(save, 2000);
}

const fiveDigits = (key, v) => (typeof v === 'number' && !Number.isInteger(v) ? Number(v.toPrecision(5)) : v);

function save() {
  clearTimeout(saveTimer);
  saveTimer = 0;
  const kept = rows.map((r) => ({ ...r, kept: true, curves: charts.curves(r.n, POINTS) }));
  // a full storage drops the oldest runs until the rest fit
  while (kept.length > 0) {
    try {
      localStorage.setItem(STORE, JSON.stringify({ next, runs: kept }, fiveDigits));
      return;
    } catch {
      kept.shift();
    }
  }
}

/// The runs an earlier visit kept, listed as finished and not overlaid.
function restore() {
  let stored;
  try {
    stored = JSON.parse(localStorage.getItem(STORE) ?? 'null');
  } catch {
    return; // unreadable: start a new list
  }
  if (!Array.isArray(stored?.runs)) return;
  next = stored.next;
  for (const { curves, ...row } of stored.runs) {
    rows.push({ ...row, overlay: false, kept: true });
    charts.addPast(row.n, curves);
  }
}

export function initRuns() {
  restore();
  render();
  window.addEventListener('pagehide', save);
}
