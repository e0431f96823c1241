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
/// stretch of the curve, a new one each time the chart is rewound (a
/// rebuild; the session trains the steps after it again within the same
/// call, so the frame that draws the rewind may draw them too).
function recordLosses() {
  return page.evaluate(() => {
    window.stretches = [{}];
    let rewinds = 0;
    setInterval(() => {
      const chart = document.querySelector('#chart-loss').dataset;
      const pairs = JSON.parse(chart.lastLosses || '[]');
      if (Number(chart.rewinds ?? 0) > rewinds) window.stretches.push({});
      rewinds = Number(chart.rewinds ?? 0);
      const stretch = window.stretches[window.stretches.length - 1];
      for (const [step, loss] of pairs) stretch[step] ??= loss;
    }, 20);
  });
}

/// Trains until a snapshot after step `snapshotAfter` was taken and 12
/// steps were submitted since it, then crashes the GPU process.
async function crashAfter(snapshotAfter) {
  await page.waitForFunction((s) => {
    const snapshot = Number(document.querySelector('#stat-snapshot').dataset.step);
    return snapshot > s && Number(document.querySelector('#stat-step').dataset.step) >= snapshot + 12;
  }, snapshotAfter, { timeout: 300_000, polling: 100 });
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
  const redone = []; // per loss, the steps trained again: (resumed, lost]
  for (const loss of [1, 2]) {
    await crashAfter(snapshotStep);
    const { lostAt, resumedFrom } = await recovered(loss);
    const snapshot = await dataset('#stat-snapshot');
    const [lost, resumed] = [Number(lostAt), Number(resumedFrom)];
    redone.push([resumed, lost]);
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
  assert.equal(stretches.length, 3, 'the chart went back at each loss');
  let repeated = 0;
  for (let i = 1; i < stretches.length; i++) {
    const [resumed, lost] = redone[i - 1];
    for (const [step, loss] of Object.entries(stretches[i])) {
      const before = stretches[i - 1][step];
      if (before === undefined || Number(step) <= resumed || Number(step) > lost) continue;
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
