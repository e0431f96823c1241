// Live charts (uPlot): loss with validation, gradient norm with the clip
// scale, learning rate, tokens/s, the step's counts per site where the
// recipe makes any (sf16's clamps, fp8's, each quantized operand's), the
// gradient's noise ratio where the recipe quantizes it, and the loss scale
// where the recipe scales the loss. Every run keeps its series, one segment per mode it trained in,
// owned by its row of the runs table (www/runs.js): the live run is always
// drawn, its earlier modes dashed; other runs are drawn dashed and dimmed
// behind it where the table chooses them, in their own colour and labelled
// with their number and mode.

import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { $ } from './dom.js';
import { CHARTS, HEIGHT, NOISE_FLOOR, PALETTE, options, seriesIn, countsIn } from './chart-options.js';

export { countsIn };

/// Points a run's table keeps: past this, its older points are thinned to
/// every other one (the last RECENT stay whole), so a long run redraws as
/// fast as a short one.
const MAX_POINTS = 1500;
const RECENT = 500;

/// A step's columns in a run's table, each from its `StepStats`.
const COLUMNS = {
  loss: (s) => s.loss,
  grad_norm: (s) => s.grad_norm,
  clip_scale: (s) => s.clip_scale,
  lr: (s) => s.lr,
  tokens_per_s: (s) => s.tokens_per_s,
  loss_scale: (s) => s.loss_scale,
  noise_dgrad: (s) => s.noise_ratios?.dgrad,
  noise_wgrad: (s) => s.noise_ratios?.wgrad,
  // FP4 All the Way's line, drawn beside the ratios
  noise_floor: (s) => (s.noise_ratios ? NOISE_FLOOR : null),
};
const KEYS = Object.keys(COLUMNS);

// Segments: {owner, label, color, precision, sites, train, val}, oldest first.
const runs = [];
/// The live run's owner (its number in the runs table), or null.
let liveOwner = null;
/// Other runs' owners the charts overlay.
let shown = new Set();
let logLoss = false;
const plots = {};
let pending = false;
let lastDraw = 0;

/// Run `n`'s colour, in the charts and the runs table.
export const runColor = (n) => PALETTE[(n - 1) % PALETTE.length];

/// The live run's newest segment, or null.
function live() {
  const last = runs[runs.length - 1];
  return last && last.owner === liveOwner ? last : null;
}

/// The segments drawn, each with `current` set on the live run's newest.
function drawn() {
  const now = live();
  return runs.filter((r) => r.owner === liveOwner || shown.has(r.owner)).map((run) => ({ run, current: run === now }));
}

function segment(owner, label, precision) {
  const train = { step: [] };
  for (const k of KEYS) train[k] = [];
  const val = { step: [], loss: [], accuracy: [], char_accuracy: [], train_accuracy: [], weight_norm: [] };
  return { owner, label: `#${owner} ${label}`, color: runColor(owner), precision, sites: [], train, val };
}

/// A new segment for every chart, owned by run `owner`: a new run, or the
/// live one in a new mode. `precision` picks the counts charted (sf16, fp8).
export function startRun(label, precision, owner) {
  // a segment that drew nothing (switched again before a step) leaves no overlay
  const last = live();
  if (last && last.train.step.length === 0 && last.val.step.length === 0) runs.pop();
  liveOwner = owner;
  runs.push(segment(owner, label, precision));
  rebuildAll();
}

/// A finished run's segments, as `curves` gave them (a run kept across a reload).
export function addPast(owner, segments) {
  const at = runs.findIndex((r) => r.owner === liveOwner);
  // runs kept before a column existed: nulls in it
  const filled = (val) => Object.fromEntries(Object.keys(segment(0, '', null).val)
    .map((k) => [k, val[k] ?? val.step.map(() => null)]));
  const past = segments.map(({ label, precision, train, val }) => ({ ...segment(owner, label, precision), label, train, val: filled(val) }));
  runs.splice(at < 0 ? runs.length : at, 0, ...past);
  rebuildAll();
}

/// Run `owner`'s segments go (removed from the runs table).
export function forget(owner) {
  for (let i = runs.length - 1; i >= 0; i--) if (runs[i].owner === owner) runs.splice(i, 1);
  rebuildAll();
}

/// The owners whose runs are overlaid (the live run is always drawn).
export function overlay(owners) {
  shown = new Set(owners);
  rebuildAll();
}

/// Run `owner`'s segments, thinned to about `points` steps in all spread
/// evenly (sites' counts left out), for keeping.
export function curves(owner, points) {
  const mine = runs.filter((r) => r.owner === owner);
  const share = points / mine.length;
  const keep = (table) => {
    const every = Math.ceil(table.step.length / share);
    const last = table.step.length - 1;
    const out = {};
    for (const [key, column] of Object.entries(table)) {
      if (!key.startsWith('clamped.')) out[key] = column.filter((_, i) => i % every === 0 || i === last);
    }
    return out;
  };
  return mine.map(({ label, precision, train, val }) => ({ label, precision, train: keep(train), val: keep(val) }));
}

const finite = (x) => (Number.isFinite(x) ? x : null);

export function addSteps(stats) {
  const run = live();
  if (!run || stats.length === 0) return;
  const counted = stats.map((s) => countsIn(run.precision, s));
  if (run.sites.length === 0 && Object.keys(counted[0]).length > 0) {
    run.sites = Object.keys(counted[0]);
    for (const site of run.sites) run.train[`clamped.${site}`] = run.train.step.map(() => null);
    build('clamped');
  }
  const scaled = CHARTS.scale.only(run);
  const noisy = CHARTS.noise.only(run);
  stats.forEach((s, i) => {
    run.train.step.push(s.step);
    for (const k of KEYS) run.train[k].push(finite(COLUMNS[k](s)));
    for (const site of run.sites) run.train[`clamped.${site}`].push(counted[i][site] ?? null);
  });
  if (!scaled && CHARTS.scale.only(run)) build('scale');
  if (!noisy && CHARTS.noise.only(run)) build('noise');
  if (run.train.step.length > MAX_POINTS) thin(run.train);
  schedule();
}

/// Every other point of `table`'s older part (all but the last RECENT).
function thin(table) {
  const old = table.step.length - RECENT;
  for (const [key, column] of Object.entries(table)) {
    table[key] = column.filter((_, i) => i >= old || i % 2 === 0);
  }
}

/// The current run went back to `step` (rebuilt from a snapshot after a
/// lost device): its points after that step go, the steps are redone.
export function rewind(step) {
  const run = live();
  if (!run) return;
  for (const table of [run.train, run.val]) {
    const keep = table.step.filter((s) => s <= step).length;
    for (const column of Object.values(table)) column.length = keep;
  }
  run.rewinds = (run.rewinds ?? 0) + 1;
  schedule();
}

/// A validation's loss and weight norm, and a task run's accuracies (null for text).
export function addValidation(step, loss, { accuracy = null, charAccuracy = null, trainAccuracy = null, weightNorm = null } = {}) {
  const run = live();
  if (!run) return;
  run.val.step.push(step);
  run.val.loss.push(finite(loss));
  run.val.accuracy.push(finite(accuracy));
  run.val.char_accuracy.push(finite(charAccuracy));
  run.val.train_accuracy.push(finite(trainAccuracy));
  run.val.weight_norm.push(finite(weightNorm));
  schedule();
}

/// The accuracy chart is shown for a task run, hidden for a text run.
export function showAccuracy(task) {
  $(CHARTS.accuracy.id).closest('figure').hidden = !task;
}

/// The segments `def` draws.
const drawnIn = (def) => drawn().filter(({ run, current }) => !def.only || def.only(run, current));

function seriesOf(def) {
  const out = [];
  drawnIn(def).forEach(({ run, current }) => {
    for (const g of def.groups) {
      for (const s of seriesIn(g, run)) {
        if (s.current && !current) continue;
        out.push({ run, group: g, s, current });
      }
    }
  });
  return out;
}

function tables(def) {
  const t = [];
  drawnIn(def).forEach(({ run, current }) => {
    for (const g of def.groups) {
      const table = run[g.from];
      const keys = seriesIn(g, run).filter((s) => current || !s.current).map((s) => table[s.key]);
      if (keys.length > 0) t.push([table.step, ...keys]);
    }
  });
  return t;
}

function data(def) {
  const t = tables(def);
  if (t.every((table) => table[0].length === 0)) return [[], ...t.flatMap((table) => table.slice(1).map(() => []))];
  return uPlot.join(t);
}

function build(name) {
  const def = CHARTS[name];
  const host = $(def.id);
  plots[name]?.destroy();
  host.textContent = '';
  const width = Math.max(280, host.clientWidth || 480);
  plots[name] = new uPlot(options(name, def, width, seriesOf(def), logLoss), data(def), host);
  mark(name);
}

function rebuildAll() {
  for (const name of Object.keys(CHARTS)) build(name);
}

/// Test hooks: how many points the current run has, its first and last
/// loss, its last 64 steps' [step, loss] pairs, and the runs overlaid.
function mark(name) {
  const host = $(CHARTS[name].id);
  const run = live();
  const segments = drawn();
  host.dataset.points = run ? run.train.step.length : 0;
  if (name === 'clamped') {
    host.closest('figure').hidden = !run || run.sites.length === 0;
    host.dataset.sites = run ? run.sites.join(' ') : '';
    const counted = run?.sites.map((site) => run.train[`clamped.${site}`]).flat().filter((n) => n !== null) ?? [];
    host.dataset.points = run && run.sites.length > 0 ? counted.length / run.sites.length : 0;
    host.dataset.total = counted.reduce((a, n) => a + n, 0);
  }
  if (name === 'norm') {
    const norms = run?.val.weight_norm.filter((v) => v !== null) ?? [];
    host.dataset.points = norms.length;
    host.dataset.norms = JSON.stringify(norms);
  }
  if (name === 'scale') {
    const scales = run?.train.loss_scale.filter((v) => v !== null) ?? [];
    host.closest('figure').hidden = scales.length === 0;
    host.dataset.points = scales.length;
    host.dataset.last = scales.at(-1) ?? '';
  }
  if (name === 'noise') {
    const t = run?.train;
    const ratios = t ? t.step.map((step, i) => [step, t.noise_dgrad?.[i] ?? null, t.noise_wgrad?.[i] ?? null])
      .filter(([, d, w]) => d !== null || w !== null) : [];
    host.closest('figure').hidden = ratios.length === 0;
    host.dataset.points = ratios.length;
    host.dataset.last = JSON.stringify(ratios.at(-1) ?? null); // [step, dgrad, wgrad]
  }
  host.dataset.runs = segments.length;
  host.dataset.labels = segments.map(({ run: r }) => r.label).join(' | ');
  host.dataset.overlays = [...new Set(segments.map(({ run: r }) => r.owner).filter((o) => o !== liveOwner))].join(' ');
  if (name === 'loss' && run) {
    const losses = run.train.loss.filter((x) => x !== null);
    host.dataset.firstLoss = losses[0] ?? '';
    host.dataset.lastLoss = losses[losses.length - 1] ?? '';
    host.dataset.firstStep = run.train.step[0] ?? '';
    const tail = run.train.step.map((step, i) => [step, run.train.loss[i]]).filter(([, loss]) => loss !== null);
    host.dataset.lastLosses = JSON.stringify(tail.slice(-64));
    host.dataset.rewinds = run.rewinds ?? 0; // the same frame may redraw the steps after a rewind
    // the steps' spacing: 1 and 1 for a run drawn once per step, in order
    const gaps = run.train.step.slice(1).map((step, i) => step - run.train.step[i]);
    host.dataset.minGap = gaps.length ? Math.min(...gaps) : '';
    host.dataset.maxGap = gaps.length ? Math.max(...gaps) : '';
    host.dataset.validations = run.val.step.length;
  }
  if (name === 'accuracy') {
    const v = run?.val;
    const scored = v ? v.step.map((step, i) => [step, v.accuracy[i], v.char_accuracy[i], v.train_accuracy[i]]).filter(([, a]) => a !== null) : [];
    host.dataset.points = scored.length;
    host.dataset.accuracies = JSON.stringify(scored); // [step, exact, per character, training exact]
  }
}

/// Redraws at most every 150 ms, on an animation frame.
function schedule() {
  if (pending) return;
  pending = true;
  const wait = Math.max(0, 150 - (performance.now() - lastDraw));
  setTimeout(() => requestAnimationFrame(() => {
    pending = false;
    lastDraw = performance.now();
    for (const [name, def] of Object.entries(CHARTS)) {
      plots[name]?.setData(data(def));
      mark(name);
    }
  }), wait);
}

export function initCharts() {
  $('loss-log').addEventListener('change', (e) => {
    logLoss = e.target.checked;
    build('loss');
  });
  rebuildAll();
  const resize = new ResizeObserver(() => {
    for (const [name, def] of Object.entries(CHARTS)) {
      const width = Math.max(280, $(def.id).clientWidth);
      if (plots[name] && plots[name].width !== width) plots[name].setSize({ width, height: HEIGHT });
    }
  });
  for (const def of Object.values(CHARTS)) resize.observe($(def.id));
}
