// What the page takes of a user's file, checked on the sizes a file or a
// zip declares before anything is read, unpacked or handed to the wasm
// module. The module is wasm32: one 4 GiB address space, no allocation
// over 2 GiB, and a copy it cannot hold aborts it (a panic: 'unreachable',
// the module unusable). The numbers are the crate's, which checks them
// again before it copies a file in: MODEL_FILES_CAP and JSON_FILE_CAP are
// hf::Limits::PAGE (crate/src/hf/mod.rs), CHECKPOINT_CAP is
// checkpoint::PAGE_MAX_BYTES (the worker does not start where they differ:
// www/worker-run.js); the text's cap is TEXT_CAP (www/corpus.js).
//
// - A model folder's files: at most 1 GiB in all. The module holds them,
//   the f32 weights made from them (at most 1 GiB more, checked by the
//   crate) and the run; the base preset (110 M parameters) exports a
//   420 MiB model.safetensors.
// - One JSON file of it (config.json, tokenizer.json, the shard index): at
//   most 64 MiB; parsed into trees several times its size, it is still some
//   seven times Llama 3's 9 MB tokenizer.json.
// - A zip of a folder: at most 2 GiB, read whole before its directory says
//   what it holds (twice the model's cap: room for a pytorch_model.bin
//   beside it); what its entries declare they unpack to is checked before
//   any is unpacked.
// - A checkpoint: at most 1.5 GiB. The module holds the file and the
//   weights and moments read from it, as large again; the base preset's
//   run with fp32 moments is 1.23 GiB.

import { bytes } from './format.js';

export const MODEL_FILES_CAP = 2 ** 30;
export const JSON_FILE_CAP = 64 * 2 ** 20;
export const ZIP_CAP = 2 * 2 ** 30;
export const CHECKPOINT_CAP = 1.5 * 2 ** 30;

const WHY = 'the page\'s wasm module (4 GiB of memory for the files, the model and the run) takes no more';

/// Refuses, by name, a model folder's files ([path, size] of each file the
/// import would read) beyond the caps; `unpacked`: the sizes are what a
/// zip's entries declare, checked before any is unpacked.
export function checkModelFiles(sizes, { unpacked = false } = {}) {
  const is = unpacked ? 'would unpack to' : 'is';
  const cli = 'the CLI (webtrain train --from-hf) has no such cap';
  let total = 0;
  for (const [path, size] of sizes) {
    if (/\.json$/i.test(path) && size > JSON_FILE_CAP) {
      throw new Error(`${path}: ${is} ${bytes(size)}, beyond the cap of ${bytes(JSON_FILE_CAP)} for a JSON file of a model folder: ${WHY}; ${cli}`);
    }
    if (size > MODEL_FILES_CAP) {
      throw new Error(`${path}: ${is} ${bytes(size)}, beyond the cap of ${bytes(MODEL_FILES_CAP)} for a model folder's files: ${WHY}; ${cli}`);
    }
    total += size;
  }
  if (total > MODEL_FILES_CAP) {
    throw new Error(`the model folder: its files ${unpacked ? 'would unpack to' : 'take'} ${bytes(total)} in all, beyond the cap of ${bytes(MODEL_FILES_CAP)} for a model folder's files: ${WHY}; ${cli}`);
  }
}

/// Refuses a zip the page would have to read whole beyond ZIP_CAP.
export function checkZip(name, size) {
  if (size > ZIP_CAP) {
    throw new Error(`${name}: is ${bytes(size)}, beyond the cap of ${bytes(ZIP_CAP)} for a zip the page reads whole: `
      + 'import the folder itself (Import transformers folder… reads only its model files), or zip only config.json, the .safetensors and tokenizer.json');
  }
}

/// Refuses a checkpoint beyond CHECKPOINT_CAP.
export function checkCheckpoint(name, size) {
  if (size > CHECKPOINT_CAP) {
    throw new Error(`${name}: is ${bytes(size)}, beyond the cap of ${bytes(CHECKPOINT_CAP)} for a checkpoint the page loads: ${WHY}; `
      + 'the CLI (webtrain train --resume) has no such cap');
  }
}
