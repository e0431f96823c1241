// One session through the whole page: set up the tiny model on the
// built-in corpus, train it and watch the loss fall, inspect it, switch
// precision and optimizer state at a pause, generate, save, reload the page,
// load the file and go on from its step, then train in sf16 and fp8, and
// look inside the model in every mode.
// Screenshots of every panel land in test-results/. A request the Rust
// side lacks fails its test: nothing is skipped.

import { describe, test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { sharedApp, openPage, noErrors, createModel, trainUntil, singleSteps, stepCount, waitOrError, waitPhase, errorText } from './browser.mjs';

describe('training: a training session', () => {
  let page;
  const errors = [];
  const shot = (name) => page.locator(`#${name}`).screenshot({ path: `test-results/panel-${name}.png` });

  before(async () => {
    mkdirSync('test-results', { recursive: true });
    ({ page } = await openPage(await sharedApp(), '/', { errors }));
  });
  afterEach(() => noErrors(errors));
  after(async () => { await page?.close(); });

  const chart = async (attr) => page.locator('#chart-loss').getAttribute(`data-${attr}`);

  test('the tiny model trains on the built-in corpus and its loss falls', async () => {
    await createModel(page, { batch: 4, seq: 32, steps: 40, warmup: 5, lr: 0.003 });
    assert.match(await page.locator('#tokenizer-info').textContent(), /301 tokens/);
    assert.match(await page.locator('#plan-status').textContent(), /parameters/);
    // the chosen precision and state's memory; every other behind a disclosure
    assert.equal(await page.locator('#plan tbody tr').count(), 1, 'the plan shows the chosen mode');
    assert.match(await page.locator('#plan tbody tr').first().textContent(), /^fp32fp32/);
    assert.ok(await page.locator('#plan-all tbody tr').count() >= 4, 'every mode behind the disclosure');
    assert.equal(await page.locator('#plan-more').getAttribute('open'), null, 'closed until asked');
    // the optimizer and master weights apply at Create: a run holds them read-only
    assert.ok(await page.locator('#optimizer').isDisabled());
    assert.ok(await page.locator('#master-weights').isDisabled());
    assert.match(await page.locator('#create-settings-note').textContent(), /this run's/);
    await shot('setup');

    await trainUntil(page, 40);
    assert.equal(await errorText(page, 'train-error'), null);
    assert.equal(await stepCount(page), 40, 'trains to the schedule\'s end');
    const points = Number(await chart('points'));
    const first = Number(await chart('first-loss'));
    const last = Number(await chart('last-loss'));
    assert.ok(points >= 38, `the loss chart has ${points} points`);
    assert.ok(last < first, `the loss fell: ${first} → ${last}`);
    assert.ok(Number(await chart('validations')) >= 1, 'validated during the run and at the pause');
    assert.ok(await page.locator('#chart-loss canvas').count() >= 1);
    assert.match(await page.locator('#stat-mode').textContent(), /fp32 \/ fp32 state/);
    assert.equal(await page.locator('#stat-skipped').getAttribute('data-count'), '0');
    // fp32's products are f32 values: every one on the scalar GEMMs, and why
    assert.match(await page.locator('#adapter-products-on-units').textContent(),
      /^0 of the last step's (\d+) products on the units; on the scalar GEMMs: \1 with an operand that is not f16 values/);
    await shot('train');
  });

  test('inspect shows every tensor, memory by kind, kernel times and update survival', async () => {
    const before = await stepCount(page);
    await page.click('#inspect-run');
    const failed = await waitOrError(page, () => !document.querySelector('#inspect-result').hidden, 'inspect-error');
    assert.equal(failed, null);
    assert.ok(await page.locator('#inspect-tensors tbody tr').count() >= 10, 'one row per tensor');
    assert.match(await page.locator('#inspect-memory tr[data-kind="total"]').textContent(), /(KiB|MiB)/);
    const kernels = page.locator('#inspect-kernels');
    if ((await kernels.getAttribute('data-state')) === 'ready') {
      assert.ok(await kernels.locator('.bar').count() > 5, 'a bar per kernel');
    } else {
      assert.match(await page.locator('#inspect-kernels-note').textContent(), /not available: \S/);
    }
    assert.equal(await stepCount(page), before + 1, 'the timed step counts');
    await page.waitForSelector('#inspect-page-memory:not([hidden])');
    assert.ok(Number(await page.locator('#inspect-page-memory tr[data-kind="wasm"]').getAttribute('data-value')) > 0, "the worker's wasm memory");
    assert.equal(await errorText(page, 'inspect-error'), null);

    // the step's update survival per tensor: share of updates landing in each format, v below each
    assert.match(await page.locator('#inspect-survival-note').textContent(), /half the spacing.*master weights stay f32/);
    const heads = await page.locator('#inspect-tensors thead th').allTextContents();
    const FORMATS = ['bf16', 'f16', 'e4m3', 'e5m2', 'e2m3', 'e3m2', 'e2m1', 'q1.15'];
    for (const h of ['rms', 'update / weight', 'non-finite', 'lands in bf16', 'lands in E4M3', 'lands in E2M1', 'lands in Q1.15', 'v below f16', 'v below E5M2']) {
      assert.ok(heads.includes(h), `column "${h}" in ${heads.join(' | ')}`);
    }
    const rows = await page.locator('#inspect-tensors tbody tr').evaluateAll((trs) => trs.map((tr) => ({
      name: tr.dataset.tensor,
      cells: Object.fromEntries([...tr.querySelectorAll('td[data-col]')].map((td) => [td.dataset.col, { text: td.textContent, value: td.dataset.value }])),
    })));
    const COLS = [...FORMATS.map((f) => `lands_${f}`), ...FORMATS.map((f) => `v_below_${f}`)];
    let measured = 0;
    for (const { name, cells } of rows) {
      assert.deepEqual(Object.keys(cells), COLS, `${name}: a cell per survival column`);
      for (const col of COLS) {
        const { text, value } = cells[col];
        if (value === undefined) { assert.equal(text, '—', `${name} ${col}: nothing to count`); continue; }
        const pct = Number(text.replace(/^[<>]/, '').replace(/%$/, ''));
        assert.ok(/%$/.test(text) && pct >= 0 && pct <= 100, `${name} ${col}: ${text} is a percentage in 0–100`);
        assert.ok(Number(value) >= 0 && Number(value) <= 1, `${name} ${col}: share ${value} in [0, 1]`);
      }
      if (cells.lands_bf16.value === undefined) continue;
      measured++;
      // finer spacing keeps more: f16 ≥ bf16 ≥ E4M3 ≥ E2M3 ≥ E2M1 everywhere
      const [f16, bf16, e4m3, e2m3, e2m1] = ['f16', 'bf16', 'e4m3', 'e2m3', 'e2m1'].map((f) => Number(cells[`lands_${f}`].value));
      assert.ok(f16 >= bf16 && bf16 >= e4m3 && e4m3 >= e2m3 && e2m3 >= e2m1, `${name}: lands in f16 ${f16} ≥ bf16 ${bf16} ≥ E4M3 ${e4m3} ≥ E2M3 ${e2m3} ≥ E2M1 ${e2m1}`);
    }
    assert.equal(measured, rows.length, 'the inspected step moved every tensor');

    // attention probabilities per layer against each format's smallest value
    const layers = await page.locator('#inspect-softmax tbody tr').evaluateAll((trs) => trs.map((tr) => ({
      layer: tr.dataset.layer,
      shares: [...tr.querySelectorAll('td[data-col]')].map((td) => Number(td.dataset.value)),
    })));
    assert.ok(layers.length >= 1, 'a row per layer');
    for (const { layer, shares } of layers) {
      assert.equal(shares.length, 3, `layer ${layer}: bf16, f16, E4M3`);
      assert.ok(shares.every((s) => s >= 0 && s <= 1), `layer ${layer}: shares ${shares} in [0, 1]`);
      assert.ok(shares[0] <= shares[1] && shares[1] <= shares[2], `layer ${layer}: below bf16 ≤ f16 ≤ E4M3 (${shares})`);
    }
    await shot('inspect');
  });

  test('precision and optimizer state switch at a pause and training goes on', async () => {
    const before = await stepCount(page);
    await page.selectOption('#precision', 'f16');
    const failed = await waitOrError(page, () => /f16/.test(document.querySelector('#stat-mode').textContent), 'train-error', { timeout: 120_000 });
    assert.equal(failed, null);
    await page.selectOption('#optim-state', 'int8');
    assert.equal(await waitOrError(page, () => /int8/.test(document.querySelector('#stat-mode').textContent), 'train-error'), null);
    assert.equal(await stepCount(page), before, 'the switch keeps the step');
    await trainUntil(page, before + 12);
    assert.equal(await errorText(page, 'train-error'), null);
    assert.ok(await stepCount(page) >= before + 12);
    const labels = await chart('labels');
    assert.match(labels, /fp32 \/ fp32 state/, 'the fp32 run stays as an overlay');
    assert.match(labels, /f16 \/ int8 state/);
    assert.ok(Number(await chart('points')) >= 10);
    await shot('train');
  });

  test('generation streams text from the model', async () => {
    await page.fill('#prompt', 'The ');
    await page.fill('#gen-length', '24');
    // record what the output shows while it streams
    await page.evaluate(() => {
      window.streamed = [];
      const out = document.querySelector('#generate-output');
      new MutationObserver(() => {
        const g = out.querySelector('.generated');
        if (g && out.dataset.state === 'streaming') window.streamed.push(g.textContent);
      }).observe(out, { subtree: true, childList: true, characterData: true });
    });
    await page.click('#generate-run');
    const failed = await waitOrError(page, () => document.querySelector('#generate-output').dataset.state === 'done', 'generate-error');
    assert.equal(failed, null);
    const text = await page.locator('#generate-output .generated').textContent();
    assert.ok(text.length > 0, 'some text came out');
    assert.ok(Number(await page.locator('#generate-output').getAttribute('data-tokens')) > 0, 'tokens streamed');
    const streamed = await page.evaluate(() => window.streamed);
    assert.ok(streamed.length > 1, 'the text grew while it streamed');
    for (const partial of streamed) assert.ok(text.startsWith(partial), `streamed ${JSON.stringify(partial)} is not a prefix of ${JSON.stringify(text)}`);
    // each token shows the model's probability of it on hover
    const probs = await page.locator('#generate-output .generated .token').evaluateAll((spans) => spans.map((s) => Number(s.title.replace('p = ', ''))));
    assert.ok(probs.length > 0 && probs.every((p) => p > 0 && p <= 1), `token probabilities ${probs}`);
    await shot('generate');
  });

  test('a saved run loads in a fresh page and goes on from its step', async () => {
    const savedStep = await stepCount(page);
    const savedLoss = Number(await chart('last-loss'));
    const firstLoss = Number(await chart('first-loss'));
    const download = page.waitForEvent('download', { timeout: 120_000 }).catch(() => null);
    await page.click('#save');
    const failed = await Promise.race([download.then(() => null), waitOrError(page, () => false, 'checkpoint-error', { timeout: 120_000 })]);
    assert.equal(failed, null);
    const file = await download;
    assert.match(file.suggestedFilename(), /^webtrain-.*-step\d+\.safetensors$/);
    const path = `test-results/${file.suggestedFilename()}`;
    await file.saveAs(path);
    await shot('checkpoints');

    await page.reload();
    await page.waitForSelector('#corpus-files[data-count="1"]', { timeout: 120_000 });
    await page.setInputFiles('#load-input', path);
    const loaded = await waitOrError(page, () => document.querySelector('#train').dataset.phase === 'idle', 'checkpoint-error');
    assert.equal(loaded, null);
    assert.equal(await stepCount(page), savedStep, 'the step count comes back');
    await trainUntil(page, savedStep + 6);
    assert.equal(await errorText(page, 'train-error'), null);
    assert.equal(Number(await chart('first-step')), savedStep + 1, 'the chart goes on from the checkpoint\'s step');
    const resumed = Number(await chart('first-loss'));
    // from the saved weights, not from scratch: near the saved loss and well
    // under an untrained model's ln 301 = 5.71 (the tiny preset's vocabulary;
    // the series' first loss is no such yardstick after a mode switch)
    const untrained = Math.log(301);
    assert.ok(Math.abs(resumed - savedLoss) < 0.5 && resumed < untrained - 0.5,
      `the loss goes on (${savedLoss} before the save, ${resumed} after the load; ${firstLoss} at the series' start, ${untrained.toFixed(2)} untrained)`);
    await shot('checkpoints');
  });

  test('the session autosaves and measures while training; an autosaved run is offered on the next visit and restores', async () => {
    if ((await page.locator('#train').getAttribute('data-phase')) === 'none') await createModel(page, { batch: 4, seq: 32 });
    await page.fill('#autosave-every', '2');
    const measurements = async () => Number((await page.locator('#inside-ranges-result').getAttribute('data-measurements')) ?? 0);
    // a cadence set while the worker trains applies from its next call:
    // started measuring never, then at every step
    await page.fill('#inside-every', '0');
    const [started, measuredAtStart] = [await stepCount(page), await measurements()];
    await page.click('#start');
    await page.waitForFunction((n) => Number(document.querySelector('#stat-step').dataset.step) > n, started, { polling: 200 });
    await page.fill('#inside-every', '1');
    const measuring = (m) => Number(document.querySelector('#inside-ranges-result')?.dataset.measurements ?? 0) > m;
    await page.waitForFunction(measuring, measuredAtStart, { timeout: 300_000, polling: 200 });
    await page.click('#pause');
    await waitPhase(page, 'idle');
    // a measurement at every step that is a multiple of 4 (run::Cadence):
    // one in any 4 steps, each costing seconds on SwiftShader
    await page.fill('#inside-every', '4');
    const [before, measuredBefore] = [await stepCount(page), await measurements()];
    await trainUntil(page, before + 4);
    await page.fill('#inside-every', '0');
    const failed = await errorText(page, 'checkpoint-error');
    assert.equal(failed, null);
    const reached = await stepCount(page); // Pause may come a few steps past before + 4
    const due = Math.floor(reached / 4) - Math.floor(before / 4);
    assert.equal(await measurements(), measuredBefore + due, `the ranges measured at each multiple of 4 in steps ${before + 1}–${reached} (a measured event)`);
    assert.match(await page.locator('#checkpoint-status').textContent(), /Autosaved at step \d+/);
    const saved = Number((await page.locator('#checkpoint-status').textContent()).match(/step ([\d ]+)/)[1].replace(/\s/g, ''));

    await page.reload();
    await page.waitForSelector('#restore-offer:not([hidden])', { timeout: 120_000 });
    assert.match(await page.locator('#restore-text').textContent(), /Restore the run autosaved at/);
    await shot('checkpoints');
    await page.click('#restore');
    const restored = await waitOrError(page, () => document.querySelector('#train').dataset.phase === 'idle', 'checkpoint-error');
    assert.equal(restored, null);
    assert.equal(await stepCount(page), saved);
    assert.ok(await page.locator('#restore-offer').isHidden());
  });

  test('sf16, fp8 and amp-f16 chart their counts per step, fp8 and amp-f16 their noise ratio, amp-f16 its loss scale; an sf16 model generates', async () => {
    if ((await page.locator('#train').getAttribute('data-phase')) === 'none') await createModel(page, { batch: 4, seq: 32 });
    const clamped = (attr) => page.locator('#chart-clamped').getAttribute(`data-${attr}`);
    // every operand quantized (fp8's in E4M3 blocks, amp-f16's in f16):
    // its saturated and flushed values
    const everyOperand = ['forward.x', 'forward.w', 'dgrad.dy', 'dgrad.w', 'wgrad.dy', 'wgrad.x'].map((o) => `${o}.saturated ${o}.flushed`).join(' ');
    const modes = [
      ['sf16', 'embedding norm projection residual softmax attention activation'],
      ['fp8', everyOperand],
      ['amp-f16', everyOperand],
    ];
    for (const [mode, sites] of modes) {
      await page.selectOption('#precision', mode);
      const switched = (m) => document.querySelector('#stat-mode').textContent.startsWith(m);
      assert.equal(await waitOrError(page, switched, 'train-error', { timeout: 120_000, arg: mode }), null);
      const before = await stepCount(page);
      await trainUntil(page, before + 4);
      assert.equal(await errorText(page, 'train-error'), null);
      assert.ok(await page.locator('#chart-clamped').isVisible(), `${mode}: the counts chart shows`);
      assert.equal(await clamped('sites'), sites);
      assert.ok(Number(await clamped('points')) >= 3, `${mode}: a point per step`);
      const shown = (await page.locator('#stat-clamped').textContent()).split(' · ').map((c) => c.split(' ')[0]);
      assert.deepEqual(shown, sites.split(' '), `${mode}: the last step's counts`);
      // ‖dY‖ / ‖q(dY) − dY‖: about 38 for fp8's E5M2 on tiny, about 4 900 for f16 (the CLI's)
      const noise = page.locator('#chart-noise');
      assert.equal(await noise.isVisible(), mode !== 'sf16', `${mode}: the noise ratio chart shows where dY is quantized`);
      if (mode !== 'sf16') {
        const [, dgrad, wgrad] = JSON.parse(await noise.getAttribute('data-last'));
        const [low, high] = mode === 'fp8' ? [10, 200] : [1000, 20000];
        for (const r of [dgrad, wgrad]) assert.ok(r > low && r < high, `${mode}: a noise ratio of ${r}`);
      }
      const scale = page.locator('#chart-scale');
      assert.equal(await scale.isVisible(), mode === 'amp-f16', `${mode}: the loss scale chart shows where the loss is scaled`);
      // from GradScaler's start, 2^16: halved on overflow, grown only after 2000 clean steps
      const last = Math.log2(Number(await scale.getAttribute('data-last')));
      if (mode === 'amp-f16') assert.ok(Number.isInteger(last) && last <= 16, `the loss scale 2^${last}`);
      if (mode === 'sf16') {
        // every sequence's first token attends only to itself: p = 1 clamps
        assert.ok(Number(await clamped('total')) > 0, 'sf16 clamps');
        await page.fill('#prompt', 'The ');
        await page.fill('#gen-length', '16');
        await page.click('#generate-run');
        const failed = await waitOrError(page, () => document.querySelector('#generate-output').dataset.state === 'done', 'generate-error');
        assert.equal(failed, null);
        assert.ok(Number(await page.locator('#generate-output').getAttribute('data-tokens')) > 0, 'sf16 generates');
      }
    }
    await shot('train');
  });

  test('inside: attention maps, predictions and value ranges in every mode', async () => {
    for (const mode of ['fp8', 'sf16', 'f16', 'fp32']) {
      const switched = (m) => document.querySelector('#stat-mode').textContent.startsWith(m);
      if (!(await page.locator('#stat-mode').textContent()).startsWith(mode)) {
        await page.selectOption('#precision', mode);
        assert.equal(await waitOrError(page, switched, 'train-error', { timeout: 120_000, arg: mode }), null);
      }
      await page.click('#inside-look');
      const looked = (m) => { const r = document.querySelector('#inside-look-result'); return !r.hidden && r.dataset.precision === m; };
      assert.equal(await waitOrError(page, looked, 'inside-error', { arg: mode }), null, `${mode}: look`);
      const maps = page.locator('#inside-maps');
      const tokens = Number(await maps.getAttribute('data-tokens'));
      assert.equal(tokens, 33, `${mode}: a held-out window of 32 tokens and the one after`);
      assert.ok(Number(await maps.getAttribute('data-layers')) >= 1);
      // every row a softmax; sf16's probabilities are Q1.15 (a lone key's p = 1 clamps to 0.999)
      const rowError = Number(await maps.getAttribute('data-row-sum-error'));
      assert.ok(rowError < (mode === 'sf16' ? 0.02 : 1e-4), `${mode}: rows sum to 1 (off by ${rowError})`);
      assert.equal(Number(await page.locator('#inside-predictions').getAttribute('data-count')), tokens - 1);
      const inked = await page.evaluate(() => {
        const c = document.querySelector('#inside-maps canvas');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0;
        for (let i = 0; i < d.length; i += 4) if (d[i] < 200) n++;
        return n;
      });
      assert.ok(inked > 1000, `${mode}: the heatmap is drawn (${inked} dark pixels)`);
      const before = Number((await page.locator('#inside-ranges-result').getAttribute('data-measurements')) ?? 0);
      await page.click('#inside-ranges');
      const measuredOnce = (n) => Number(document.querySelector('#inside-ranges-result').dataset.measurements ?? 0) > n;
      assert.equal(await waitOrError(page, measuredOnce, 'inside-error', { arg: before }), null, `${mode}: ranges`);
      const tensors = Number(await page.locator('#inside-ranges-result').getAttribute('data-tensors'));
      assert.equal(await page.locator('#inside-ranges-table tbody tr').count(), tensors);
      assert.ok(tensors > 20, `${mode}: weights, activations, gradients and moments`);
      assert.ok(Number(await page.locator('#inside-histogram').getAttribute('data-bars')) > 3, `${mode}: a histogram`);
      await page.locator('#inside').screenshot({ path: `test-results/panel-inside-${mode}.png` });
    }
    // every format's shares, and each block format's error per weight, activation and gradient (none for moments)
    assert.deepEqual(await page.locator('#inside-format option').evaluateAll((os) => os.map((o) => o.value)), ['bf16', 'f16', 'e4m3', 'e5m2', 'e2m3', 'e3m2', 'e2m1', 'q1.15']);
    const errorsIn = async (format) => {
      await page.selectOption('#inside-block-format', format);
      return page.locator('#inside-ranges-table tbody tr').evaluateAll((trs) => trs.map((tr) => [tr.dataset.kind, tr.querySelector('td[data-col="error"]').dataset.value]));
    };
    const [mxfp4, mxfp8] = [await errorsIn('mxfp4'), await errorsIn('mxfp8-e4m3')];
    // no more than MXFP4's per tensor (a norm gain near 1 rounds to 1 in both), less over all
    let sums = [0, 0];
    mxfp4.forEach(([kind, e4], i) => {
      if (kind.startsWith('adam')) return assert.equal(e4, undefined, 'no blocks for a moment');
      assert.ok(Number(mxfp8[i][1]) <= Number(e4), `${kind} row ${i}: MXFP8's error ${mxfp8[i][1]} at most MXFP4's ${e4}`);
      sums = [sums[0] + Number(mxfp8[i][1]), sums[1] + Number(e4)];
    });
    assert.ok(sums[0] < 0.5 * sums[1], `MXFP8's errors ${sums[0]} well below MXFP4's ${sums[1]}`);
    // live: measured at every step that is a multiple of N while training
    // (run::Cadence; a single step trains with the same cadence), a point
    // on the RMS lines each: single steps to the second multiple of 2,
    // measured at the even ones alone (each costs seconds on SwiftShader)
    const measured = async () => Number(await page.locator('#inside-ranges-result').getAttribute('data-measurements'));
    const rmsPoints = async () => Number(await page.locator('#inside-rms').getAttribute('data-points'));
    const [measuredBefore, pointsBefore] = [await measured(), await rmsPoints()];
    await page.fill('#inside-every', '2');
    let due = 0;
    while (due < 2) {
      await singleSteps(page);
      const step = await stepCount(page);
      if (step % 2 === 0) due++;
      assert.equal(await measured(), measuredBefore + due, `measured while training, at step ${step} ${step % 2 === 0 ? 'too' : 'not'}`);
    }
    await page.fill('#inside-every', '0');
    assert.equal(await rmsPoints(), pointsBefore + 2, 'the RMS lines follow the run: a point per measured step');
    assert.equal(await errorText(page, 'train-error'), null);
    assert.equal(await errorText(page, 'inside-error'), null);
  });
});
