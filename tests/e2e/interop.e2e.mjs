// A run moves between the page and the CLI (`webtrain train`): a
// checkpoint saved by either resumes in the other and goes on as the
// uninterrupted run does — the same batches, so the same losses up to the
// two adapters' rounding (SwiftShader here, lavapipe there) — and a
// checkpoint the page saved before the two shared one schema still loads.

import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { sharedApp, openPage, createModel, trainUntil, singleSteps, stepCount, waitOrError, errorText } from './browser.mjs';

const CLI = 'target/debug/webtrain';
// the page's form and the CLI's flags for the same run: tiny on the built-in corpus
const RUN = { batch: 4, seq: 32, lr: 0.003, warmup: 5, steps: 40 };
const RUN_FLAGS = ['--preset', 'tiny', '--batch', '4', '--seq', '32', '--lr', '0.003', '--warmup', '5', '--schedule-steps', '40'];
const MORE = 4; // steps compared after the checkpoint
// Losses of the same steps on the two adapters: f32 sums in other orders,
// measured apart by at most 3.8e-7 (CLI → page, 4 steps); a step on
// another batch moves the tiny model's loss by ~0.05 or more.
const SAME_LOSS = 1e-4;
// A checkpoint the page saved at commit 33891c8, whose data state is
// 7edd469's ({files, val_fraction}): tiny, built-in corpus, batch 4 × 32, step 6.
const OLD_PAGE_CHECKPOINT = 'tests/fixtures/checkpoints/page-7edd469.safetensors';

describe('interop: page and CLI', () => {
  let page;

  before(async () => {
    mkdirSync('test-results/interop', { recursive: true });
    // the native tier built it; a no-op then, a debug build otherwise
    execFileSync('cargo', ['build', '--quiet', '--bin', 'webtrain'], { stdio: 'inherit' });
    ({ page } = await openPage(await sharedApp()));
  });
  after(async () => { await page?.close(); });

  /// `webtrain ARGS`: its JSON lines.
  function cli(args) {
    const out = execFileSync(CLI, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], timeout: 900_000 });
    return out.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
  }

  /// step → loss, from the CLI's step lines.
  const cliLosses = (lines) => new Map(lines.filter((l) => 'loss' in l && 'step' in l).map((l) => [l.step, l.loss]));

  /// step → loss, from the page's loss chart (its current run), once the
  /// chart holds step `last` (it redraws a moment after the stats arrive).
  async function pageLosses(last) {
    await page.waitForFunction((step) => JSON.parse(document.querySelector('#chart-loss').dataset.lastLosses ?? '[]')
      .some(([s]) => s === step), last, { timeout: 60_000, polling: 100 });
    return new Map(JSON.parse(await page.locator('#chart-loss').getAttribute('data-last-losses')));
  }

  function assertSameLosses(got, want, steps, what) {
    for (const step of steps) {
      assert.ok(got.has(step) && want.has(step), `${what}: step ${step} in both (${[...got.keys()]} / ${[...want.keys()]})`);
      const diff = Math.abs(got.get(step) - want.get(step));
      console.log(`${what}: step ${step} ${got.get(step)} vs ${want.get(step)} (${diff.toExponential(2)})`);
      assert.ok(diff < SAME_LOSS, `${what}: step ${step} loss ${got.get(step)} against ${want.get(step)}`);
    }
  }

  async function save(name) {
    const download = page.waitForEvent('download', { timeout: 120_000 });
    await page.click('#save');
    const path = `test-results/interop/${name}`;
    await (await download).saveAs(path);
    return path;
  }

  async function load(path) {
    await page.reload();
    await page.waitForSelector('#corpus-files[data-count="1"]', { timeout: 120_000 });
    await page.setInputFiles('#load-input', path);
    return waitOrError(page, () => document.querySelector('#train').dataset.phase === 'idle', 'checkpoint-error');
  }

  const range = (from, n) => Array.from({ length: n }, (_, i) => from + i);

  test('a run saved in the page resumes in the CLI and goes on as the page does', async () => {
    await createModel(page, RUN);
    await trainUntil(page, 4);
    const saved = await stepCount(page);
    const path = await save(`page-step${saved}.safetensors`);
    await singleSteps(page, MORE);
    const uninterrupted = await pageLosses(saved + MORE);
    const resumed = cliLosses(cli(['train', '--resume', path, '--steps', String(MORE)]));
    assertSameLosses(resumed, uninterrupted, range(saved + 1, MORE), 'page → CLI');
  });

  test('a run saved by the CLI loads in the page and goes on as the CLI does', async () => {
    const saved = 5;
    const path = 'test-results/interop/cli-step5.safetensors';
    cli(['train', ...RUN_FLAGS, '--steps', String(saved), '--out', path]);
    const uninterrupted = cliLosses(cli(['train', ...RUN_FLAGS, '--steps', String(saved + MORE)]));
    assert.equal(await load(path), null);
    assert.equal(await stepCount(page), saved, 'the CLI\'s step count');
    await singleSteps(page, MORE);
    assert.equal(await errorText(page, 'train-error'), null);
    assertSameLosses(await pageLosses(saved + MORE), uninterrupted, range(saved + 1, MORE), 'CLI → page');
  });

  test('a CLI run on other text is refused by the page, naming the files it needs', async () => {
    const text = 'test-results/interop/other.txt';
    const line = (i) => `Line ${i}: the quick brown fox jumps over the lazy dog, and the dog sleeps on.\n`;
    writeFileSync(text, Array.from({ length: 400 }, (_, i) => line(i)).join(''));
    const path = 'test-results/interop/cli-other-text.safetensors';
    cli(['train', ...RUN_FLAGS, '--corpus', text, '--steps', '1', '--out', path]);
    const refused = await load(path);
    assert.match(refused ?? '', /other\.txt \(\d+ tokens, fingerprint [0-9a-f]{16}\)/, `says which text: ${refused}`);
    assert.match(refused, /Brown corpus \(built in\)/, `and what is loaded: ${refused}`);
  });

  test('a checkpoint the page saved before the shared schema loads and trains on', async () => {
    assert.equal(await load(OLD_PAGE_CHECKPOINT), null);
    const step = await stepCount(page);
    assert.equal(step, 6, 'the fixture\'s step');
    await trainUntil(page, step + 2);
    assert.equal(await errorText(page, 'train-error'), null);
    assert.ok(await stepCount(page) >= step + 2);
  });
});
