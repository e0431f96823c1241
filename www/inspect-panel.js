// The Inspect panel: `train.inspect` reads every weight and times one real
// training step per kernel; this draws the per-tensor table (with what that
// step's updates and Adam's v would lose in every format), the memory
// by kind and the kernels' GPU time as bars.

import { $, el, bytes, num, count, attempt, formatLabel } from './dom.js';
import { subscribe, busy } from './state.js';
import { record } from './train-panel.js';

let worker;

const MEMORY_KINDS = [
  ['master', 'master weights (f32; bf16-sr: bf16, and one tensor widened to f32)'],
  ['grads', 'f32 gradients'],
  ['moments', 'AdamW moments (m, v)'],
  ['mirror', 'weights copy (f16, or quantized once per step)'],
  ['activations', 'activations and scratch'],
  ['total', 'total'],
];

const ROUNDING_NOTE = 'Chrome rounds GPU timestamps to 100 µs unless WebGPU developer features are on '
  + '(chrome://flags/#enable-webgpu-developer-features), so short kernels read as 0 or 0.1 ms.';

function renderKernels(kernels, error) {
  const host = $('inspect-kernels');
  host.textContent = '';
  const note = $('inspect-kernels-note');
  if (!kernels) {
    host.dataset.state = 'unavailable';
    note.textContent = `Per-kernel times are not available: ${error ?? 'no reason given'}.`;
    return;
  }
  host.dataset.state = 'ready';
  const total = kernels.reduce((a, k) => a + k.ms, 0);
  const max = Math.max(...kernels.map((k) => k.ms), 1e-9);
  note.textContent = `${count(kernels.length)} kernels, ${num(total)} ms of GPU time in one step. ${ROUNDING_NOTE}`;
  for (const k of kernels) {
    host.append(el('div', { className: 'bar', dataset: { kernel: k.kernel } }, [
      el('span', { className: 'label', textContent: k.kernel, title: `${k.dispatches} dispatches` }),
      el('span', { className: 'track' }, el('span', { className: 'fill', style: `width: ${(100 * k.ms) / max}%` })),
      el('span', { className: 'value' }, [`${num(k.ms)} ms `, el('small', { textContent: `× ${k.dispatches}` })]),
    ]));
  }
}

/// The tile variant each GEMM shape runs in (the tuner's choice, timed once
/// per adapter, or a pinned kernel config) — variants differ in speed only.
function renderGemm({ config, pinned }) {
  const body = $('inspect-gemm').querySelector('tbody');
  body.textContent = '';
  for (const p of config.picks) {
    body.append(el('tr', { dataset: { layout: p.layout } }, [
      el('td', { textContent: p.layout }), el('td', { textContent: `${p.m} × ${p.n} × ${p.k}` }),
      el('td', { textContent: p.b }), el('td', { textContent: p.variant }),
      el('td', { textContent: p.ms == null ? '—' : num(p.ms) }),
    ]));
  }
  $('inspect-gemm-note').textContent = (pinned
    ? 'Pinned: these variants are used as they are. '
    : `Chosen by timing each variant once on ${config.adapter || 'this adapter'} (kept in this site's storage). `)
    + 'Shapes not listed use the adapter\'s default. Every variant sums in the same order: the choice changes speed, never the numbers.';
  $('inspect-gemm-unpin').disabled = !pinned;
  $('inspect-gemm-save').href = URL.createObjectURL(new Blob([JSON.stringify(config, null, 2)], { type: 'application/json' }));
}

async function gemm(type, payload) {
  const kernels = await attempt($('inspect-error'), () => worker.call(type, payload));
  if (kernels) renderGemm(kernels);
}

function renderMemory(memory) {
  const body = $('inspect-memory').querySelector('tbody');
  body.textContent = '';
  for (const [key, label] of MEMORY_KINDS) {
    body.append(el('tr', { dataset: { kind: key }, className: key === 'total' ? 'total' : '' }, [
      el('th', { textContent: label }), el('td', { textContent: memory[key] ? bytes(memory[key]) : '—' }),
    ]));
  }
}

/// What the page holds: its thread's JS heap (Chrome's performance.memory),
/// and the worker's heap, wasm memory and live GPU buffers.
async function pageMemory() {
  const held = await attempt($('inspect-error'), () => worker.call('memory'));
  if (!held) return;
  const rows = [
    ['pageHeap', 'page JS heap', performance.memory?.usedJSHeapSize ?? null, bytes],
    ['workerHeap', 'worker JS heap', held.heapBytes, bytes],
    ['wasm', 'worker wasm memory', held.wasmBytes, bytes],
    ['gpuBuffers', 'GPU buffers', held.gpuBuffers, count],
    ['gpuBytes', 'GPU buffer memory', held.gpuBytes, bytes],
  ];
  const body = $('inspect-page-memory').querySelector('tbody');
  body.textContent = '';
  for (const [key, label, value, format] of rows) {
    body.append(el('tr', { dataset: { kind: key, value: value ?? '' } }, [
      el('th', { textContent: label }), el('td', { textContent: value === null ? '— (not reported by this browser)' : format(value) }),
    ]));
  }
  $('inspect-page-memory').hidden = false;
}

/// A share (0–1) as a percent cell; its raw value in data-value. `null`:
/// nothing to count (no weight moved, no nonzero v).
function percent(share, col, why, group = false) {
  const className = group ? 'group' : '';
  if (share === null) return el('td', { className, textContent: '—', title: why, dataset: { col } });
  const text = share > 0 && share < 0.001 ? '<0.1%' : share < 1 && share > 0.999 ? '>99.9%' : `${(100 * share).toFixed(1)}%`;
  return el('td', { className, textContent: text, dataset: { col, value: String(share) } });
}

/// The survival columns' headers, from the formats the inspector measured
/// (inspect::grid: every element format, then Q1.15): lands in each, then v below each.
function survivalHeads(s) {
  const head = $('inspect-tensors').querySelector('thead tr');
  head.querySelectorAll('th[data-col]').forEach((th) => th.remove());
  for (const [group, shares, text] of [['lands', s.lands, 'lands in'], ['v_below', s.v_below, 'v below']]) {
    shares.forEach(({ format }, i) => head.append(el('th', {
      className: i === 0 ? 'group' : '', textContent: `${text} ${formatLabel(format)}`, dataset: { col: `${group}_${format}` },
    })));
  }
}

/// The step's update survival and v underflow (inspect::survival): the
/// lands-in shares count moved weights, the v-below shares nonzero moments.
function survivalCells(s) {
  const moved = s.updated > 0 ? null : 'no weight of this tensor moved this step';
  const vs = Number.isFinite(s.v_min) ? null : 'every v of this tensor is 0';
  const cells = (group, shares, none) => shares.map(({ format, share }, i) => percent(none ? null : share, `${group}_${format}`, none, i === 0));
  return [...cells('lands', s.lands, moved), ...cells('v_below', s.v_below, vs)];
}

function renderTensors(tensors) {
  const body = $('inspect-tensors').querySelector('tbody');
  body.textContent = '';
  if (tensors.length > 0) survivalHeads(tensors[0].survival);
  for (const t of tensors) {
    const s = t.survival;
    const title = `${count(s.updated)} weights moved this step; `
      + (Number.isFinite(s.v_min) ? `smallest nonzero v ${num(s.v_min)}, ${(100 * s.v_below[0].share).toFixed(1)}% of v below ${s.v_below[0].format}'s smallest value` : 'no nonzero v');
    body.append(el('tr', { dataset: { tensor: t.name }, className: t.nonfinite > 0 ? 'bad' : '', title }, [
      el('td', { className: 'name', textContent: t.name }),
      el('td', { textContent: t.shape[0] === 1 ? `${t.shape[1]}` : `${t.shape[0]} × ${t.shape[1]}` }),
      el('td', { textContent: num(t.rms) }),
      el('td', { textContent: num(t.max_abs) }),
      el('td', { textContent: t.update_ratio === null ? '— (next time)' : num(t.update_ratio) }),
      el('td', { textContent: count(t.nonfinite) }),
      ...survivalCells(s),
    ]));
  }
}

/// Per layer: the attention probabilities against each format's smallest value (inspect::softmax_tail).
function renderSoftmax(layers) {
  const body = $('inspect-softmax').querySelector('tbody');
  body.textContent = '';
  for (const l of layers) {
    body.append(el('tr', { dataset: { layer: String(l.layer) } }, [
      el('td', { textContent: String(l.layer) }),
      el('td', { textContent: count(l.probabilities) }),
      el('td', { textContent: num(l.p_min) }),
      percent(l.below_bf16, 'p_below_bf16'),
      percent(l.below_f16, 'p_below_f16'),
      percent(l.below_e4m3, 'p_below_e4m3'),
    ]));
  }
}

async function inspect() {
  const result = await busy('inspect', () => attempt($('inspect-error'), () => worker.call('train.inspect')));
  if (!result) return;
  record(result.steps, result.step);
  $('inspect-status').textContent = `At step ${count(result.step)} (the timed step counts as a training step). `
    + 'update / weight is ‖Δw‖ / ‖w‖ per step since the previous inspection.';
  renderKernels(result.kernels, result.kernels_error);
  await gemm('kernels.get');
  renderMemory(result.memory);
  await pageMemory();
  renderTensors(result.tensors);
  renderSoftmax(result.softmax);
  $('inspect-result').hidden = false;
}

export function initInspect(w) {
  worker = w;
  $('inspect-run').addEventListener('click', inspect);
  $('inspect-page-memory-run').addEventListener('click', pageMemory);
  $('inspect-gemm-unpin').addEventListener('click', () => gemm('kernels.unpin'));
  $('inspect-gemm-pin').addEventListener('change', async (e) => {
    const [file] = e.target.files;
    if (file) await gemm('kernels.pin', { json: await file.text() });
    e.target.value = '';
  });
  subscribe((s) => { $('inspect-run').disabled = !s.run || s.busy.has('inspect') || s.busy.has('load'); });
}
