// The Inside panel: the model's attention maps and next-token predictions
// over a text (`look`: inspect::Probe, the model's own forward in the run's
// precision) as heatmaps and coloured tokens, and every tensor's value
// range (`ranges`: inspect::ranges) as a log2 histogram under the ranges of
// every element format and Q1.15, the shares outside a chosen one and what
// a chosen block format does to each weight, activation and gradient, with
// the RMS per layer across measurements (when asked, and every N steps
// while training if set). The worker
// computes; this only draws, and nothing runs until asked.

import uPlot from 'uplot';
import { $, el, num, count, pct, formatLabel, attempt } from './dom.js';
import { subscribe, busy } from './state.js';
import { recipeLabel } from './recipes.js';
import { record, every, on } from './train-panel.js';

let worker;
let looked = null;
let measured = null;
let rmsChart = null;
let measurements = 0;
/// One point per measurement: {step, acts: [rms per layer], grads: [rms per layer]}.
const rmsHistory = [];

const FORMAT_COLORS = {
  bf16: '#2b8a3e', f16: '#3056d3', e4m3: '#d9480f', e5m2: '#e67700', e2m3: '#c2255c', e3m2: '#1098ad', e2m1: '#5c940d', 'q1.15': '#9c36b5',
};
const ALL_HEADS = 'all';

// ---- attention maps ----------------------------------------------------

/// Probability p as a shade: white at 0, dark blue at 1 (sqrt: small values stay visible).
function shade(p) {
  const t = Math.sqrt(Math.min(Math.max(p, 0), 1));
  const c = (a, b) => Math.round(a + (b - a) * t);
  return `rgb(${c(255, 16)},${c(255, 48)},${c(255, 140)})`;
}

/// Head `h`'s map of `map` ([heads, T, T]) on `canvas`, `cell` px a token;
/// with `labels`, the tokens along both axes.
function drawMap(canvas, map, h, t, cell, labels) {
  const margin = labels ? 90 : 0;
  canvas.width = margin + t * cell;
  canvas.height = margin + t * cell;
  const g = canvas.getContext('2d');
  g.fillStyle = '#fff';
  g.fillRect(0, 0, canvas.width, canvas.height);
  for (let q = 0; q < t; q++) {
    for (let k = 0; k <= q; k++) {
      g.fillStyle = shade(map[(h * t + q) * t + k]);
      g.fillRect(margin + k * cell, margin + q * cell, cell, cell);
    }
  }
  if (labels) {
    g.fillStyle = '#333';
    g.font = `${Math.min(11, cell)}px system-ui, sans-serif`;
    g.textBaseline = 'middle';
    looked.tokens.forEach((tok, i) => {
      const text = JSON.stringify(tok).slice(1, -1).slice(0, 12);
      g.textAlign = 'right';
      g.fillText(text, margin - 4, margin + (i + 0.5) * cell);
      g.save();
      g.translate(margin + (i + 0.5) * cell, margin - 4);
      g.rotate(-Math.PI / 2);
      g.textAlign = 'left';
      g.fillText(text, 0, 0);
      g.restore();
    });
  }
  return margin;
}

/// The largest |Σ_k p − 1| over every row of every head of a layer (the
/// page's own check that a map is a softmax; sf16's rows clamp at 0.999).
function rowSumError(map, heads, t) {
  let worst = 0;
  for (let r = 0; r < heads * t; r++) {
    let s = 0;
    for (let k = 0; k < t; k++) s += map[r * t + k];
    worst = Math.max(worst, Math.abs(s - 1));
  }
  return worst;
}

function renderMaps() {
  const host = $('inside-maps');
  host.textContent = '';
  const layer = Number($('inside-layer').value);
  const head = $('inside-head').value;
  const map = looked.attention[layer];
  const t = looked.tokens.length;
  host.dataset.layers = String(looked.attention.length);
  host.dataset.tokens = String(t);
  host.dataset.rowSumError = String(Math.max(...looked.attention.map((m) => rowSumError(m, looked.heads, t))));
  if (head === ALL_HEADS) {
    for (let h = 0; h < looked.heads; h++) {
      const canvas = el('canvas', { className: 'map small', title: `head ${h}: click to see it alone` });
      drawMap(canvas, map, h, t, Math.max(2, Math.floor(160 / t)), false);
      canvas.addEventListener('click', () => { $('inside-head').value = String(h); renderMaps(); });
      host.append(el('figure', {}, [canvas, el('figcaption', { textContent: `head ${h}` })]));
    }
    return;
  }
  const h = Number(head);
  const cell = Math.max(6, Math.floor(480 / t));
  const canvas = el('canvas', { className: 'map' });
  const margin = drawMap(canvas, map, h, t, cell, true);
  canvas.addEventListener('mousemove', (e) => {
    const box = canvas.getBoundingClientRect();
    const x = (e.clientX - box.left) * (canvas.width / box.width) - margin;
    const y = (e.clientY - box.top) * (canvas.height / box.height) - margin;
    const [k, q] = [Math.floor(x / cell), Math.floor(y / cell)];
    if (q < 0 || k < 0 || q >= t || k >= t) return;
    const p = map[(h * t + q) * t + k];
    const tok = (i) => JSON.stringify(looked.tokens[i]);
    $('inside-hover').textContent = k > q
      ? `query ${q} ${tok(q)} cannot see key ${k} ${tok(k)} (causal)`
      : `query ${q} ${tok(q)} → key ${k} ${tok(k)}: p = ${num(p, 4)}`;
  });
  host.append(canvas);
}

// ---- predictions --------------------------------------------------------

/// Green for the model's first guess, through yellow to red by rank.
function rankColor(rank) {
  const hue = 120 * Math.max(0, 1 - Math.log2(1 + rank) / Math.log2(51));
  return `hsl(${Math.round(hue)}, 70%, 82%)`;
}

function renderPredictions() {
  const host = $('inside-predictions');
  host.textContent = '';
  host.append(el('span', { className: 'token first', textContent: looked.tokens[0], title: 'the first token: nothing predicts it' }));
  looked.predictions.forEach((p, i) => {
    const top = p.top.map(([, prob], j) => `${JSON.stringify(looked.top_tokens[i][j])} ${num(prob, 3)}`).join(', ');
    host.append(el('span', {
      className: 'token',
      textContent: looked.tokens[p.position + 1],
      title: `p = ${num(p.target_prob, 3)}, rank ${p.target_rank} (0 = the model's first guess)\nits guesses: ${top}`,
      style: `background: ${rankColor(p.target_rank)}`,
      dataset: { rank: String(p.target_rank) },
    }));
  });
  host.dataset.count = String(looked.predictions.length);
}

async function look() {
  const result = await busy('look', () => attempt($('inside-error'), () => worker.call('look', { text: $('inside-text').value, topK: 5 })));
  if (!result) return;
  looked = result;
  const layer = $('inside-layer');
  layer.replaceChildren(...result.attention.map((_, l) => el('option', { value: String(l), textContent: String(l) })));
  const head = $('inside-head');
  const heads = Array.from({ length: result.heads }, (_, h) => el('option', { value: String(h), textContent: String(h) }));
  head.replaceChildren(...heads, el('option', { value: ALL_HEADS, textContent: 'all (small multiples)' }));
  const n = result.predictions.length;
  const mean = result.predictions.reduce((s, p) => s - Math.log(p.target_prob), 0) / Math.max(1, n);
  $('inside-look-status').textContent = `Step ${count(result.step)}, ${recipeLabel(result.precision)}: ${result.tokens.length} tokens`
    + `${result.truncated ? ` (the text's first ${result.tokens.length})` : ''}${n ? `, mean loss ${num(mean)} over their predictions` : ''}.`;
  renderMaps();
  renderPredictions();
  $('inside-look-result').hidden = false;
  $('inside-look-result').dataset.precision = recipeLabel(result.precision);
  $('inside-look-result').dataset.step = String(result.step);
}

// ---- value ranges -------------------------------------------------------

const byName = (name) => measured.ranges.find((r) => `${r.kind}:${r.tensor}` === name);

/// The selected tensor's histogram: a bar per binade (share of its values),
/// the formats' ranges as lines above (thin: subnormal, thick: normal).
function renderHistogram() {
  const r = byName($('inside-tensor').value);
  const canvas = $('inside-histogram');
  const g = canvas.getContext('2d');
  const [w, h] = [canvas.width, canvas.height];
  g.fillStyle = '#fff';
  g.fillRect(0, 0, w, h);
  const formats = measured.formats;
  const data = r.binades.map(([e]) => e);
  const lo = Math.min(-30, ...data) - 1;
  const hi = Math.max(20, ...data) + 1;
  const band = 14;
  const bandTop = band * formats.length + 6;
  const [left, bottom] = [40, 22];
  // binade e's left edge, clamped to the plot (bf16 reaches far beyond it)
  const x = (e) => Math.min(w - 8, Math.max(left, left + ((e - lo) / (hi - lo)) * (w - left - 8)));
  const peak = Math.max(1, ...r.binades.map(([, c]) => c));
  g.fillStyle = '#868e96';
  for (const [e, c] of r.binades) {
    const barH = (c / peak) * (h - bandTop - bottom);
    g.fillRect(x(e), h - bottom - barH, Math.max(1, x(e + 1) - x(e) - 1), barH);
  }
  formats.forEach((f, i) => {
    const y = 9 + band * i;
    g.strokeStyle = g.fillStyle = FORMAT_COLORS[f.name] ?? '#333';
    g.lineWidth = 2;
    g.beginPath(); g.moveTo(x(f.smallest), y); g.lineTo(x(f.largest + 1), y); g.stroke();
    if (f.normal !== null) {
      g.lineWidth = 5;
      g.beginPath(); g.moveTo(x(f.normal), y); g.lineTo(x(f.largest + 1), y); g.stroke();
    }
    g.font = '11px system-ui, sans-serif';
    g.textAlign = 'left';
    g.textBaseline = 'middle';
    g.fillText(formatLabel(f.name), 2, y); // in the left margin: a range may span the plot
  });
  g.fillStyle = '#333';
  g.textAlign = 'center';
  g.textBaseline = 'top';
  for (let e = Math.ceil(lo / 10) * 10; e <= hi; e += 10) g.fillText(`2^${e}`, x(e), h - bottom + 4);
  canvas.dataset.bars = String(r.binades.length);
  canvas.dataset.tensor = r.tensor;
  const shares = r.outside.map((o) => `${formatLabel(o.format)}: ${pct(o.overflow)} over, ${pct(o.underflow)} under, ${pct(o.subnormal)} subnormal`).join(' · ');
  const blocks = r.blocks.map((b) => `${b.format} ${pct(b.mean_relative_error)}`).join(' · ');
  $('inside-histogram-note').textContent = `${r.tensor} (${r.kind.replace('_', ' ')}): ${count(r.count)} values, rms ${num(r.rms)}, `
    + `${count(r.zeros)} zeros${r.infinite || r.nan ? `, ${count(r.infinite)} ±Inf, ${count(r.nan)} NaN` : ''}. ${shares}. `
    + (blocks ? `Mean relative error in blocks: ${blocks}. ` : '')
    + 'Bars: values per binade [2^e, 2^(e+1)). Lines: where each format holds values (thin: subnormal, thick: normal).';
}

/// `select`'s options: `names`, keeping its choice (else `preferred`).
function offer(select, names, preferred) {
  const before = select.value;
  select.replaceChildren(...names.map((n) => el('option', { value: n, textContent: formatLabel(n) })));
  select.value = names.includes(before) ? before : preferred;
}

/// Per tensor: its shares outside the chosen format, and what the chosen
/// block format does to it (— for Adam's moments, which no product reads).
function renderRangesTable() {
  const body = $('inside-ranges-table').querySelector('tbody');
  body.textContent = '';
  const format = $('inside-format').value;
  const blockFormat = $('inside-block-format').value;
  const cell = (col, textContent, value) => el('td', { textContent, dataset: value === undefined ? { col } : { col, value: String(value) } });
  for (const r of measured.ranges) {
    const o = r.outside.find((x) => x.format === format);
    const b = r.blocks.find((x) => x.format === blockFormat);
    const blockCells = b
      ? [cell('error', pct(b.mean_relative_error), b.mean_relative_error), cell('flushed', pct(b.flushed), b.flushed),
        cell('scale_saturated', pct(b.scale_saturated), b.scale_saturated), cell('scale_underflowed', pct(b.scale_underflowed), b.scale_underflowed)]
      : ['error', 'flushed', 'scale_saturated', 'scale_underflowed'].map((col) => cell(col, '—'));
    blockCells[0].className = 'group';
    const over = cell('over', pct(o.overflow), o.overflow);
    over.className = 'group';
    body.append(el('tr', { dataset: { kind: r.kind, tensor: r.tensor } }, [
      el('td', { textContent: r.tensor }),
      el('td', { textContent: r.kind.replace('_', ' ') }),
      el('td', { textContent: num(r.rms) }),
      el('td', { textContent: count(r.zeros) }),
      over,
      cell('under', pct(o.underflow), o.underflow),
      cell('subnormal', pct(o.subnormal), o.subnormal),
      ...blockCells,
    ]));
  }
}

/// Per layer: the RMS of its input activations and of its weights' gradients
/// (over all of them: sqrt(Σ rms²·n / Σ n)).
function recordRms() {
  const layers = Math.max(...measured.ranges.map((r) => (r.layer ?? -1))) + 1;
  const acts = [];
  const grads = [];
  for (let l = 0; l < layers; l++) {
    acts.push(measured.ranges.find((r) => r.kind === 'activation' && r.tensor === `layers.${l}.x`)?.rms ?? null);
    const gs = measured.ranges.filter((r) => r.kind === 'gradient' && r.layer === l);
    const n = gs.reduce((s, r) => s + r.count, 0);
    grads.push(n ? Math.sqrt(gs.reduce((s, r) => s + r.rms * r.rms * r.count, 0) / n) : null);
  }
  if (rmsHistory.at(-1)?.step === measured.step) rmsHistory.pop();
  rmsHistory.push({ step: measured.step, acts, grads });
  const host = $('inside-rms');
  const data = [rmsHistory.map((p) => p.step)];
  const series = [{ label: 'step' }];
  const colors = ['#3056d3', '#d9480f', '#2b8a3e', '#9c36b5', '#c2255c', '#1098ad', '#e67700', '#5c940d'];
  for (let l = 0; l < layers; l++) {
    data.push(rmsHistory.map((p) => p.acts[l] ?? null));
    series.push({ label: `x L${l}`, stroke: colors[l % colors.length], points: { show: true } });
    data.push(rmsHistory.map((p) => p.grads[l] ?? null));
    series.push({ label: `grad L${l}`, stroke: colors[l % colors.length], dash: [4, 3], points: { show: true } });
  }
  rmsChart?.destroy();
  rmsChart = new uPlot({
    width: Math.max(320, host.clientWidth || 640),
    height: 200,
    scales: { x: { time: false }, y: { distr: 3 } },
    axes: [{ label: 'step' }, { label: 'rms' }],
    series,
  }, data, host);
  host.dataset.points = String(rmsHistory.length);
}

async function measure() {
  const result = await busy('ranges', () => attempt($('inside-error'), () => worker.call('ranges')));
  if (!result) return;
  record(result.steps, result.step); // the steps in flight, which it waited for
  showRanges(result);
}

/// A measurement `{step, ranges, formats}`: asked for, or the session's
/// `measured` event while training.
function showRanges(result) {
  measured = result;
  const select = $('inside-tensor');
  const before = select.value;
  select.replaceChildren(...result.ranges.map((r) => el('option', { value: `${r.kind}:${r.tensor}`, textContent: `${r.kind.replace('_', ' ')} · ${r.tensor}` })));
  if (before && byName(before)) select.value = before;
  offer($('inside-format'), result.formats.map((f) => f.name), 'e4m3');
  // measurements while training skip the block formats (Measure has them)
  const blockFormats = result.ranges.find((r) => r.blocks.length > 0)?.blocks.map((b) => b.format) ?? [];
  if (blockFormats.length > 0) offer($('inside-block-format'), blockFormats, 'mxfp4');
  const blocks = blockFormats.length > 0 ? '' : ' Block formats: on Measure (not while training).';
  $('inside-ranges-status').textContent = `Step ${count(result.step)}: ${result.ranges.length} tensors.${blocks}`;
  $('inside-ranges-result').hidden = false;
  $('inside-ranges-result').dataset.tensors = String(result.ranges.length);
  $('inside-ranges-result').dataset.measurements = String(++measurements);
  renderHistogram();
  renderRangesTable();
  recordRms();
}

export function initInside(w) {
  worker = w;
  $('inside-look').addEventListener('click', look);
  $('inside-ranges').addEventListener('click', measure);
  $('inside-layer').addEventListener('change', renderMaps);
  $('inside-head').addEventListener('change', renderMaps);
  $('inside-tensor').addEventListener('change', renderHistogram);
  $('inside-format').addEventListener('change', renderRangesTable);
  $('inside-block-format').addEventListener('change', renderRangesTable);
  // live: a measurement at every N-th step while training, a point on the RMS lines each
  every('measureEvery', 'inside-every');
  on('measured', showRanges);
  subscribe((s) => {
    const idle = s.run && !s.busy.has('look') && !s.busy.has('ranges') && !s.busy.has('load');
    $('inside-look').disabled = !idle;
    $('inside-ranges').disabled = !idle;
  });
}
