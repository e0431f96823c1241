// Bad input is explained in the page and the session survives it: a
// corrupt checkpoint, a zip or a folder or a checkpoint beyond what the
// page's wasm module can hold, a binary file among the user's text files,
// and a model too big for the adapter. Training goes on afterwards.

import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { strToU8, zipSync } from 'fflate';
import { sharedApp, openPage, createModel, singleSteps, stepCount, waitOrError, errorText } from './browser.mjs';

describe('errors: bad input', () => {
  let page;

  before(async () => {
    mkdirSync('test-results/inputs', { recursive: true });
    ({ page } = await openPage(await sharedApp()));
    await createModel(page, { batch: 4, seq: 32 });
  });
  after(async () => { await page?.close(); });

  test('a corrupt checkpoint is refused with a reason, and the run goes on', async () => {
    await singleSteps(page);
    const path = 'test-results/inputs/corrupt.safetensors';
    writeFileSync(path, Buffer.concat([Buffer.from([0x20, 0, 0, 0, 0, 0, 0, 0]), Buffer.from('{"not": "a checkpoint"')]));
    await page.setInputFiles('#load-input', path);
    await page.waitForSelector('#checkpoint-error:not([hidden])', { timeout: 120_000 });
    const message = await errorText(page, 'checkpoint-error');
    await page.locator('#checkpoints').screenshot({ path: 'test-results/panel-checkpoints-error.png' });
    assert.ok(message.length > 10, `says why: ${message}`);
    await singleSteps(page);
  });

  // A tiny checkpoint the page saved (tests/e2e/interop.e2e.mjs loads it whole).
  const CHECKPOINT = readFileSync('tests/fixtures/checkpoints/page-7edd469.safetensors');

  /// Loads `bytes` as `name` through the Load picker; resolves with the refusal.
  async function refusedCheckpoint(name, bytes) {
    const path = `test-results/inputs/${name}`;
    writeFileSync(path, bytes);
    await page.evaluate(() => { document.querySelector('#checkpoint-error').hidden = true; }); // the last test's
    await page.setInputFiles('#load-input', path);
    await page.waitForSelector('#checkpoint-error:not([hidden])', { timeout: 120_000 });
    return errorText(page, 'checkpoint-error');
  }

  test('a truncated checkpoint is refused with the reason, and the run goes on', async () => {
    const stepBefore = await page.locator('#stat-step').getAttribute('data-step');
    const message = await refusedCheckpoint('truncated.safetensors', CHECKPOINT.subarray(0, Math.floor(CHECKPOINT.length * 0.6)));
    assert.match(message, /truncated, or with bytes appended: its header describes \d+ bytes, the file has \d+/, message);
    assert.equal(await page.locator('#stat-step').getAttribute('data-step'), stepBefore, 'the run is the one from before');
    await singleSteps(page);
  });

  test('a checkpoint whose tensors are another model size than its config says is refused', async () => {
    const n = Number(CHECKPOINT.readBigUInt64LE(0));
    const header = JSON.parse(CHECKPOINT.subarray(8, 8 + n).toString());
    const config = JSON.parse(header.__metadata__.config);
    config.model.hidden_size *= 2; // the tensors stay the smaller model's
    header.__metadata__.config = JSON.stringify(config);
    const text = JSON.stringify(header);
    const json = Buffer.from(text.padEnd(Math.ceil(text.length / 8) * 8, ' '));
    const length = Buffer.alloc(8);
    length.writeBigUInt64LE(BigInt(json.length));
    const message = await refusedCheckpoint('other-size.safetensors', Buffer.concat([length, json, CHECKPOINT.subarray(8 + n)]));
    assert.match(message, /its tensors do not match its config: tensor embed_tokens is F32 \[260, 32\], expected F32 \[260, 64\]/, message);
    await singleSteps(page);
  });

  /// Imports or loads `path` through `input`; resolves with the refusal in
  /// the Checkpoints panel, in `within` ms at most (it is refused before
  /// anything is read, unpacked or handed to the wasm module).
  async function refusedFile(input, path, within) {
    await page.evaluate(() => { document.querySelector('#checkpoint-error').hidden = true; }); // the last test's
    const t0 = Date.now();
    await page.setInputFiles(input, path);
    await page.waitForSelector('#checkpoint-error:not([hidden])', { timeout: within });
    return { message: await errorText(page, 'checkpoint-error'), ms: Date.now() - t0 };
  }

  test('a zip whose config.json declares 3 GiB is refused before unpacking, with the cap; the run goes on', async (t) => {
    // a small zip of a folder, its config.json's central directory entry
    // patched to declare 3 GiB unpacked (as a 3 MB zip of 3 GiB of spaces does)
    const zip = zipSync({
      'bomb/config.json': strToU8(JSON.stringify({ model_type: 'llama' })),
      'bomb/model.safetensors': new Uint8Array(64),
      'bomb/tokenizer.json': strToU8('{}'),
    });
    const view = new DataView(zip.buffer);
    let patched = 0;
    for (let at = 0; at + 46 <= zip.length; at++) {
      if (view.getUint32(at, true) !== 0x02014b50) continue; // a central directory entry
      const name = Buffer.from(zip.subarray(at + 46, at + 46 + view.getUint16(at + 28, true))).toString();
      if (name === 'bomb/config.json') { view.setUint32(at + 24, 3 * 2 ** 30, true); patched++; }
    }
    assert.equal(patched, 1);
    const path = 'test-results/inputs/bomb.zip';
    writeFileSync(path, zip);
    const stepBefore = await stepCount(page);
    const { message, ms } = await refusedFile('#hf-zip-input', path, 30_000);
    t.diagnostic(`refused in ${ms} ms (${zip.length} bytes of zip): ${message}`);
    assert.match(message, /^bomb\/config\.json: would unpack to 3 GiB, beyond the cap of 64 MiB for a JSON file of a model folder: the page's wasm module/, message);
    assert.match(await page.locator('#checkpoint-status').textContent(), /^Did not import bomb: the reason is above\. The run from before goes on\.$/);
    assert.equal(await stepCount(page), stepBefore, 'the run is the one from before');
    await page.locator('#checkpoints').screenshot({ path: 'test-results/panel-checkpoints-zip-bomb.png' });
    await singleSteps(page);
  });

  test('a model folder or a checkpoint beyond the page\'s caps is refused before it is read', async (t) => {
    // sparse files: their size is what the page sees, nothing is written or read
    const dir = 'test-results/inputs/huge-folder';
    mkdirSync(dir, { recursive: true });
    writeFileSync(`${dir}/config.json`, JSON.stringify({ model_type: 'llama' }));
    writeFileSync(`${dir}/tokenizer.json`, '{}');
    writeFileSync(`${dir}/model.safetensors`, '');
    truncateSync(`${dir}/model.safetensors`, 1.25 * 2 ** 30);
    const checkpoint = 'test-results/inputs/huge.safetensors';
    writeFileSync(checkpoint, '');
    truncateSync(checkpoint, 1.75 * 2 ** 30);
    try {
      const stepBefore = await stepCount(page);
      const folder = await refusedFile('#hf-folder-input', dir, 30_000);
      t.diagnostic(`folder refused in ${folder.ms} ms: ${folder.message}`);
      assert.match(folder.message, /^model\.safetensors: is 1\.3 GiB, beyond the cap of 1 GiB for a model folder's files/, folder.message);
      assert.match(await page.locator('#checkpoint-status').textContent(), /^Did not import huge-folder: /);
      const loaded = await refusedFile('#load-input', checkpoint, 30_000);
      t.diagnostic(`checkpoint refused in ${loaded.ms} ms: ${loaded.message}`);
      assert.match(loaded.message, /^huge\.safetensors: is 1\.8 GiB, beyond the cap of 1\.5 GiB for a checkpoint the page loads/, loaded.message);
      assert.equal(await stepCount(page), stepBefore, 'the run is the one from before');
    } finally {
      rmSync(dir, { recursive: true, force: true });
      rmSync(checkpoint, { force: true });
    }
    await singleSteps(page);
  });

  test('a binary file among text files is refused by name; the others stay', async () => {
    const text = 'webtrain reads plain text. '.repeat(400);
    writeFileSync('test-results/inputs/notes.txt', text);
    writeFileSync('test-results/inputs/image.txt', Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 37) % 256)));
    await page.setInputFiles('#corpus-input', ['test-results/inputs/notes.txt', 'test-results/inputs/image.txt']);
    const refused = page.locator('#corpus-files li[data-state="refused"]');
    await refused.waitFor({ timeout: 60_000 });
    assert.equal(await refused.getAttribute('data-name'), 'image.txt');
    assert.match(await refused.locator('.reason').textContent(), /\S{3,}/);
    assert.equal(await page.locator('#corpus-files li[data-state="ok"]').getAttribute('data-name'), 'notes.txt');
    assert.ok(await page.locator('#corpus-user').isChecked());
    // drag-and-drop adds to the files
    const dropped = await page.evaluateHandle(() => {
      const dt = new DataTransfer();
      dt.items.add(new File(['Dropped markdown text. '.repeat(300)], 'dropped.md', { type: 'text/markdown' }));
      return dt;
    });
    await page.dispatchEvent('#corpus-drop', 'drop', { dataTransfer: dropped });
    await page.waitForSelector('#corpus-files li[data-state="ok"][data-name="dropped.md"]', { timeout: 60_000 });
    assert.equal(await page.locator('#corpus-files li[data-state="ok"]').count(), 2);
    await page.locator('#setup').screenshot({ path: 'test-results/panel-setup-refused.png' });
    // the run made before keeps its own text
    await singleSteps(page);
  });

  test('a very large text file is read in chunks up to the page\'s cap, and the page says so', async () => {
    const path = 'test-results/inputs/big.txt';
    const line = Buffer.from('A line of a very large text file, read in chunks up to the cap.\n');
    const block = Buffer.concat(Array(16384).fill(line)); // about 1 MiB
    writeFileSync(path, Buffer.concat(Array(200).fill(block))); // about 200 MiB
    await page.setInputFiles('#corpus-input', path);
    const cut = page.locator('#corpus-files li[data-state="cut"][data-name="big.txt"]');
    await cut.waitFor({ timeout: 300_000 });
    assert.match(await cut.textContent(), /first .* of 20\d(\.\d)? MiB: the page takes at most 64 MiB of text/);
    const held = await page.evaluate(() => [...document.querySelectorAll('#corpus-files li')].map((li) => li.textContent));
    assert.ok(await page.locator('#corpus-progress').isHidden(), 'the progress bar is gone once read');
    await page.locator('#setup').screenshot({ path: 'test-results/panel-setup-big-file.png' });
    assert.equal(await errorText(page, 'setup-error'), null, held.join(' | '));
    await singleSteps(page);
  });

  test('a model too big for the adapter is refused with the reason', async () => {
    await page.selectOption('#preset', 'custom');
    const set = async (field, value) => page.fill(`#custom-fields [data-field="${field}"]`, String(value));
    await set('hidden_size', 8192);
    await set('num_attention_heads', 64);
    await set('num_key_value_heads', 64);
    await set('intermediate_size', 22016);
    await page.waitForSelector('#plan-status[data-fits="false"]', { timeout: 60_000 });
    assert.match(await page.locator('#plan-status').textContent(), /cannot hold/);
    assert.ok(await page.locator('#create').isDisabled());
    await page.locator('#setup').screenshot({ path: 'test-results/panel-setup-too-big.png' });
    await singleSteps(page);
  });
});
