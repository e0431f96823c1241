// The wasm build on Dawn (dawn.node, Chrome's WebGPU engine) in Node,
// without a browser: it trains (scripts/dawn-bench.mjs, tiny fp32, a
// warm-up step and two timed, on SwiftShader: docs/PERFORMANCE.md; about
// 20 s on 2 cores, most of it SwiftShader compiling the step's pipelines),
// and Tint compiles every matrix-unit kernel it would build in Dawn's
// syntax (on Dawn's null backend, which runs nothing: a few seconds); and
// the worker's patch chooses the subgroup matrices those kernels need.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
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

test("Tint accepts every matrix-unit kernel in Dawn's syntax, and Dawn builds their pipelines", { timeout: 120_000 }, async () => {
  const webgpu = await import('webgpu');
  Object.assign(globalThis, webgpu.globals);
  // Dawn's null backend compiles and validates but runs nothing; with unsafe
  // APIs it offers the experimental feature (no adapter here has it)
  const gpu = webgpu.create(['backend=null', 'enable-dawn-features=allow_unsafe_apis']);
  const adapter = await gpu.requestAdapter();
  assert.ok(adapter.features.has('chromium-experimental-subgroup-matrix'), [...adapter.features].join(' '));
  const limits = ['maxComputeWorkgroupStorageSize', 'maxComputeInvocationsPerWorkgroup', 'maxComputeWorkgroupSizeX'];
  const device = await adapter.requestDevice({
    requiredFeatures: ['chromium-experimental-subgroup-matrix', 'subgroups', 'shader-f16'],
    requiredLimits: Object.fromEntries(limits.map((l) => [l, adapter.limits[l]])),
  });
  const pkg = await import(new URL('../../pkg/webtrain.js', import.meta.url));
  pkg.initSync({ module: readFileSync(new URL('../../pkg/webtrain_bg.wasm', import.meta.url)) });
  /// The compiler's errors and warnings, and the pipeline's error, if any.
  const build = async (code, entryPoint, pipeline) => {
    device.pushErrorScope('validation');
    const module = device.createShaderModule({ code });
    const { messages } = await module.getCompilationInfo();
    let failed = null;
    if (pipeline) {
      await device.createComputePipelineAsync({ layout: 'auto', compute: { module, entryPoint } })
        .catch((e) => { failed = e.message; });
    }
    await device.popErrorScope();
    return { messages: messages.map((m) => `${m.type} ${m.lineNum}: ${m.message}`), failed };
  };
  const kernels = pkg.matrixUnitKernels(32); // NVIDIA's subgroups
  assert.ok(kernels.length > 100, `${kernels.length} kernels`);
  assert.ok(kernels.some((k) => k.entry === 'attention_units_forward'), 'attention on the units is among them');
  let pipelines = 0;
  for (const { name, entry, source, invocations, workgroup_bytes: bytes } of kernels) {
    // pipelines where the null device allows them: Dawn wants workgroups in
    // whole subgroups of its largest size (128 here), and it has 16 KiB of
    // workgroup memory
    const l = adapter.limits;
    const pipeline = invocations % adapter.info.subgroupMaxSize === 0
      && invocations <= l.maxComputeInvocationsPerWorkgroup && bytes <= l.maxComputeWorkgroupStorageSize;
    const { messages, failed } = await build(source, entry, pipeline);
    // no errors, and no deprecated builtins (Dawn's current spelling)
    assert.deepEqual(messages, [], name);
    assert.equal(failed, null, name);
    pipelines += pipeline;
  }
  // 60 of 162 fit the null device's limits (2026-11-27)
  assert.ok(pipelines >= 50, `${pipelines} of ${kernels.length} pipelines built`);
  // the check can fail: B's fragments as left matrices do not multiply
  const { name, source: code } = kernels[0];
  const wrong = code.replace('alias MatB = subgroup_matrix_right', 'alias MatB = subgroup_matrix_left');
  assert.notEqual(wrong, code);
  const { messages } = await build(wrong, 'gemm', false);
  assert.match(messages.join('\n'), /error .*subgroupMatrixMultiplyAccumulate/, name);
  device.destroy();
});

test("the worker's patch asks for subgroup matrices only where an f16 × f16 → f32 configuration fits", async () => {
  const { chooseSubgroupMatrices, SUBGROUP_MATRIX } = await import('../../www/matrix-units-patch.js');
  const config = (componentType, resultComponentType, e) => ({ componentType, resultComponentType, M: e, N: e, K: e });
  const adapter = (features, configs, min = 32, max = 32) => ({
    features: new Set(features),
    info: { subgroupMinSize: min, subgroupMaxSize: max, subgroupMatrixConfigs: configs },
  });
  const all = [SUBGROUP_MATRIX, 'shader-f16', 'subgroups'];
  // NVIDIA under Vulkan: 16×16×16 f16 → f32 (and others): 16-sided fragments
  assert.deepEqual(chooseSubgroupMatrices(adapter(all, [config('f16', 'f16', 16), config('f16', 'f32', 16), config('f16', 'f32', 8)])), { edge: 16, subgroup: 32 });
  assert.deepEqual(chooseSubgroupMatrices(adapter(all, [config('f16', 'f32', 8)])), { edge: 8, subgroup: 32 });
  // Metal's configurations accumulate f16 in f16: not amp-f16's numerics
  assert.match(chooseSubgroupMatrices(adapter(all, [config('f16', 'f16', 8), config('f32', 'f32', 8)])).unavailable, /no square f16 x f16 -> f32/);
  assert.match(chooseSubgroupMatrices(adapter(all, [config('f16', 'f32', 16)], 8, 32)).unavailable, /subgroup size varies/);
  assert.match(chooseSubgroupMatrices(adapter([SUBGROUP_MATRIX, 'subgroups'], [config('f16', 'f32', 16)])).unavailable, /vulkan_enable_f16_on_nvidia/);
  assert.match(chooseSubgroupMatrices(adapter([], [])).unavailable, /enable-unsafe-webgpu/);
});
