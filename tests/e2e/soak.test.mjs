// A long run stays healthy (SOAK=1 only: 2 000 steps take 10–20 minutes on
// SwiftShader): the tiny model trains 2 000 steps with the charts drawing,
// validations every 25 steps and autosaves every 50, and what the page
// holds — its JS heap, the worker's heap and wasm memory, the live GPU
// buffers — is the same at step 2 000 as at step 100, within 10%.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startApp, openPage, createModel } from './browser.mjs';

const SOAK = process.env.SOAK === '1';
const [EARLY, LATE] = [100, 2000];
const SAME = 0.10;

let app;
let page;

before(async () => {
  if (!SOAK) return;
  // gc() for the worker's counts, and heap sizes unrounded
  app = await startApp({ extra: ['--js-flags=--expose-gc', '--enable-precise-memory-info'] });
  ({ page } = await openPage(app));
  await createModel(page, { batch: 4, seq: 32, steps: LATE + 100 });
});
after(async () => { await app?.close(); });

/// What the page holds after a garbage collection, as the Inspect panel's
/// Page memory shows it, and the page's heap as Chrome counts it.
async function held() {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('HeapProfiler.collectGarbage');
  await cdp.send('Performance.enable');
  const { metrics } = await cdp.send('Performance.getMetrics');
  await cdp.detach();
  await page.click('#inspect-page-memory-run');
  await page.waitForSelector('#inspect-page-memory:not([hidden])');
  const rows = await page.locator('#inspect-page-memory tr').evaluateAll((trs) => Object.fromEntries(trs.map((tr) => [tr.dataset.kind, Number(tr.dataset.value)])));
  return { ...rows, pageHeapCdp: metrics.find((m) => m.name === 'JSHeapUsedSize').value };
}

async function atStep(n) {
  await page.waitForFunction((s) => Number(document.querySelector('#stat-step').dataset.step) >= s, n, { timeout: 3_600_000, polling: 1000 });
}

test(`${LATE} steps with the charts open: memory and GPU buffers stay flat`, { skip: !SOAK && 'SOAK=1 runs it', timeout: 4 * 3_600_000 }, async (t) => {
  await page.fill('#autosave-every', '50');
  await page.click('#start');
  await atStep(EARLY);
  const early = await held();
  const t0 = performance.now();
  await atStep(LATE);
  const seconds = (performance.now() - t0) / 1000;
  const late = await held();
  await page.click('#pause');
  t.diagnostic(`steps ${EARLY}→${LATE} in ${seconds.toFixed(0)} s; at ${EARLY}: ${JSON.stringify(early)}; at ${LATE}: ${JSON.stringify(late)}`);
  t.diagnostic(`snapshot: ${await page.locator('#stat-snapshot').textContent()}`);
  for (const key of ['pageHeapCdp', 'workerHeap', 'wasm', 'gpuBuffers', 'gpuBytes']) {
    if (!Number.isFinite(early[key]) || early[key] === 0) continue; // not reported by this browser
    assert.ok(late[key] <= early[key] * (1 + SAME), `${key}: ${early[key]} at step ${EARLY}, ${late[key]} at step ${LATE}`);
  }
  assert.ok(Number.isFinite(early.gpuBuffers) && early.gpuBuffers > 0, 'the GPU buffers are counted');
  const chart = await page.locator('#chart-loss').evaluate((e) => ({ ...e.dataset }));
  assert.ok(Number(chart.points) <= 1500, `the loss chart holds ${chart.points} points`);
});
