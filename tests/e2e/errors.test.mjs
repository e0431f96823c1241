// Bad input is explained in the page and the session survives it: a
// corrupt checkpoint, a binary file among the user's text files, and a
// model too big for the adapter. Training goes on afterwards.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { startApp, openPage, createModel, singleSteps, waitOrError, errorText } from './browser.mjs';

let app;
let page;

before(async () => {
  mkdirSync('test-results/inputs', { recursive: true });
  app = await startApp();
  ({ page } = await openPage(app));
  await createModel(page, { batch: 4, seq: 32 });
});
after(async () => { await app?.close(); });

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

// A tiny checkpoint the page saved (tests/e2e/interop.test.mjs loads it whole).
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
