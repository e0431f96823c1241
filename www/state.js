// What the page knows about the worker's side — is there a run, how far
// has it got, is the training loop going, what is in flight — so each
// panel can enable its controls and name the run from one place. Panels
// subscribe and redraw; nothing here talks to the worker.

import { recipeLabel } from './recipes.js';

/// A run's progress before its first step is counted.
const NO_PROGRESS = Object.freeze({
  name: 'run',
  submitted: 0,
  latest: null,
  validatedAt: -1,
  totals: Object.freeze({ skipped: 0, nonfinite: 0, badTokens: 0 }),
});

export const state = {
  /// The worker's run info (`train.create`, `checkpoint.load`, …), or null.
  run: null,
  /// The run's progress, as the Train panel counts it (train-panel.js
  /// writes it, startProgress and setProgress): its name, for chart labels and file names
  /// ("tiny", "tiny-loaded"); the steps submitted (the trainer's count); the
  /// last collected step's StepStats (null: none yet); the step of its last
  /// validation (-1: none since it began or resumed before it); and totals
  /// over its collected steps (skipped steps, non-finite gradients, targets
  /// outside the vocabulary).
  progress: NO_PROGRESS,
  /// The training loop is running (true until it has paused and flushed).
  training: false,
  /// Pause was asked for; the loop stops after its current call.
  stopping: false,
  /// `tokenizer.train`'s answer, or null when the text changed since.
  tokenizer: null,
  /// The task chosen in Setup's text step ({name, options}), or null: text.
  task: null,
  /// The plan says the chosen model fits this adapter.
  fits: false,
  /// Why Rust refuses the recipe editor's recipe, or null (www/recipe-editor.js).
  recipeRefusal: null,
  /// Operations in flight ('corpus', 'tokenizer', 'create', 'inspect', …).
  busy: new Set(),
};

const listeners = new Set();

export function subscribe(fn) {
  listeners.add(fn);
  fn(state);
}

export function update(patch = {}) {
  Object.assign(state, patch);
  for (const fn of listeners) fn(state);
}

/// The run's progress from now on: `patch` over what it was.
export function setProgress(patch) {
  update({ progress: { ...state.progress, ...patch } });
}

/// A new run's progress: nothing counted yet, but `patch`.
export function startProgress(patch) {
  update({ progress: { ...NO_PROGRESS, ...patch } });
}

/// The Train panel's phase: 'none' (no run), 'idle', 'running' or 'pausing'.
export function phase(s) {
  if (!s.run) return 'none';
  if (!s.training) return 'idle';
  return s.stopping ? 'pausing' : 'running';
}

/// Marks `name` busy while `fn` runs.
export async function busy(name, fn) {
  state.busy.add(name);
  update();
  try {
    return await fn();
  } finally {
    state.busy.delete(name);
    update();
  }
}

/// The run's mode in words: "f16 / int8 state", "mine (custom) / fp32
/// state", "fp32 / Muon, fp32 state", "bf16 / int8 state, bf16-sr
/// weights" (`optim`: the config's).
export function modeLabel(precision, optim) {
  const muon = optim.optimizer === 'muon' ? 'Muon, ' : '';
  const master = optim.master === 'bf16-sr' ? ', bf16-sr weights' : '';
  return `${recipeLabel(precision)} / ${muon}${optim.state} state${master}`;
}

export function runMode(run) {
  return modeLabel(run.config.precision, run.config.optim);
}
