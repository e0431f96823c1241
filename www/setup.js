// Setup, steps 2 and 3: the tokenizer, the model and its memory plan, and
// Create model. The plan comes from the worker (`model.plan`): Rust sizes
// every buffer and says whether this adapter can hold them. A task chosen
// in step 1 (`state.task`) fills the form from its preset and needs no
// tokenizer; going back to text restores the form as it was.

import { $, el, bytes, count, attempt, intValue, numberValue } from './dom.js';
import { state, subscribe, update, busy } from './state.js';
import { adoptRun } from './train-panel.js';
import { taskLabel } from './tasks.js';
import { differences, firstPreset, presetDefaults, settingInputs, settingsNow, taskDefaults } from './defaults.js';
import { chosenRecipe } from './recipe-editor.js';
import { recipeLabel } from './recipes.js';

let worker;

// The current preset's run as Rust defines it (run::RunSpec::preset, via
// the worker's `run.defaults`): the form is filled from it.
let defaults = null;

const customInputs = () => [...document.querySelectorAll('#custom-fields [data-field]')];

function customModel() {
  const model = {};
  for (const input of customInputs()) {
    const f = input.dataset.field;
    model[f] = input.type === 'checkbox' ? input.checked
      : (f === 'rope_theta' || f === 'rms_norm_eps') ? Number(input.value) : Math.round(Number(input.value));
  }
  return model;
}

/// The model's vocabulary as the form stands.
function modelVocab() {
  const preset = $('preset').value;
  return preset === 'custom' ? customModel().vocab_size : defaults?.model.vocab_size;
}

/// The run the form describes: RunSpec in crate/src/run/spec.rs.
export function spec() {
  const preset = $('preset').value;
  const s = { preset };
  for (const [input, setting] of settingInputs()) {
    const read = { int: intValue, float: numberValue }[setting.kind];
    s[setting.field] = read ? read(input.id) : input.value;
  }
  s.precision = chosenRecipe(); // a name, or the editor's parts
  if (preset === 'custom') s.model = customModel();
  if (state.task) s.task = state.task;
  return s;
}

/// What the form changes from its preset's (or task's) defaults, as
/// run::Changes: an imported model starts from its own defaults
/// (RunSpec::fine_tune) and takes only these, as the CLI takes its flags.
export async function changes() {
  const preset = $('preset').value;
  const base = state.task ? await taskDefaults(state.task)
    : await presetDefaults(preset === 'custom' ? firstPreset() : preset);
  return Object.fromEntries(differences(spec(), base, settingsNow().map((s) => s.field)));
}

/// The form's inputs a run spec fills, each with its value in a spec: the
/// settings but the modes (which a preset leaves as the person chose).
const filledBy = () => [
  [$('vocab'), (d) => d.model.vocab_size],
  ...settingInputs().filter(([, s]) => s.group !== 'mode').map(([input, s]) => [input, (d) => d[s.field]]),
  ...customInputs().map((input) => [input, (d) => d.model[input.dataset.field]]),
];

const valueOf = (input) => (input.type === 'checkbox' ? input.checked : input.value);
const put = (input, v) => { if (input.type === 'checkbox') input.checked = v; else input.value = v; };

/// Fills the form from a run spec (a preset's or a task's); with `follow`
/// (the spec filled last), only the inputs still at its values, so a
/// person's own edits stay.
function fill(d, follow = null) {
  for (const [input, of] of filledBy()) {
    if (!follow || String(valueOf(input)) === String(of(follow))) put(input, of(d));
  }
  // values set by code fire no input events: the URL (url-settings.js) hears this
  $('setup').dispatchEvent(new Event('filled'));
}

async function presetChanged() {
  const preset = $('preset').value;
  $('custom-fields').hidden = preset !== 'custom';
  if (preset !== 'custom') {
    const d = await attempt($('setup-error'), () => worker.call('run.defaults', { preset }));
    if (!d || preset !== $('preset').value) return; // failed, or another preset was chosen meanwhile
    defaults = d;
    fill(d); // custom starts from the last preset chosen
  }
  planSoon();
  showTokenizer(state);
}

// --- a task -----------------------------------------------------------

/// The task as last seen; the form as it was before a task filled it
/// ([input, value] pairs); the task preset it was filled from last.
let seenTask = null;
let beforeTask = null;
let taskFill = null;

/// The task chosen changed (`task`, or null: back to text). Its preset
/// depends on its options (a row holds whole examples): a new option
/// refills what the person has not changed.
async function taskChanged(task) {
  if (task === null) {
    for (const [input, v] of beforeTask ?? []) put(input, v);
    beforeTask = null;
    taskFill = null;
    $('setup').dispatchEvent(new Event('filled'));
  } else {
    beforeTask ??= [$('preset'), ...filledBy().map(([input]) => input)].map((input) => [input, valueOf(input)]);
    const d = await attempt($('setup-error'), () => worker.call('task.defaults', task));
    if (!d || state.task !== task) return; // failed, or another choice meanwhile
    $('preset').value = 'custom';
    fill(d, taskFill?.task.name === task.name ? taskFill : null);
    taskFill = d;
  }
  // a task's model is sized in custom; its vocabulary is the task's characters
  $('preset').disabled = task !== null;
  document.querySelector('#custom-fields [data-field="vocab_size"]').disabled = task !== null;
  $('custom-fields').hidden = $('preset').value !== 'custom';
  planSoon();
  showTokenizer(state);
}

// --- the plan ---------------------------------------------------------

let planTimer = 0;
let planSeq = 0;

function planSoon() {
  clearTimeout(planTimer);
  planTimer = setTimeout(plan, 200);
}

async function plan() {
  const mine = ++planSeq;
  const status = $('plan-status');
  let result;
  try {
    result = await worker.call('model.plan', { spec: spec() });
  } catch (e) {
    if (mine !== planSeq) return;
    status.textContent = e.message;
    status.dataset.fits = 'false';
    for (const id of ['plan', 'plan-all']) $(id).querySelector('tbody').textContent = '';
    update({ fits: false });
    return;
  }
  if (mine !== planSeq) return; // a newer plan is on its way
  status.dataset.fits = String(result.fits);
  status.textContent = result.fits
    ? `${count(result.parameters)} parameters; this adapter can hold it.`
    : `${count(result.parameters)} parameters. This adapter cannot hold it: ${result.reason}`;
  // the chosen precision and state's row; every row behind the disclosure
  const [chosenBody, allBody] = ['plan', 'plan-all'].map((id) => $(id).querySelector('tbody'));
  chosenBody.textContent = allBody.textContent = '';
  const chosen = recipeLabel(chosenRecipe());
  const row = (m, selected) => {
    const r = m.memory;
    const precision = recipeLabel(m.precision);
    return el('tr', { className: selected ? 'selected' : '', dataset: { precision, optimState: m.optim_state } },
      [precision, m.optim_state, r.master, r.grads, r.moments, r.mirror, r.activations, r.total].map((v, i) =>
        el('td', { textContent: i < 2 ? v : (v === 0 ? '—' : bytes(v)) })));
  };
  for (const m of result.modes) {
    const selected = recipeLabel(m.precision) === chosen && m.optim_state === $('optim-state').value;
    if (selected) chosenBody.append(row(m, false));
    allBody.append(row(m, selected));
  }
  $('plan-more').querySelector('summary').textContent = `Memory of every precision and optimizer state (${result.modes.length})`;
  update({ fits: result.fits });
}

// --- the tokenizer ----------------------------------------------------

function showTokenizer(s) {
  const info = $('tokenizer-info');
  if (s.task) {
    info.dataset.state = 'task';
    info.textContent = `Not needed: the task has its own vocabulary of ${count(modelVocab())} characters.`;
    return;
  }
  const t = s.tokenizer;
  if (!t) {
    info.dataset.state = 'none';
    info.textContent = 'Not trained yet: byte-level BPE; its vocabulary must equal the model\'s.';
    return;
  }
  const vocab = modelVocab();
  info.dataset.state = t.vocab_size === vocab ? 'ready' : 'mismatch';
  info.dataset.fingerprint = t.fingerprint;
  info.textContent = `${count(t.vocab_size)} tokens in the vocabulary · the text is ${count(t.tokens)} tokens · fingerprint ${t.fingerprint}`
    + (t.vocab_size === vocab ? '' : ` — the model needs ${count(vocab)}: train it again with that vocabulary.`);
}

async function trainTokenizer() {
  const bar = $('tokenizer-progress');
  bar.value = 0;
  bar.hidden = false;
  const result = await busy('tokenizer', () => attempt($('setup-error'), () =>
    worker.call('tokenizer.train', { vocab: intValue('vocab') }, ({ fraction }) => { bar.value = fraction; })));
  bar.hidden = true;
  if (result) update({ tokenizer: result });
}

// --- create -----------------------------------------------------------

async function create() {
  const s = spec();
  const info = await busy('create', () => attempt($('setup-error'), () => worker.call('train.create', { spec: s })));
  if (!info) return;
  adoptRun(info, { name: s.task?.name ?? s.preset });
  $('create-status').textContent = `Created: ${count(info.parameters)} parameters, ${bytes(info.memory.total)} on the GPU, `
    + (info.task ? `the task ${taskLabel(info.task)}.` : `${count(info.train_tokens)} training tokens and ${count(info.validation_tokens)} held out.`);
}

function render(s) {
  const working = s.busy.has('corpus') || s.busy.has('tokenizer') || s.busy.has('create');
  const source = s.task ?? s.tokenizer; // what the run will read
  $('tokenizer').disabled = Boolean(s.task);
  $('tokenizer-train').disabled = working || s.training;
  $('create').disabled = working || s.training || !s.fits || !source || Boolean(s.recipeRefusal);
  $('create').title = !source ? 'train a tokenizer first' : !s.fits ? 'the plan says this adapter cannot hold the model'
    : s.recipeRefusal ? 'the custom recipe is refused (see Train)' : '';
  if (s.task !== seenTask) {
    seenTask = s.task;
    taskChanged(s.task);
  }
  showTokenizer(s);
}

export function initSetup(w) {
  worker = w;
  $('preset').addEventListener('change', presetChanged);
  // every choice the memory table depends on
  for (const id of ['batch', 'seq', 'lr', 'warmup', 'steps', 'precision', 'optim-state', 'optimizer', 'master-weights', 'recipe-editor']) {
    $(id).addEventListener('input', planSoon);
  }
  for (const input of customInputs()) {
    input.addEventListener('input', () => {
      if (input.dataset.field === 'vocab_size') $('vocab').value = input.value;
      planSoon();
      showTokenizer(state);
    });
  }
  $('tokenizer-train').addEventListener('click', trainTokenizer);
  $('create').addEventListener('click', create);
  subscribe(render);
  presetChanged();
}
