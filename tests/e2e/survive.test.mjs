// A run survives the browser: the GPU process crashes (what a driver reset
// or a GPU hang does; Chrome's DevTools protocol does it on purpose) and
// the run goes on by itself from the worker's snapshot, twice, repeating at
// most the steps since the snapshot, with the same losses as before.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startApp, openPage, createModel, stepCount } from './browser.mjs';

let app;
let page;

before(async () => {
  // Chrome blocks a site's WebGPU for a while after GPU crashes it may have
  // caused (requestAdapter then gives none: the page keeps the snapshot and
  // offers a reload); this test crashes the GPU process on purpose.
  app = await startApp({ extra: ['--disable-domain-blocking-for-3d-apis'] });
  ({ page } = await openPage(app));
  await createModel(page, { batch: 4, seq: 32, steps: 400 });
});
after(async () => { await app?.close(); });

const dataset = (selector) => page.locator(selector).evaluate((e) => ({ ...e.dataset }));

/// Records in the page every loss the chart draws: one map step → loss per
/// stretch of the curve, a new one each time the curve goes back (a rebuild).
function recordLosses() {
  return page.evaluate(() => {
    window.stretches = [{}];
    let last = 0;
    setInterval(() => {
      const pairs = JSON.parse(document.querySelector('#chart-loss').dataset.lastLosses || '[]');
      const max = pairs.length ? pairs[pairs.length - 1][0] : 0;
      if (max < last) window.stretches.push({});
      last = max;
      const stretch = window.stretches[window.stretches.length - 1];
      for (const [step, loss] of pairs) stretch[step] ??= loss;
    }, 20);
  });
}

/// Trains past `step` with a snapshot taken after `snapshotAfter`, then
/// crashes the GPU process.
async function crashAfter(step, snapshotAfter) {
  await page.waitForFunction(([n, s]) => Number(document.querySelector('#stat-step').dataset.step) >= n
    && Number(document.querySelector('#stat-snapshot').dataset.step) > s, [step, snapshotAfter], { timeout: 300_000, polling: 100 });
  const cdp = await app.browser.newBrowserCDPSession();
  await cdp.send('Browser.crashGpuProcess');
  await cdp.detach();
}

async function recovered(n) {
  await page.waitForSelector(`#train-notice[data-losses="${n}"]`, { timeout: 300_000 });
  return dataset('#train-notice');
}

test('the GPU process crashes twice and the run goes on from its snapshot', async () => {
  await recordLosses();
  await page.click('#start');
  let snapshotStep = 0;
  for (const loss of [1, 2]) {
    await crashAfter(snapshotStep + 12, snapshotStep);
    const { lostAt, resumedFrom } = await recovered(loss);
    const snapshot = await dataset('#stat-snapshot');
    const [lost, resumed] = [Number(lostAt), Number(resumedFrom)];
    assert.ok(resumed > snapshotStep && resumed <= lost, `resumed from ${resumed}, lost at ${lost}`);
    // a loss is noticed at the end of a call of up to 16 steps
    assert.ok(lost - resumed <= Number(snapshot.every) + 16, `repeated ${lost - resumed} steps, snapshots every ${snapshot.every}`);
    const notice = await page.locator('#train-notice').textContent();
    assert.match(notice, new RegExp(`lost at step ${lost}\\b.*snapshot of step ${resumed}\\b`));
    await page.waitForFunction((n) => Number(document.querySelector('#stat-step').dataset.step) >= n, lost + 8, { timeout: 300_000, polling: 100 });
    const chart = await dataset('#chart-loss');
    assert.equal(Number(chart.minGap), 1, 'no step drawn twice');
    assert.equal(Number(chart.maxGap), 1, 'no step missing');
    snapshotStep = Number((await dataset('#stat-snapshot')).step);
  }
  // the steps after a snapshot are trained again on the same batches: the same losses
  const stretches = await page.evaluate(() => window.stretches);
  // (a loss right after a snapshot goes back past no drawn step)
  assert.ok(stretches.length >= 2, 'the curve went back');
  let repeated = 0;
  for (let i = 1; i < stretches.length; i++) {
    for (const [step, loss] of Object.entries(stretches[i])) {
      const before = stretches[i - 1][step];
      if (before === undefined) continue;
      assert.ok(Math.abs(loss - before) <= 1e-6, `step ${step}: ${before} before the crash, ${loss} after`);
      repeated++;
    }
  }
  assert.ok(repeated > 0, 'steps drawn before a crash were drawn again');
  console.log(`# ${repeated} repeated steps drawn with the same loss`);
  await page.click('#pause');
  await page.waitForSelector('#train[data-phase="idle"]', { timeout: 300_000 });
  assert.ok(await page.locator('#banner').isHidden(), 'no banner: nothing for the user to do');
  assert.ok(await page.locator('#train-error').isHidden(), await page.locator('#train-error').textContent());
  await page.locator('#train').screenshot({ path: 'test-results/panel-train-recovered.png' });
  assert.ok(await stepCount(page) > 40);
});
