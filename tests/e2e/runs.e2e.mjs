// Runs you can compare, and a setup shared by its address: a link with
// settings (or a task, or a custom precision recipe, which opens the recipe
// editor) opens the page set up that way (bad values told, not thrown) and
// the form writes its changes back into the address; two
// short runs are listed in the runs table with their settings and losses,
// a row's tick adds and removes its overlay on the charts, the table
// survives a reload, and a loaded checkpoint gets a row of its own.

import { describe, test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { sharedApp, openPage, noErrors, createModel, forNextCreate, trainUntil, waitOrError } from './browser.mjs';

describe('runs: runs and links', () => {
  let app;
  let page;
  const errors = []; // every page's
  const shot = (name) => page.locator(`#${name}`).screenshot({ path: `test-results/runs-${name}.png` });
  const value = (id) => page.locator(`#${id}`).inputValue();
  const query = () => Object.fromEntries(new URL(page.url()).searchParams);
  /// A recipe as the address's `precision` carries it.
  const recipe = (parts) => encodeURIComponent(JSON.stringify(parts));

  before(async () => {
    mkdirSync('test-results/runs', { recursive: true }); // a checkpoint's name names its run
    app = await sharedApp();
  });
  afterEach(() => noErrors(errors));
  after(async () => { await page?.close(); });

  /// The runs table's rows, newest first.
  const rows = () => page.locator('#runs-table tbody tr').evaluateAll((trs) => trs.map((tr) => ({
    ...tr.dataset,
    ...Object.fromEntries([...tr.querySelectorAll('td[data-col]')].map((td) => [td.dataset.col, td.dataset.value ?? td.textContent])),
  })));
  const overlays = () => page.locator('#chart-loss').getAttribute('data-overlays');
  const tick = (n) => page.locator(`#runs-table tr[data-run="${n}"] input[type="checkbox"]`);

  async function open(path) {
    ({ page } = await openPage(app, path, { errors }));
    await page.waitForSelector('#url-notice[data-used]', { state: 'attached', timeout: 120_000 }); // set once the address is rewritten
  }

  test('a link with settings opens the page set up that way, and the form writes the link', async () => {
    // small's defaults (batch 8, seq 256, lr 0.001, warm-up 200) fill the form first, then the link's values
    await open('/?preset=small&batch=4&seq=32&precision=f16&lr=0.002&warmup=abc&bogus=1');
    assert.equal(await value('preset'), 'small');
    assert.equal(await value('batch'), '4');
    assert.equal(await value('seq'), '32');
    assert.equal(await value('precision'), 'f16');
    assert.equal(await value('lr'), '0.002');
    assert.equal(await value('warmup'), '200', 'a bad value leaves the default');
    const notice = await page.locator('#url-notice').textContent();
    assert.match(notice, /Set up from the link: .*preset small.*batch 4/);
    assert.match(notice, /warmup=abc \(not a number\)/);
    assert.match(notice, /bogus=1 \(not a setting\)/);
    // the address keeps what was used and drops what was not
    assert.deepEqual(query(), { preset: 'small', batch: '4', seq: '32', precision: 'f16', lr: '0.002' });
    await shot('setup');

    await page.fill('#batch', '6');
    await page.waitForFunction(() => new URL(location.href).searchParams.get('batch') === '6', null, { timeout: 10_000 });
    await page.selectOption('#precision', 'fp32'); // back to the default: out of the address
    await page.fill('#steps', '300');
    await page.waitForFunction(() => {
      const q = new URL(location.href).searchParams;
      return !q.has('precision') && q.get('steps') === '300';
    }, null, { timeout: 10_000 });
    assert.deepEqual(query(), { preset: 'small', batch: '6', seq: '32', lr: '0.002', steps: '300' });

    // a custom model's sizes; out-of-range sizes and a recipe Rust refuses are refused
    await page.close();
    const bad = recipe({ name: 'x', forward: { w: { format: 'mxfp4', blocks: '2d' } } });
    await open(`/?preset=custom&hidden_size=48&num_hidden_layers=3&num_attention_heads=0&precision=${bad}`);
    assert.equal(await value('preset'), 'custom');
    assert.ok(await page.locator('#custom-fields').isVisible());
    assert.equal(await page.locator('#custom-fields [data-field="hidden_size"]').inputValue(), '48');
    assert.equal(await page.locator('#custom-fields [data-field="num_hidden_layers"]').inputValue(), '3');
    assert.match(await page.locator('#url-notice').textContent(), /num_attention_heads=0 \(below 1\)/);
    assert.match(await page.locator('#url-notice').textContent(), /precision=.*\(recipe "x": forward: 2-D blocks are NVFP4's and e4m3-blockwise's, not mxfp4's\)/);
    assert.equal(await value('precision'), 'fp32', 'a refused recipe leaves the default');
    assert.deepEqual(query(), { preset: 'custom', hidden_size: '48', num_hidden_layers: '3' });
    await page.close();

    // a custom recipe opens the editor on it, goes back into the address as
    // compact JSON, and an edit Rust refuses is told beside it
    const mine = { name: 'mine', version: 1, wgrad: { dy: { format: 'nvfp4', rounding: 'stochastic', hadamard: true }, x: { format: 'nvfp4', hadamard: true } } };
    await open(`/?precision=${recipe(mine)}`);
    assert.equal(await value('precision'), 'custom');
    assert.ok(await page.locator('#recipe-editor').isVisible());
    const part = (path) => page.locator(`#recipe-editor [data-path="${path}"]`);
    assert.equal(await part('name').inputValue(), 'mine');
    assert.equal(await part('wgrad.dy.rounding').inputValue(), 'stochastic');
    assert.equal(await part('forward.x.format').inputValue(), 'f32');
    assert.match(await page.locator('#url-notice').textContent(), /precision mine \(custom\)/);
    assert.deepEqual(JSON.parse(query().precision), mine);
    await part('wgrad.x.hadamard').uncheck();
    await page.waitForSelector('#recipe-status[data-state="refused"]', { timeout: 10_000 });
    assert.match(await page.locator('#recipe-status').textContent(), /wgrad: a Hadamard transform on one operand only/);
    await shot('recipe-editor');
    await part('wgrad.x.hadamard').check();
    await page.waitForSelector('#recipe-status[data-state="ok"]', { timeout: 10_000 });
    await page.close();
  });

  test('a link with a task sets up the task, and its run is listed with its accuracy', async () => {
    // batch 2: a task's rows are long (whole examples to 128 characters) and SwiftShader is slow
    await open('/?task=reverse&task.len=3&batch=2&warmup=2&steps=4');
    assert.ok(await page.locator('#corpus-task').isChecked());
    assert.equal(await value('task'), 'reverse');
    assert.equal(await page.locator('#task-options [data-option="len"]').inputValue(), '3');
    assert.equal(await value('steps'), '4', 'over the task\'s defaults');
    assert.deepEqual(query(), { task: 'reverse', 'task.len': '3', batch: '2', warmup: '2', steps: '4' });

    await page.waitForSelector('#adapter[data-state="ready"]', { timeout: 120_000 });
    await page.waitForSelector('#plan-status[data-fits="true"]', { timeout: 120_000 });
    await page.waitForSelector('#create:not([disabled])', { timeout: 60_000 });
    await page.click('#create');
    assert.equal(await waitOrError(page, () => document.querySelector('#train').dataset.phase === 'idle', 'setup-error'), null);
    await trainUntil(page, 4);
    await page.waitForFunction(() => document.querySelector('#runs-table td[data-col="accuracy"]').textContent !== '—');
    const [run] = await rows();
    assert.equal(run.text, 'reverse (len 3)');
    assert.equal(run.model, 'reverse\'s');
    assert.equal(run.settings, 'batch 2, warmup 2, steps 4');
    assert.match(run.accuracy, /^\d+\.\d%$/);
    await page.close();
  });

  test('two runs are listed with their settings and losses, overlaid by choice, and kept across a reload', async () => {
    await open('/');
    await createModel(page, { batch: 4, seq: 32, steps: 6, warmup: 2, lr: 0.003 });
    await trainUntil(page, 6);
    // the second on the same tokenizer, at another rate: the first run's
    // settings from Create are read-only until freed for the next
    assert.ok(await page.locator('#lr').isDisabled(), 'a run\'s learning rate is fixed');
    assert.equal(await page.locator('#lr').inputValue(), '0.003');
    await forNextCreate(page);
    await page.fill('#lr', '0.01');
    await page.waitForSelector('#create:not([disabled])', { timeout: 60_000 });
    await page.click('#create');
    assert.equal(await waitOrError(page, () => document.querySelector('#runs-table').dataset.count === '2'
      && document.querySelector('#train').dataset.phase === 'idle', 'setup-error'), null);
    await trainUntil(page, 6);
    // a switch at the pause, to a recipe of quantized products: the row lists both modes
    await page.selectOption('#precision', 'bf16');
    assert.equal(await waitOrError(page, () => /bf16/.test(document.querySelector('#stat-mode').textContent), 'train-error'), null);
    await page.waitForFunction(() => document.querySelector('#runs-table tr[data-live="true"] td[data-col="model"]').textContent === 'tiny');

    let [second, first] = await rows();
    assert.equal(await page.locator('#runs-table').getAttribute('data-count'), '2');
    assert.equal(second.run, '2');
    assert.equal(second.live, 'true');
    assert.equal(second.model, 'tiny');
    assert.equal(second.modes, 'fp32 / fp32 state → bf16 / fp32 state');
    assert.equal(second.settings, 'batch 4, seq 32, lr 0.01, warmup 2, steps 6');
    assert.equal(first.settings, 'batch 4, seq 32, warmup 2, steps 6', 'the default lr is not listed');
    for (const r of [first, second]) {
      assert.equal(r.step, '6');
      assert.ok(Number(r.loss) > 0 && Number(r.loss) < 10, `run ${r.run}: loss ${r.loss}`);
      assert.ok(Number(r.val) > 0, `run ${r.run}: validated at the pause (${r.val})`);
      assert.equal(r.accuracy, '—', 'no accuracy for a text run');
    }
    assert.equal(first.live, 'false');
    // the earlier run is overlaid until its tick is cleared; the live run is always drawn
    assert.equal(await overlays(), '1');
    assert.ok(await tick(2).isDisabled());
    await tick(1).uncheck();
    await page.waitForFunction(() => document.querySelector('#chart-loss').dataset.overlays === '');
    assert.doesNotMatch(await page.locator('#chart-loss').getAttribute('data-labels'), /#1 /);
    await tick(1).check();
    await page.waitForFunction(() => document.querySelector('#chart-loss').dataset.overlays === '1');
    assert.match(await page.locator('#chart-loss').getAttribute('data-labels'), /#1 tiny/);
    await shot('runs');
    await shot('train');
    const download = page.waitForEvent('download', { timeout: 120_000 });
    await page.click('#save');
    const saved = `test-results/runs/${(await download).suggestedFilename()}`;
    await (await download).saveAs(saved);

    // a reload lists both as finished runs without weights, none overlaid until ticked
    await page.waitForTimeout(2_500); // the table is kept two seconds after its last change
    await page.reload();
    await page.waitForSelector('#runs-table[data-count="2"]', { timeout: 60_000 });
    [second, first] = await rows();
    assert.deepEqual([second.run, first.run], ['2', '1']);
    assert.ok([first, second].every((r) => r.kept === 'true' && r.live === 'false'));
    assert.match(await page.locator('#runs-table tr[data-run="2"]').textContent(), /weights not kept/);
    assert.equal(second.settings, 'batch 4, seq 32, lr 0.01, warmup 2, steps 6');
    assert.equal(second.modes, 'fp32 / fp32 state → bf16 / fp32 state');
    assert.equal(await overlays(), '');
    await tick(2).check();
    await page.waitForFunction(() => document.querySelector('#chart-loss').dataset.overlays === '2');
    assert.match(await page.locator('#chart-loss').getAttribute('data-labels'), /#2 tiny · fp32 \/ fp32 state \| #2 tiny · bf16/);

    // a loaded checkpoint is a run of its own, its preset found from its model
    await page.waitForSelector('#corpus-files[data-count="1"]', { timeout: 120_000 });
    await page.setInputFiles('#load-input', saved);
    assert.equal(await waitOrError(page, () => document.querySelector('#train').dataset.phase === 'idle', 'checkpoint-error'), null);
    await page.waitForFunction(() => document.querySelector('#runs-table tr[data-run="3"] td[data-col="model"]')?.textContent === 'tiny');
    const [loaded] = await rows();
    assert.equal(loaded.run, '3');
    assert.equal(loaded.live, 'true');
    assert.match(loaded.name, /^#3 tiny loaded · live$/);
    assert.equal(loaded.settings, second.settings);
    assert.equal(loaded.modes, 'bf16 / fp32 state');
    assert.equal(loaded.step, '6');

    // removed from the table, and so from the next visit
    await page.locator('#runs-table tr[data-run="1"] button.remove').click();
    assert.equal(await page.locator('#runs-table').getAttribute('data-count'), '2');
    await page.waitForTimeout(2_500);
    await page.reload();
    await page.waitForSelector('#runs-table[data-count="2"]', { timeout: 60_000 });
    assert.deepEqual((await rows()).map((r) => r.run), ['3', '2']);
    await shot('runs');
  });
});
