// The charts' definitions (www/charts.js draws them): which series each
// chart draws from a run's tables, and uPlot's options for it — colours,
// dashes for overlays and earlier modes, axes and scales.

import { countsOf, OPERANDS } from './recipes.js';

export const PALETTE = ['#3056d3', '#d9480f', '#2b8a3e', '#9c36b5', '#c2255c', '#1098ad', '#e67700'];
export const HEIGHT = 210;
/// FP4 All the Way (arXiv 2505.19115): quantized training stops making
/// progress once the gradient's norm falls below about √3 times its
/// quantization noise's.
export const NOISE_FLOOR = Math.sqrt(3);
/// Whole steps on the x axis.
const STEP_TICKS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6];

// Each chart: groups of series from one table of a run (`train` steps or
// `val`idations); `current` series are not drawn for overlays, nor runs
// `only` refuses.
export const CHARTS = {
  loss: {
    id: 'chart-loss',
    groups: [
      { from: 'train', series: [{ key: 'loss', label: 'train' }] },
      { from: 'val', series: [{ key: 'loss', label: 'validation', points: true }] },
    ],
  },
  // task runs: the share of held-out examples answered whole, of answer
  // characters right, and of a sample of training examples answered whole
  // (grokking: training reaches 1 long before held-out); overlaid only by
  // runs that have them
  accuracy: {
    id: 'chart-accuracy',
    y: { range: [0, 1] },
    only: (run, current) => current || run.val.accuracy?.some((a) => a !== null),
    groups: [{ from: 'val', series: [
      { key: 'accuracy', label: 'held-out', points: true, line: true },
      { key: 'char_accuracy', label: 'held-out per character', points: true, line: true, dash: [2, 3] },
      { key: 'train_accuracy', label: 'training', points: true, line: true, dash: [6, 3] },
    ] }],
  },
  // ‖W‖₂ of the decaying weights (matrices and embeddings, not the gains)
  // at each validation: weight decay's pull, which grokking papers watch
  norm: {
    id: 'chart-weight-norm',
    only: (run) => run.val.weight_norm?.some((v) => v !== null),
    groups: [{ from: 'val', series: [{ key: 'weight_norm', label: '‖W‖', points: true, line: true }] }],
  },
  grad: {
    id: 'chart-grad',
    groups: [{ from: 'train', series: [
      { key: 'grad_norm', label: '‖g‖' },
      { key: 'clip_scale', label: 'clip scale', scale: 'clip', current: true, dash: [2, 3] },
    ] }],
  },
  lr: { id: 'chart-lr', groups: [{ from: 'train', series: [{ key: 'lr', label: 'lr' }] }] },
  tps: { id: 'chart-tps', groups: [{ from: 'train', series: [{ key: 'tokens_per_s', label: 'tokens/s' }] }] },
  // the current run's sites, a colour each (an operand's flushes dashed in
  // its saturations' colour); asinh: linear near 0, then logarithmic, for
  // counts from 0 to millions
  clamped: {
    id: 'chart-clamped',
    y: { distr: 4, asinh: 1, range: (u, min, max) => [0, Math.max(max, 1)] },
    groups: [{ from: 'train', series: (run) => run.sites.map((site, i) => {
      const operand = OPERANDS.findIndex(([pass, op]) => site.startsWith(`${pass}.${op}.`));
      return {
        key: `clamped.${site}`,
        label: site.replace('e4m3_', 'E4M3 ').replace(/\.(saturated|flushed)$/, ' $1'),
        current: true,
        color: PALETTE[(operand < 0 ? i : operand) % PALETTE.length],
        dash: site.endsWith('.flushed') && operand >= 0 ? [4, 3] : undefined,
      };
    }) }],
  },
  // recipes that quantize the gradient dY: ‖dY‖ / ‖q(dY) − dY‖ per product
  // reading it, over every layer; log axis, the √3 line always in range
  // (and a range before any point: a log axis from 0 throws)
  noise: {
    id: 'chart-noise',
    y: { distr: 3, log: 10, range: (u, min, max) => (min > 0 && max > 0 ? [Math.min(min, 1), Math.max(2 * max, 10)] : [1, 10]) },
    only: (run) => run.train.noise_floor?.some((v) => v !== null),
    groups: [{ from: 'train', series: [
      { key: 'noise_dgrad', label: 'dgrad dY' },
      { key: 'noise_wgrad', label: 'wgrad dY', dash: [6, 3] },
      { key: 'noise_floor', label: '√3', current: true, color: '#868e96', dash: [2, 3] },
    ] }],
  },
  // dynamic loss scaling (amp-f16): the scale each step's gradients carried
  scale: {
    id: 'chart-scale',
    y: { distr: 3, log: 2 },
    only: (run) => run.train.loss_scale?.some((v) => v !== null),
    groups: [{ from: 'train', series: [{ key: 'loss_scale', label: 'loss scale' }] }],
  },
};

/// A step's counts by site, where `precision` makes them: Q1.15 clamps per
/// boundary (its `clamped`), and each quantized operand's saturated and
/// flushed values (its `operands`: "forward.x.saturated"). Runs saved
/// before 2026-11-28 may hold fp8's own counters, `clamped.e4m3_*`: they
/// are shown as they were recorded.
export function countsIn(precision, step) {
  const counts = countsOf(precision);
  const out = {};
  for (const [site, n] of Object.entries(step.clamped ?? {})) {
    if (counts.boundaries || site.startsWith('e4m3_')) out[site] = n;
  }
  OPERANDS.forEach(([pass, op], i) => {
    const c = step.operands?.[pass][i % 2];
    if (!counts.operands[i] || !c) return;
    out[`${pass}.${op}.saturated`] = c.saturated;
    out[`${pass}.${op}.flushed`] = c.flushed;
  });
  return out;
}
export const seriesIn = (group, run) => (typeof group.series === 'function' ? group.series(run) : group.series);

function css(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || '#888';
}

/// Five ticks evenly spaced on a log axis, at 2 significant digits (the
/// loss rarely spans a decade, so powers of ten would leave it bare).
function logSplits(u, axis, min, max) {
  if (!(min > 0 && max > min)) return [min, max];
  const ticks = [];
  for (let k = 0; k <= 4; k++) {
    const v = Number((min * (max / min) ** (k / 4)).toPrecision(2));
    if (v >= min && v <= max && !ticks.includes(v)) ticks.push(v);
  }
  return ticks;
}

/// uPlot's options for chart `name` (`def`, CHARTS[name]), `width` px wide,
/// drawing `series` ([{run, s, current}]: each segment's series); `logLoss`:
/// the loss on a log axis.
export function options(name, def, width, series, logLoss) {
  const muted = css('--muted');
  const grid = css('--line');
  const axis = { stroke: muted, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
  const lines = [{ label: 'step' }];
  for (const { run, s, current } of series) {
    const color = current ? (s.color ?? run.color) : `${run.color}99`;
    lines.push({
      label: `${run.label} ${s.label}`,
      stroke: color,
      width: current ? 2 : 1.25,
      dash: s.dash ?? (current ? undefined : [6, 4]),
      scale: s.scale ?? 'y',
      spanGaps: true,
      // validations: hollow rings, no line unless asked
      ...(s.points ? { ...(s.line ? {} : { paths: () => null }), points: { show: true, size: current ? 8 : 6, width: 2, stroke: color, fill: css('--card') } } : { points: { show: false } }),
      value: (u, v) => (v === null || v === undefined ? '—' : Number(v.toPrecision(4)).toString()),
    });
  }
  // log loss: the data's own range, not whole decades
  const logRange = (u, min, max) => (min > 0 ? [min / 1.05, max * 1.05] : [min, max]);
  const scales = { x: { time: false }, y: name === 'loss' && logLoss ? { distr: 3, log: 10, range: logRange } : (def.y ?? {}) };
  // 3 significant digits: uPlot's default shows a learning rate of 3e-4 as 0;
  // none below 0 (the asinh axis offers a −1 under its range's 0)
  const values = (u, splits) => splits.map((v) => (v === null || v < 0 ? '' : Number(v.toPrecision(3)).toString()));
  const axes = [{ ...axis, incrs: STEP_TICKS }, { ...axis, values, size: 56 }];
  if (name === 'loss' && logLoss) axes[1].splits = logSplits;
  if (name === 'grad') {
    scales.clip = { range: [0, 1.05] };
    axes[1].label = '‖g‖';
    axes.push({ ...axis, scale: 'clip', side: 1, grid: { show: false }, label: 'clip scale' });
  }
  return { width, height: HEIGHT, series: lines, scales, axes, legend: { live: true }, cursor: { drag: { x: true, y: false } } };
}
