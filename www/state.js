// What the page knows about the worker's side — is there a run, is the
// training loop going, what is in flight — so each panel can enable its
// controls from one place. Panels subscribe and redraw; nothing here talks
// to the worker.

export const state = {
  /// The worker's run info (`train.create`, `checkpoint.load`, …), or null.
  run: null,
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

/// The run's mode in words: "f16 / int8 state".
export function modeLabel(precision, optimState) {
  return `${precision} / ${optimState} state`;
}

export function runMode(run) {
  return modeLabel(run.config.precision, run.config.optim.state);
}
