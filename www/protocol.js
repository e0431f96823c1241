// The page ⇄ training worker protocol, defined once: www/worker-client.js
// sends requests and reads responses with it, www/worker.js registers a
// handler for each request against it (a request without a handler, or a
// handler for no request, stops the worker at start), and an unknown
// request type is refused on the page at once. Shared by the page and the
// worker: imports nothing.
//
// The worker answers one request at a time, in arrival order.
//
//   page → worker   {id, type, payload}              a request (REQUESTS[type])
//   worker → page   {stream: report}                 the training loop's, unasked (STREAM)
//                   {id, progress}                   progress before the answer (some requests)
//                   {id, result}                     the answer
//                   {id, error, recovered?, gone?}   a failure: its message, and where the GPU
//                                                    device was lost, what became of the run
//
// The worker owns the training loop: `train.start` starts it and answers
// at once; each call of the loop streams its events, the other requests
// are answered between calls, `train.pause` stops it before its next call,
// and the stream's `finished` report says how it ended.
//
// `train.start` and `train.step` train through a lost GPU device: the session rebuilds the
// run from its snapshot on a new device and says so in a `lost` event.
// Any other call that fails because the device was lost (the device's lost
// callback tells, in the session) has the session rebuild it and fails with
// `recovered: {lostAt, resumedFrom, reason, info}`; where the session gives up (no new device, or three losses
// without progress), a call fails with `gone: {lostAt, snapshotStep,
// reason}` after the snapshot was kept in origin-private storage for a reload.
//
// event: a run::Event, tagged by `event`: stepped (a StepStats), inspected,
//        measured {step, ranges, formats}, validated {step, validation},
//        saved {step, writeError: the last background write's failure or
//        null}, snapshot {step, every, ms, share, bytes}, lost {at, reason, from}
//
// recipe: a precision recipe (model::recipe): a named recipe's name, or a
//        custom recipe's parts {name, version, weights, boundaries, forward,
//        dgrad, wgrad, wide, lossScaling?}; run info's config.precision is one too
// spec: a run::RunSpec: {preset, model?, task?: {name, options: {key:
//        integer}}} and the settings run.settings lists (run::settings;
//        RunSpec says which may be left out for their shared defaults)
// run info: what train.create, checkpoint.load, … answer (parameters,
//        memory, tokens, config, task, step, …: web::WorkerRun::info)

/// Every request: its payload, what it resolves with, and its progress
/// values where it sends some.
export const REQUESTS = deepFreeze({
  adapter: { payload: '{}', result: 'AdapterReport' },
  'corpus.builtin': { payload: '{}', result: '[{name, bytes}]: the Brown corpus replaces the files' },
  'corpus.add': { payload: '{name, bytes: ArrayBuffer}', result: '{name, bytes}; a refused file rejects, naming it' },
  'corpus.clear': { payload: '{}', result: '[]' },
  'corpus.files': { payload: '{}', result: '[{name, bytes}]' },
  'tokenizer.train': { payload: '{vocab}', result: '{vocab_size, fingerprint, tokens}', progress: '{fraction}' },
  'run.defaults': { payload: '{preset}', result: "spec: what a run of the preset starts from (Rust's RunSpec::preset)" },
  'run.settings': { payload: '{}', result: '[{field, kind, group, min?, max?, choices?, notes?, help}]: every setting (run::settings)' },
  'recipe.book': {
    payload: '{}',
    result: "{recipes: {name: parts}, parts: {format, blocks, rounding, weights, boundaries}, defaults: {lossScaling}}: "
      + "every named recipe's parts, what each part takes, what an optional part starts from",
  },
  'recipe.check': {
    payload: '{recipe: a name or parts}',
    result: "the recipe as a run takes it (a named recipe's name, else every part); a refused one rejects with the reason",
  },
  tasks: { payload: '{}', result: '[{name, title, summary, options: [{name, summary, default, min, max}]}]' },
  'task.defaults': {
    payload: '{name, options?}',
    result: "spec: the task's preset for those options (a custom model, rows of whole examples; `task` with every option set)",
  },
  'model.plan': {
    payload: '{spec}',
    result: "{parameters, fits, reason, modes: [{precision, optim_state, memory}]}: every named recipe's, and spec's custom one",
  },
  'train.create': {
    payload: '{spec}',
    result: 'run info; a spec with `task` trains on its examples: no text or tokenizer needed',
  },
  'train.start': {
    payload: '{cadence: {validateEvery, saveEvery, measureEvery, inspectEvery} (run::Cadence)}',
    result: 'null, at once: the run trains to its end (run::Drive) or until paused, streaming its events (STREAM)',
  },
  'train.pause': { payload: '{}', result: 'null: the loop stops before its next call, pauses, and streams `finished`' },
  'train.cadence': {
    payload: '{cadence} (as train.start)',
    result: "null: the drive under way follows it from its next call (its end stays); nothing without one",
  },
  'train.step': {
    payload: '{n, cadence: {validateEvery, saveEvery, measureEvery, end?} (run::Cadence)}',
    result: '{events: [event] (steps complete two late), step: steps submitted, info: run info where a device was lost, else null}',
  },
  'train.flush': { payload: '{}', result: '[StepStats] of every submitted step' },
  'train.validate': {
    payload: '{}',
    result: '{loss, accuracy, char_accuracy, train_accuracy, weight_norm, examples: [{prompt, answer, predicted}]} (text runs: accuracies null, no examples)',
  },
  'train.inspect': {
    payload: '{}',
    result: "{step, tensors (each with its step's survival), memory, steps, kernels, kernels_error}",
  },
  'train.reconfigure': { payload: '{precision: a name or parts, optimState}', result: 'run info (weights kept, state converted)' },
  look: {
    payload: '{text, topK}',
    result: '{step, precision, tokens, ids, heads, truncated, predictions, attention: [Float32Array [heads, T, T] per layer]}',
  },
  ranges: {
    payload: '{}',
    result: '{step, ranges: [{tensor, kind, layer, count, zeros, rms, binades: [[e, count]], outside: [{format, overflow, …}]}], '
      + 'formats: [{name, smallest, normal, largest}], steps: [StepStats]}',
  },
  generate: { payload: '{prompt, temperature, topK, length, seed}', result: '{text}', progress: '{token, text, prob}' },
  'checkpoint.save': { payload: '{}', result: 'ArrayBuffer (a .safetensors file)' },
  'hf.export': {
    payload: '{folder}',
    result: 'ArrayBuffer (a .zip of folder/: config.json, model.safetensors, generation_config.json, tokenizer.json, for transformers)',
  },
  'checkpoint.load': {
    payload: '{bytes: ArrayBuffer}',
    result: "run info (a text run's, where no text is loaded, on the built-in corpus; a task run's reads none)",
  },
  'hf.import': {
    payload: '{files: {path: ArrayBuffer} | zip: ArrayBuffer, changes}',
    result: "run info: a new run of a Hugging Face Llama folder, an imported model's settings (RunSpec::fine_tune) with "
      + "changes (run::Changes: the form's differences from its preset); files (or what a zip's "
      + "entries declare) beyond www/limits.js's caps are refused before anything is unpacked or handed to the module",
  },
  memory: { payload: '{}', result: '{gpuBuffers, gpuBytes, wasmBytes, heapBytes}: what the worker holds' },
  'checkpoint.stored': { payload: '{}', result: '{step, bytes, saved_at} or null' },
  'checkpoint.restore': { payload: '{}', result: 'run info, from origin-private storage' },
  'kernels.get': { payload: '{}', result: '{config, pinned}: the GEMM variants chosen on this adapter' },
  'kernels.pin': { payload: '{json}', result: "{config, pinned}: use this kernel config as it is (a run's reproducible speed)" },
  'kernels.unpin': { payload: '{}', result: '{config, pinned}: tune (or reuse what was tuned) again' },
});

/// What the training loop streams, unasked: a call's report, then one
/// `finished` report when the loop is over.
export const STREAM = deepFreeze({
  call: '{events: [event], step: steps submitted (null after the pause), info: run info where a device was lost, else null}',
  finished: "{finished: {stopped: 'ended' | 'paused' | 'failed', error?, recovered?, gone?}} (a failure as Failure)",
});

/// The request types, in the order above.
export const REQUEST_TYPES = Object.freeze(Object.keys(REQUESTS));

function deepFreeze(table) {
  for (const entry of Object.values(table)) Object.freeze(entry);
  return Object.freeze(table);
}

/// Throws unless `type` is a request of the protocol.
export function checkRequestType(type) {
  if (!Object.hasOwn(REQUESTS, type)) throw new Error(`unknown request ${JSON.stringify(type)}`);
}

/// `handlers` ({type: (payload, progress) => result}), checked to answer
/// every request and nothing else.
export function registerHandlers(handlers) {
  const missing = REQUEST_TYPES.filter((type) => typeof handlers[type] !== 'function');
  const unknown = Object.keys(handlers).filter((type) => !Object.hasOwn(REQUESTS, type));
  if (missing.length > 0) throw new Error(`the worker has no handler for ${missing.join(', ')}`);
  if (unknown.length > 0) throw new Error(`the worker has handlers for no request: ${unknown.join(', ')}`);
  return Object.freeze({ ...handlers });
}

// --- messages --------------------------------------------------------

/**
 * @typedef {{id: number, type: string, payload: object}} Request
 * @typedef {{lostAt: number, resumedFrom: number, reason: string, info: object}} Recovered
 * @typedef {{lostAt: number, snapshotStep: number | null, reason: string}} Gone
 * @typedef {{error: string, recovered?: Recovered, gone?: Gone}} Failure
 * @typedef {{id: number, progress: *} | {id: number, result: *} | ({id: number} & Failure)} Response
 */

/// The message asking for `type` with `payload`; an unknown type throws.
export function requestMessage(id, type, payload) {
  checkRequestType(type);
  return { id, type, payload };
}

export const progressMessage = (id, progress) => ({ id, progress });
export const resultMessage = (id, result) => ({ id, result });
/// `failure`: {error} or {error, recovered} or {error, gone}.
export const failureMessage = (id, failure) => ({ id, ...failure });

/// The training loop's `report` (STREAM), as the worker posts it.
export const streamMessage = (report) => ({ stream: report });

/// What a response is: 'progress', 'result' or 'failure'.
export function responseKind(message) {
  if (message.progress !== undefined) return 'progress';
  return message.error === undefined ? 'result' : 'failure';
}

/// A failure response as an Error, with its `recovered` or `gone` set.
export function failureError({ error, recovered, gone }) {
  return Object.assign(new Error(error), { recovered, gone });
}
