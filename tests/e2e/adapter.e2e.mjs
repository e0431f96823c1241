// The page opens, finds the adapter through the worker, and tells the user
// what it means for mixed precision.

import { describe, test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { sharedApp, openPage, noErrors } from './browser.mjs';

describe('adapter: the adapter card', () => {
  let app;
  let page;
  const errors = [];
  before(async () => { app = await sharedApp(); });
  afterEach(() => noErrors(errors));
  after(async () => { await page?.close(); });

  test('the page reports the adapter and the f16 storage mode', async () => {
    ({ page } = await openPage(app, '/', { errors }));
    const card = page.locator('#adapter');
    await page.waitForSelector('#adapter[data-state="ready"], #adapter[data-state="error"]', { timeout: 60_000 });
    mkdirSync('test-results', { recursive: true });
    await page.screenshot({ path: 'test-results/adapter.png', fullPage: true });

    assert.equal(await card.getAttribute('data-state'), 'ready', await page.locator('#adapter-status').textContent());
    const name = (await page.locator('#adapter-name').textContent()).trim();
    assert.match(name, /\S/, 'adapter name is empty');
    assert.doesNotMatch(name, /^unnamed/, `the adapter is not named: ${name}`);
    const f16 = page.locator('#adapter-f16');
    assert.match(await f16.textContent(), /(runs natively|packed f16)/);
    assert.match(await f16.getAttribute('data-storage'), /^(native|packed)$/);
    // SwiftShader has no matrix units: the worker's device asked (its patch
    // says why it got none) and the card says how a browser turns them on
    const units = page.locator('#adapter-matrix-units');
    await page.waitForFunction(() => document.querySelector('#adapter-matrix-units').dataset.offered !== undefined);
    if ((await units.getAttribute('data-offered')) === 'false') {
      assert.match(await units.textContent(), /not in use \(none: the browser offers no subgroup matrices/);
      assert.match(await units.textContent(), /enable-unsafe-webgpu.*vulkan_enable_f16_on_nvidia/);
    }
  });
});
