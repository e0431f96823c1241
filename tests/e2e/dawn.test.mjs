// The wasm build trains on Dawn (dawn.node, Chrome's WebGPU engine) in
// Node, without a browser: scripts/dawn-bench.mjs, tiny fp32, a warm-up
// step and two timed, on SwiftShader (docs/PERFORMANCE.md). About 20 s on
// 2 cores, most of it SwiftShader compiling the step's pipelines.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const ICD = process.env.WEBTRAIN_SWIFTSHADER_ICD ?? '/usr/lib/chromium/vk_swiftshader_icd.json';
const BENCH = fileURLToPath(new URL('../../scripts/dawn-bench.mjs', import.meta.url));

const skip = existsSync(ICD) ? false : `no SwiftShader Vulkan ICD at ${ICD} (Debian's chromium package has it; WEBTRAIN_SWIFTSHADER_ICD names another)`;

test('dawn-bench trains tiny on Dawn and reports a step time and a sane loss', { skip, timeout: 180_000 }, async () => {
  const args = [BENCH, '--presets', 'tiny', '--precisions', 'fp32', '--steps', '2', '--warmup', '1', '--text-bytes', '65536'];
  const env = { ...process.env, VK_ICD_FILENAMES: ICD, XDG_RUNTIME_DIR: process.env.XDG_RUNTIME_DIR ?? '/tmp' };
  const { stdout, stderr } = await new Promise((resolve, reject) => {
    execFile(process.execPath, args, { env, timeout: 170_000 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`dawn-bench failed (${error.message}):\n${stderr}`));
      else resolve({ stdout, stderr });
    });
  });
  const lines = stdout.trim().split('\n');
  assert.equal(lines.length, 1, `one JSON line per case, got:\n${stdout}\n${stderr}`);
  const row = JSON.parse(lines[0]);
  assert.equal(row.engine, 'dawn');
  assert.match(row.adapter, /swiftshader/i);
  assert.deepEqual([row.preset, row.precision, row.optim_state, row.batch, row.seq], ['tiny', 'fp32', 'fp32', 8, 64]);
  assert.ok(Number.isFinite(row.step_ms) && row.step_ms > 0, `step_ms ${row.step_ms}`);
  assert.ok(Number.isFinite(row.tokens_per_s) && row.tokens_per_s > 0, `tokens_per_s ${row.tokens_per_s}`);
  // a fresh model's loss is about ln(vocab) = 5.71 for tiny's 301 tokens
  const chance = Math.log(301);
  for (const loss of [row.first_loss, row.loss]) {
    assert.ok(Number.isFinite(loss) && Math.abs(loss - chance) < 1, `loss ${loss}, not near ln(301) = ${chance.toFixed(2)}`);
  }
});
