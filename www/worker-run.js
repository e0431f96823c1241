// The training worker's run: the wasm module (loaded once), the text the
// run reads (a Data: its files and tokenizer), and the trainer (the wasm
// session, which keeps its own snapshot to rebuild from after a lost device).

import init, { Data, pageLimits } from '../pkg/webtrain.js';
import { CHECKPOINT_CAP, JSON_FILE_CAP, MODEL_FILES_CAP } from './limits.js';

/// The wasm module as it loads (its exports, `memory` among them), its caps
/// checked against the page's: every request waits for it first.
export const ready = init().then((module) => {
  checkLimits();
  return module;
});

/// www/limits.js spells the crate's caps again, to refuse a file before it
/// is read: a worker whose two disagree does not start (every e2e test
/// would fail), rather than let one side refuse what the other let through.
function checkLimits() {
  const rust = pageLimits();
  const page = { modelFiles: MODEL_FILES_CAP, jsonFile: JSON_FILE_CAP, checkpoint: CHECKPOINT_CAP };
  for (const [name, cap] of Object.entries(page)) {
    if (rust[name] !== cap) throw new Error(`www/limits.js gives ${name} a cap of ${cap} bytes, the crate ${rust[name]}: make them agree`);
  }
}

let data = null;
let trainer = null;

/// The text, made on first use.
export function corpus() {
  if (!data) data = new Data();
  return data;
}

/// The run's trainer, or null before a model is made (or after the device was lost for good).
export function currentTrainer() {
  return trainer;
}

/// The run's trainer; throws where there is none yet.
export function needTrainer() {
  if (!trainer) throw new Error('create a model first (Setup → Create model)');
  return trainer;
}

/// `next` (or none) is the run from now on; the old one is freed.
export function replaceTrainer(next) {
  trainer?.free();
  trainer = next;
}

/// A loaded or imported run replaces the current one; the text is read
/// with its tokenizer from now on (not before: a refused run changes
/// nothing), unless it is a task run, whose characters are its own.
/// Resolves with its run info.
export function adopt(next) {
  if (!next.info().task) corpus().setTokenizer(next.tokenizerJson());
  replaceTrainer(next);
  return trainer.info();
}
