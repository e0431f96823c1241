// The presets' and tasks' runs and the settings of a run as Rust defines
// them (the worker's `run.defaults`, `task.defaults` and `run.settings`),
// asked once each, and what sets a run apart from them: the runs table
// (www/runs.js) lists a run's differences, the URL (www/url-settings.js)
// carries the form's. The form's inputs take their ranges from the settings.

import { $, el } from './dom.js';

let worker;
const asked = new Map();
let known = null;

export function initDefaults(w) {
  worker = w;
  runSettings().catch(() => {}); // the inputs' ranges, early; a failure is asked again
}

/// The presets the Setup form offers (custom aside).
export const presets = () => [...$('preset').options].map((o) => o.value).filter((v) => v !== 'custom');

/// The preset a fresh page shows, and custom's fields start from.
export const firstPreset = () => [...$('preset').options].find((o) => o.defaultSelected).value;

/// The worker's answer to `type` with `payload`, asked once; a failed ask
/// is asked again next time.
function once(type, payload) {
  const key = JSON.stringify([type, payload]);
  if (!asked.has(key)) {
    asked.set(key, worker.call(type, payload).catch((e) => {
      asked.delete(key);
      throw e;
    }));
  }
  return asked.get(key);
}

/// The input of a RunSpec field, if the form has one: its id is the field
/// in kebab case (`weightDecay`: `weight-decay`).
export const inputOf = (field) => $(field.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`));

/// Every setting of a run (Rust's run::settings): [{field, kind, group,
/// min?, max?, choices?, notes?, sections?, help}]; the form's number inputs take
/// their ranges and help from it, its selectors their options.
export async function runSettings() {
  const settings = await once('run.settings', {});
  if (known) return settings; // the inputs have their ranges already
  known = settings;
  for (const s of settings) {
    const input = inputOf(s.field);
    if (input?.tagName === 'SELECT') {
      const option = (i) => el('option', { value: s.choices[i], textContent: `${s.choices[i]} — ${s.notes[i]}` });
      const indices = s.choices.map((_, i) => i);
      // many choices: under their sections' headings, in order of first appearance
      const sections = [...new Set(s.sections ?? [])];
      input.replaceChildren(...(sections.length === 0 ? indices.map(option) : sections.map((label) =>
        el('optgroup', { label }, indices.filter((i) => s.sections[i] === label).map(option)))));
      input.title = s.help;
    }
    if (!input || input.tagName !== 'INPUT') continue;
    if (s.min !== undefined) input.min = s.min;
    if (s.max !== undefined) input.max = s.max;
    input.step = s.kind === 'int' ? '1' : 'any';
    input.title = s.help;
  }
  return settings;
}

/// The settings, once `runSettings` has them: asked first thing
/// (`initDefaults`), they arrive before any preset's defaults the form is
/// filled from, since the worker answers in order.
export function settingsNow() {
  if (!known) throw new Error('the run\'s settings have not come from the worker yet');
  return known;
}

/// [input, setting] of every run setting the form has.
export const settingInputs = () => settingsNow().map((s) => [inputOf(s.field), s]).filter(([input]) => input);

/// The RunSpec fields a run's config holds, besides its model and mode.
export const configSettings = async () => (await runSettings())
  .filter((s) => s.group !== 'mode' && s.group !== 'data').map((s) => s.field);

/// `preset`'s RunSpec.
export const presetDefaults = (preset) => once('run.defaults', { preset });

/// A task's RunSpec for its options (rows hold whole examples): its model
/// (preset custom) and `task` with every option set, those left out at
/// their defaults.
export const taskDefaults = ({ name, options }) => once('task.defaults', { name, options });

export const sameModel = (a, b) => Object.keys(a).every((k) => a[k] === b[k]);

/// What a run of `model` (and `task`, or null) is compared with: the task's
/// RunSpec, the preset whose model it is, or for any other model, custom
/// against the first preset's settings.
export async function baseOf(model, task) {
  if (task) return { preset: 'custom', defaults: await taskDefaults(task) };
  for (const preset of presets()) {
    const d = await presetDefaults(preset);
    if (sameModel(d.model, model)) return { preset, defaults: d };
  }
  return { preset: 'custom', defaults: await presetDefaults(firstPreset()) };
}

/// A run's config (`info.config`: model::TrainConfig) as RunSpec fields.
export function specOf(config) {
  const { shape, optim } = config;
  const { schedule } = optim;
  return {
    model: config.model, batch: shape.batch, seq: shape.seq, precision: config.precision, optimizer: optim.optimizer, optimState: optim.state, masterWeights: optim.master ?? 'f32',
    lr: schedule.peak, warmup: schedule.warmup, steps: schedule.total, minLrRatio: schedule.min_ratio,
    weightDecay: optim.weight_decay, clip: optim.max_grad_norm, beta1: optim.beta1, beta2: optim.beta2, eps: optim.eps, seed: config.seed,
  };
}

/// Equal up to f32 rounding (the clip is an f32 in Rust).
const same = (a, b) => a === b || (typeof a === 'number' && typeof b === 'number' && Math.abs(a - b) <= 1e-7 * Math.abs(b));

/// The `keys` whose values in `spec` differ from `base`'s: [[key, value]].
export function differences(spec, base, keys) {
  return keys.filter((k) => spec[k] !== undefined && !same(spec[k], base[k])).map((k) => [k, spec[k]]);
}
