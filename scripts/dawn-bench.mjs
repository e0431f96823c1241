// Training steps of the wasm build (pkg/) on Dawn, Chrome's WebGPU
// implementation, in Node (the npm package `webgpu`: dawn.node), without a
// browser: the same Trainer the page's worker makes (Trainer.create on text
// and a tokenizer, advance, flush), per preset × precision, W steps to warm
// up then N timed. One JSON line per case on stdout, its fields named as
// `webtrain bench --what steps` names them (preset, precision, optim_state,
// batch, seq, parameters, step_ms, tokens_per_s) plus engine "dawn" and the
// adapter; progress on stderr. docs/PERFORMANCE.md compares it with native.
//
//   node scripts/dawn-bench.mjs --presets tiny --precisions fp32 --steps 8 [--warmup 2 (≥ 1)]
//     [--states fp32] [--text FILE] [--text-bytes N] [--dawn FLAG]… [--poll auto|timer|immediate] [--profile]
//     [--matrix-units auto|off]
//
// On Linux without a GPU: VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json.
// --dawn passes a flag to dawn.node's create(), e.g.
// enable-dawn-features=allow_unsafe_apis,disable_robustness (toggles, to
// attribute time; the product cannot rely on them). --poll: dawn.node's
// own event polling spins a core while the host waits (immediate); timer
// polls about every millisecond instead; auto (the default) takes timer on
// a CPU adapter, whose threads need that core (docs/PERFORMANCE.md).
// --profile adds one inspected step's GPU time per kernel (the page's
// Inspect panel: each dispatch in a timed pass of its own).
// --matrix-units auto (the default) asks for Dawn's subgroup matrices as
// the page's worker does (www/matrix-units-patch.js; dawn.node offers them
// with --dawn enable-dawn-features=allow_unsafe_apis, and on NVIDIA also
// vulkan_enable_f16_on_nvidia): amp-f16's products then run on them.

import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { requestSubgroupMatrices } from '../www/matrix-units-patch.js';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..');

const USAGE = `usage: node scripts/dawn-bench.mjs [--presets tiny,small] [--precisions fp32] [--states fp32]
  [--steps N] [--warmup W] [--text FILE] [--text-bytes N] [--dawn FLAG]… [--poll auto|timer|immediate] [--profile]
  [--matrix-units auto|off]`;

/// The command line (node:util's parseArgs): lists split at commas, counts checked.
function parseCommandLine(argv) {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      options: {
        presets: { type: 'string', default: 'tiny' },
        precisions: { type: 'string', default: 'fp32' },
        states: { type: 'string', default: 'fp32' },
        steps: { type: 'string', default: '8' },
        warmup: { type: 'string', default: '2' },
        text: { type: 'string', default: process.env.WEBTRAIN_DAWN_TEXT || join(root, 'public/corpus/brown.txt') },
        'text-bytes': { type: 'string', default: String(1 << 18) },
        dawn: { type: 'string', multiple: true, default: [] },
        poll: { type: 'string', default: 'auto' },
        profile: { type: 'boolean', default: false },
        'matrix-units': { type: 'string', default: 'auto' },
        help: { type: 'boolean', short: 'h', default: false },
      },
    }).values;
  } catch (e) {
    fail(`${e.message}\n${USAGE}`);
  }
  if (parsed.help) { console.log(USAGE); process.exit(0); }
  const list = (v) => v.split(',').map((x) => x.trim()).filter(Boolean);
  const count = (name, min) => {
    const n = Number(parsed[name]);
    if (!Number.isInteger(n) || n < min) fail(`--${name} takes a whole number ≥ ${min}, not ${JSON.stringify(parsed[name])}`);
    return n;
  };
  if (!['auto', 'timer', 'immediate'].includes(parsed.poll)) fail(`--poll takes auto, timer or immediate, not ${JSON.stringify(parsed.poll)}`);
  if (!['auto', 'off'].includes(parsed['matrix-units'])) fail(`--matrix-units takes auto or off, not ${JSON.stringify(parsed['matrix-units'])}`);
  return {
    presets: list(parsed.presets),
    precisions: list(parsed.precisions),
    states: list(parsed.states),
    steps: count('steps', 1),
    warmup: count('warmup', 1),
    text: parsed.text,
    textBytes: count('text-bytes', 1024),
    dawn: parsed.dawn,
    poll: parsed.poll,
    profile: parsed.profile,
    matrixUnits: parsed['matrix-units'],
  };
}

function fail(message) {
  console.error(`dawn-bench: ${message}`);
  process.exit(2);
}

/// dawn.node as the browser's `navigator.gpu`. wgpu's WebGPU backend looks
/// for a `Window` (or a worker scope) on the global object before it reads
/// `navigator.gpu`, and the wasm bindings check GPU objects by class.
async function installWebGpu(flags, poll, matrixUnits) {
  let webgpu;
  try {
    webgpu = await import('webgpu');
  } catch (e) {
    fail(`the npm package webgpu (dawn.node) could not be loaded (${e.message}): run npm ci`);
  }
  Object.assign(globalThis, webgpu.globals);
  const gpu = webgpu.create(flags);
  globalThis.navigator = { gpu };
  globalThis.Window ??= class Window {};
  if (matrixUnits === 'auto') requestSubgroupMatrices();
  const adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
  if (!adapter) {
    fail('Dawn offered no WebGPU adapter: without a GPU on Linux, point Vulkan at SwiftShader '
      + '(VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json) or install mesa-vulkan-drivers');
  }
  // dawn.node polls its events with setImmediate, again and again while
  // any promise of it is pending (crbug.com/dawn/1127): while the host
  // waits for a step, that spins a core. Where the adapter computes on the
  // CPU (SwiftShader), its threads need that core, and Chrome waits without
  // spinning: a timer (about 1 ms) stands in for its wait. dawn.node looks
  // the function up on the global object at each poll; nothing else here
  // calls it. On a GPU the spin costs a spare core and no latency.
  const cpu = adapter.info.isFallbackAdapter || /swiftshader|llvmpipe|lavapipe/i.test(adapter.info.architecture + adapter.info.description);
  const mode = poll === 'auto' ? (cpu ? 'timer' : 'immediate') : poll;
  if (mode === 'timer') globalThis.setImmediate = (fn, ...args) => setTimeout(fn, 0, ...args);
  const { vendor, architecture, device, description } = adapter.info;
  return { vendor, architecture, device, description, features: [...adapter.features].sort(), poll: mode };
}

/// The wasm package, loaded from its bytes (Node has no fetch of file URLs).
async function loadPackage() {
  const js = join(root, 'pkg/webtrain.js');
  const wasm = join(root, 'pkg/webtrain_bg.wasm');
  if (!existsSync(js) || !existsSync(wasm)) fail(`${js} or its .wasm is missing: run scripts/build.sh first`);
  const pkg = await import(js);
  pkg.initSync({ module: readFileSync(wasm) });
  return pkg;
}

/// The text runs train on: the first `bytes` of `path`, cut at a line's end.
function readText(path, bytes) {
  if (!existsSync(path)) fail(`no text at ${path}: run scripts/build.sh first (it writes public/corpus/brown.txt), or give --text FILE`);
  const all = readFileSync(path);
  const cut = all.length <= bytes ? all.length : all.lastIndexOf(10, bytes) + 1 || bytes;
  return all.subarray(0, cut);
}

const seconds = (t0) => (performance.now() - t0) / 1000;

/// CPU seconds so far (Linux; else null): this process's main thread (the
/// host: JS, wasm, dawn.node's polling), its other threads (the adapter's
/// workers, Dawn's), and the whole machine busy (/proc/stat), to tell what
/// other processes took meanwhile.
function cpuTimes() {
  const tasks = `/proc/${process.pid}/task`;
  if (!existsSync(tasks)) return null;
  const hz = 100; // USER_HZ on Linux
  const ticks = (stat) => {
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) / hz; // utime, stime
  };
  let main = 0;
  let threads = 0;
  for (const tid of readdirSync(tasks)) {
    try {
      const t = ticks(readFileSync(`${tasks}/${tid}/stat`, 'utf8'));
      if (Number(tid) === process.pid) main += t; else threads += t;
    } catch { /* a thread that ended meanwhile */ }
  }
  const cpu = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const busy = (cpu.reduce((a, b) => a + b, 0) - cpu[3] - cpu[4]) / hz; // all but idle and iowait
  return { main, threads, busy };
}

/// What each took per second of the timed window, in cores.
function cpuShares(before, after, wallS) {
  if (!before || !after) return null;
  const main = (after.main - before.main) / wallS;
  const threads = (after.threads - before.threads) / wallS;
  const others = Math.max(0, (after.busy - before.busy) / wallS - main - threads);
  const round = (x) => Math.round(x * 100) / 100;
  return { main_thread: round(main), other_threads: round(threads), other_processes: round(others) };
}

/// One preset × precision × state: created, warmed up, timed.
async function runCase(pkg, text, tokenizers, adapter, args, preset, precision, state) {
  const spec = { ...pkg.runDefaults(preset), precision, optimState: state };
  const vocab = spec.model.vocab_size;
  const data = new pkg.Data();
  data.setBuiltin(text);
  if (!tokenizers.has(vocab)) {
    const t0 = performance.now();
    data.trainTokenizer(vocab, () => {});
    tokenizers.set(vocab, data.tokenizerJson());
    console.error(`dawn-bench: a tokenizer of ${vocab} tokens from ${text.length} bytes in ${seconds(t0).toFixed(1)} s`);
  } else {
    data.setTokenizer(tokenizers.get(vocab));
  }
  let t0 = performance.now();
  const trainer = await pkg.Trainer.create(spec, data).catch((e) => {
    // a big vocabulary needs more text than the default 256 KiB
    const hint = /tokenizer has \d+ tokens/.test(e.message) ? ` (${text.length} bytes of text: raise --text-bytes)` : '';
    fail(`${preset} ${precision}: ${e.message}${hint}`);
  });
  const createS = seconds(t0);
  const info = trainer.info();
  const losses = [];
  const snapshots = [];
  // advance's events (tagged), or flush's step stats (untagged)
  const keep = (events) => {
    for (const e of events) {
      if (e.event === undefined || e.event === 'stepped') losses.push(e.loss);
      if (e.event === 'snapshot') snapshots.push(e.ms);
    }
  };
  // the first step compiles its pipelines; the warm-up's snapshot is taken then too
  t0 = performance.now();
  keep((await trainer.advance(args.warmup, {})).events);
  keep(await trainer.flush());
  const warmS = seconds(t0);
  const timedFrom = snapshots.length;
  const cpu0 = cpuTimes();
  t0 = performance.now();
  keep((await trainer.advance(args.steps, {})).events);
  keep(await trainer.flush());
  const timedS = seconds(t0);
  const cores = cpuShares(cpu0, cpuTimes(), timedS);
  let kernels = null;
  if (args.profile) {
    const inspection = await trainer.inspect();
    kernels = inspection.kernels ?? inspection.kernels_error;
  }
  trainer.free();
  data.free();
  const stepS = timedS / args.steps;
  const rows = spec.batch * spec.seq;
  return {
    preset,
    precision,
    optim_state: state,
    batch: spec.batch,
    seq: spec.seq,
    parameters: info.parameters,
    step_ms: stepS * 1e3,
    tokens_per_s: rows / stepS,
    engine: 'dawn',
    adapter: adapter.description || `${adapter.vendor} ${adapter.architecture}`,
    adapter_info: { vendor: adapter.vendor, architecture: adapter.architecture, device: adapter.device },
    dawn_flags: args.dawn,
    dawn_poll: adapter.poll,
    // what the device was given (www/matrix-units-patch.js), and where the products ran
    subgroup_matrices: globalThis.webtrainSubgroupMatrices ?? null,
    matrix_units: info.matrix_units ?? null,
    steps: args.steps,
    warmup: args.warmup,
    create_s: createS,
    warmup_s: warmS,
    // the page's loop keeps a snapshot of the run (at most 2% of the time): those taken while
    // timed, and their time as the session reports it (waiting for the steps in flight included)
    snapshots_timed: snapshots.length - timedFrom,
    snapshot_ms: snapshots.slice(timedFrom).reduce((a, b) => a + b, 0),
    // cores used while timed: the host's thread, the process's others, other processes
    ...(cores && { cores }),
    first_loss: losses[0],
    loss: losses[losses.length - 1],
    memory: info.memory,
    ...(kernels && { kernels }),
  };
}

async function main() {
  const args = parseCommandLine(process.argv.slice(2));
  const pkg = await loadPackage();
  const text = readText(args.text, args.textBytes);
  const adapter = await installWebGpu(args.dawn, args.poll, args.matrixUnits);
  console.error(`dawn-bench: adapter ${adapter.description} (${adapter.vendor} ${adapter.architecture}), features ${adapter.features.join(' ')}`);
  const tokenizers = new Map();
  for (const preset of args.presets) {
    for (const precision of args.precisions) {
      for (const state of args.states) {
        const row = await runCase(pkg, text, tokenizers, adapter, args, preset, precision, state);
        console.error(`dawn-bench: ${preset} ${precision} ${state}: ${row.step_ms.toFixed(1)} ms a step, `
          + `${row.tokens_per_s.toFixed(0)} tokens/s, loss ${row.first_loss?.toFixed(3)} → ${row.loss?.toFixed(3)} `
          + `(created in ${row.create_s.toFixed(1)} s, warm-up ${row.warmup_s.toFixed(1)} s)`);
        console.log(JSON.stringify(row));
      }
    }
  }
}

main().then(
  () => process.exit(0), // dawn.node keeps the event loop alive while its instance lives
  (e) => {
    console.error(`dawn-bench: ${e?.message ?? e}`);
    process.exit(1);
  },
);
