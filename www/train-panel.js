// The Train panel: Start / Pause / Single step, the precision and
// optimizer-state switch, and the run's numbers. The panel only sends
// commands and draws: the worker owns the training loop (`train.start`:
// the session trains to the run's end, run::Drive, or until `train.pause`)
// and streams its events (steps arrive two late; the pause drains them),
// the session does the work and what falls due at the steps (validations,
// autosaves, measurements, snapshots, a lost device).

import { $, num, count, attempt, intValue, showError, clearError } from './dom.js';
import { state, subscribe, update, busy, runMode, phase, setProgress, startProgress } from './state.js';
import * as charts from './charts.js';
import { showProductsOnUnits } from './adapter-card.js';
import * as runs from './runs.js';
import { taskLabel } from './tasks.js';
import { resetExamples, showExamples } from './task-examples.js';
import { chosenRecipe, showRecipe } from './recipe-editor.js';

let worker;
/// Resolves the training loop's wait with the stream's `finished` report.
let finishTraining = null;
/// The session's cadence, as the panels' inputs set it: {field: getEvery}.
const cadenceFields = {};
/// Who draws each kind of event besides this panel: {event: [fn]}.
const drawers = {};

/// Steps submitted in this run (the trainer's count): state.progress's.
const submitted = () => state.progress.submitted;

/// The session does `field` (run::Cadence's validateEvery, saveEvery,
/// measureEvery) at every nth step while training, n the number input
/// `inputId` holds (0 or empty: never); a change while the worker trains
/// applies from its next call.
export function every(field, inputId) {
  cadenceFields[field] = () => intValue(inputId);
  $(inputId).addEventListener('input', () => {
    if (!finishTraining) return;
    worker.call('train.cadence', { cadence: cadence() }).catch((e) => showError($('train-error'), e.message));
  });
}

/// `fn(event)` draws each event of `kind` (run::Event's tag) too.
export function on(kind, fn) {
  (drawers[kind] ??= []).push(fn);
}

/// The cadence the panels' inputs set.
function cadence() {
  return Object.fromEntries(Object.entries(cadenceFields).map(([field, getEvery]) => [field, getEvery() || 0]));
}

/// Draws a call's events in order; `info`: the run's, where a device was lost.
function draw(events, info = null) {
  let steps = [];
  const drawSteps = () => {
    if (steps.length) record(steps);
    steps = [];
  };
  for (const e of events) {
    if (e.event === 'stepped') {
      steps.push(e);
      continue;
    }
    drawSteps();
    if (e.event === 'lost') resumeAfterLoss({ lostAt: e.at, resumedFrom: e.from, reason: e.reason, info });
    if (e.event === 'validated') showValidation(e);
    if (e.event === 'snapshot') showSnapshot(e);
    for (const fn of drawers[e.event] ?? []) fn(e);
  }
  drawSteps();
}

/// The settings a run takes at Create model, and where its config holds
/// them: read-only while a run exists, showing its values (a change would
/// not reach it), until "Change for a new model" frees them for the next.
const AT_CREATE = [
  ['lr', (o) => o.schedule.peak],
  ['warmup', (o) => o.schedule.warmup],
  ['steps', (o) => o.schedule.total],
  ['optimizer', (o) => o.optimizer],
  ['master-weights', (o) => o.master ?? 'f32'],
  ['weight-decay', (o) => o.weight_decay],
];
let forNextCreate = false;

/// Makes `info` (from train.create, checkpoint.load, …) the page's run. A
/// new run starts its own row in the runs table and its own chart series,
/// `origin` saying how it began; `continues` (a precision switch) keeps its
/// counters and row, and the previous series stays as an overlay.
export function adoptRun(info, { name = state.progress.name, continues = false, origin = 'created' } = {}) {
  (continues ? setProgress : startProgress)({ name, submitted: info.step });
  showRecipe(info.config.precision);
  $('optim-state').value = info.config.optim.state;
  if (!continues) {
    forNextCreate = false;
    for (const [id, of] of AT_CREATE) $(id).value = String(of(info.config.optim));
  }
  const owner = continues ? runs.switched(info) : runs.begin(info, { name, origin });
  charts.startRun(`${name} · ${runMode(info)}`, info.config.precision, owner);
  // a task run's characters are not a tokenizer of the text
  update({ run: info, tokenizer: info.task ? state.tokenizer : info.tokenizer });
  showTotals();
  showStep();
  $('stat-mode').textContent = runMode(info);
  $('stat-task-row').hidden = !info.task;
  $('stat-task').textContent = info.task ? taskLabel(info.task) : '—';
  $('stat-accuracy-row').hidden = !info.task;
  charts.showAccuracy(Boolean(info.task));
  if (!continues) {
    for (const id of ['stat-loss', 'stat-val', 'stat-accuracy', 'stat-lr', 'stat-tps']) $(id).textContent = '—';
    delete $('stat-val').dataset.loss;
    delete $('stat-val').dataset.step;
    resetExamples(info.task);
  }
}

/// The device was lost and the worker rebuilt the run from its snapshot
/// (`recovered`: {lostAt, resumedFrom, reason, info}): the charts go back
/// to the snapshot's step and the steps after it are trained again.
export function resumeAfterLoss({ lostAt, resumedFrom, reason, info }) {
  charts.rewind(resumedFrom);
  setProgress({ submitted: resumedFrom });
  if (info) update({ run: info });
  const notice = $('train-notice');
  const losses = Number(notice.dataset.losses ?? 0) + 1;
  Object.assign(notice.dataset, { losses, lostAt, resumedFrom });
  notice.textContent = `The GPU device was lost at step ${count(lostAt)} (${reason}); the run resumed by itself from its snapshot `
    + `of step ${count(resumedFrom)}, repeating ${count(lostAt - resumedFrom)} steps.${losses > 1 ? ` (${losses} losses this session.)` : ''}`;
  notice.hidden = false;
  showStep();
}

/// The worker's last snapshot: its step, interval and cost.
function showSnapshot(snapshot) {
  if (!snapshot) return;
  $('stat-snapshot').textContent = `step ${count(snapshot.step)} · every ${count(snapshot.every)} steps · `
    + `${snapshot.ms.toFixed(0)} ms, ${(100 * snapshot.share).toFixed(1)}% of the time`;
  Object.assign($('stat-snapshot').dataset, { step: snapshot.step, every: snapshot.every, share: snapshot.share });
}

/// Counts and draws a batch of step stats (from train.step, flush or
/// inspect); `submittedNow`: the steps submitted by now, where known.
export function record(stats, submittedNow = null) {
  const { progress } = state;
  setProgress({
    submitted: submittedNow === null ? progress.submitted : Math.max(progress.submitted, submittedNow),
    latest: stats.at(-1) ?? progress.latest,
    totals: withSteps(progress.totals, stats),
  });
  charts.addSteps(stats);
  const last = stats.at(-1);
  if (last) {
    $('stat-loss').textContent = Number.isFinite(last.loss) ? last.loss.toFixed(4) : String(last.loss);
    $('stat-lr').textContent = num(last.lr);
    $('stat-tps').textContent = count(last.tokens_per_s);
    showCounts(last, state.run?.config.precision);
    if (last.products_on_units) showProductsOnUnits(last.products_on_units);
    runs.progress(last.step, last.loss);
  }
  showStep();
  showTotals();
}

/// `totals` with `stats`' steps counted in.
function withSteps(totals, stats) {
  const next = { ...totals };
  for (const s of stats) {
    if (s.skipped) next.skipped++;
    next.nonfinite += s.nonfinite_grads;
    next.badTokens += s.out_of_range_targets;
  }
  return next;
}

function showStep() {
  $('stat-step').textContent = count(submitted());
  $('stat-step').dataset.step = submitted();
}

/// The step's counts (Q1.15 boundaries' clamps to ±0.999 per boundary,
/// quantized operands' saturations and flushes to 0), where the recipe
/// makes any.
function showCounts(step, precision) {
  const counts = charts.countsIn(precision, step);
  const sites = Object.keys(counts);
  $('stat-clamped-row').hidden = sites.length === 0;
  if (sites.length === 0) return;
  $('stat-clamped').textContent = sites.map((site) => `${site} ${count(counts[site])}`).join(' · ');
}

function showTotals() {
  const { totals } = state.progress;
  $('stat-skipped').textContent = count(totals.skipped);
  $('stat-skipped').dataset.count = totals.skipped;
  $('stat-nonfinite').textContent = count(totals.nonfinite);
  $('stat-nonfinite').dataset.count = totals.nonfinite;
  if (totals.badTokens > 0) {
    $('stat-nonfinite').textContent += ` · ${count(totals.badTokens)} targets outside the vocabulary`;
  }
}

/// A validation at `step`: the held-out loss, and for a task run its
/// accuracies and examples.
function showValidation({ step, validation }) {
  const { loss, accuracy, char_accuracy: charAccuracy, train_accuracy: trainAccuracy, weight_norm: weightNorm, examples } = validation;
  charts.addValidation(step, loss, { accuracy, charAccuracy, trainAccuracy, weightNorm });
  runs.validated(step, loss, accuracy);
  $('stat-val').textContent = `${loss.toFixed(4)} (step ${count(step)})`;
  Object.assign($('stat-val').dataset, { loss, step }); // unrounded, for tests
  if (accuracy !== null) $('stat-accuracy').textContent = `${percent(accuracy)} · ${percent(charAccuracy)}`;
  showExamples(examples, step);
}

const percent = (x) => `${(100 * x).toFixed(1)}%`;

/// One report of the worker's training loop (protocol.js's STREAM), drawn.
function heard(report) {
  if (report.finished) {
    finishTraining?.(report.finished);
    return;
  }
  draw(report.events, report.info);
  if (report.step !== null) setProgress({ submitted: report.step });
  showStep();
}

/// Start: the worker trains until the run's end or Pause; the panel draws.
async function loop() {
  update({ training: true, stopping: false });
  clearError($('train-error'));
  $('train-status').textContent = 'Training…';
  const finished = new Promise((resolve) => { finishTraining = resolve; });
  worker.call('train.start', { cadence: cadence() })
    .catch((e) => finishTraining({ stopped: 'failed', error: e.message }));
  const { stopped, error } = await finished;
  finishTraining = null;
  if (error) showError($('train-error'), error);
  update({ training: false, stopping: false });
  $('train-status').textContent = stopped === 'ended'
    ? `Paused at the end of the schedule (step ${count(submitted())}); Start goes on at its floor rate.`
    : `Paused at step ${count(submitted())}.`;
}

/// Pause: the worker's loop stops before its next call and pauses.
async function pause() {
  update({ stopping: true });
  $('train-status').textContent = 'Pausing: collecting the last steps…';
  await attempt($('train-error'), () => worker.call('train.pause'));
}

/// One call of `n` steps, drawn.
async function advance(n) {
  const { events, step, info } = await worker.call('train.step', { n, cadence: cadence() });
  draw(events, info);
  setProgress({ submitted: step });
  showStep();
}

async function singleStep() {
  await busy('step', () => attempt($('train-error'), async () => {
    await advance(1);
    record(await worker.call('train.flush'));
    $('train-status').textContent = `Stepped to ${count(submitted())}.`;
  }));
}

/// Validate: the held-out loss at the current weights, without training
/// (how an imported model is evaluated).
async function validateNow() {
  await busy('validate', () => attempt($('train-error'), async () => {
    showValidation({ step: submitted(), validation: await worker.call('train.validate') });
    $('train-status').textContent = `Validated at step ${count(submitted())}.`;
  }));
}

/// A named recipe, the editor's Switch or the optimizer state chosen:
/// before a run it only feeds the next Create; at a pause it converts the
/// run (weights kept).
async function reconfigure() {
  if (!state.run || state.training) return;
  const precision = chosenRecipe();
  const optimState = $('optim-state').value;
  const info = await busy('reconfigure', () => attempt($('train-error'), () =>
    worker.call('train.reconfigure', { precision, optimState })));
  if (info) {
    adoptRun(info, { continues: true });
    $('train-status').textContent = `Switched to ${runMode(info)} at step ${count(submitted())}.`;
  } else {
    // refused: show the run's mode again, but keep the editor's edits
    if (typeof precision === 'string') showRecipe(state.run.config.precision);
    $('optim-state').value = state.run.config.optim.state;
  }
}

function render(s) {
  const idle = s.run && !s.training && s.busy.size === 0;
  $('start').disabled = !idle;
  $('pause').disabled = !s.training || s.stopping;
  $('single-step').disabled = !idle;
  $('validate').disabled = !idle;
  $('precision').disabled = s.training || s.busy.has('reconfigure');
  $('optim-state').disabled = s.training || s.busy.has('reconfigure');
  const locked = Boolean(s.run) && !forNextCreate;
  for (const [id] of AT_CREATE) $(id).disabled = locked;
  $('create-settings-change').hidden = !locked;
  $('create-settings-note').textContent = !s.run ? 'set at Create model'
    : locked ? 'this run\'s, set at Create model' : 'for the next Create model';
  $('train').dataset.phase = phase(s);
  if (!s.run) $('train-status').textContent = 'Create a model first.';
  else if (!s.training && $('train-status').textContent === 'Create a model first.') {
    $('train-status').textContent = 'Ready.';
  }
}

export function initTrainPanel(w) {
  worker = w;
  worker.listen(heard);
  every('validateEvery', 'val-every');
  $('start').addEventListener('click', loop);
  $('pause').addEventListener('click', pause);
  $('single-step').addEventListener('click', singleStep);
  $('validate').addEventListener('click', validateNow);
  // "custom…" opens the editor: its Switch button converts the run
  $('precision').addEventListener('change', () => { if (typeof chosenRecipe() === 'string') reconfigure(); });
  $('recipe-apply').addEventListener('click', reconfigure);
  $('optim-state').addEventListener('change', reconfigure);
  $('create-settings-change').addEventListener('click', () => {
    forNextCreate = true;
    render(state);
    $('lr').focus();
  });
  subscribe(render);
}
