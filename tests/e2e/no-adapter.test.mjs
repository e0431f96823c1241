// Without --enable-unsafe-webgpu, headless Chromium has navigator.gpu but
// offers no adapter: the page must say so plainly, not hang or go blank.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startApp, openPage } from './browser.mjs';

let app;
before(async () => { app = await startApp({ without: ['--enable-unsafe-webgpu'] }); });
after(async () => { await app?.close(); });

test('a browser without a WebGPU adapter gets a plain explanation', async () => {
  const { page } = await openPage(app);
  await page.waitForSelector('#adapter[data-state="error"]', { timeout: 60_000 });
  const status = await page.locator('#adapter-status').textContent();
  assert.match(status, /WebGPU/);
  assert.match(status, /(no adapter|no WebGPU)/i);
  assert.match(status, /chrome:\/\/|enable-unsafe-webgpu/, 'says how to enable it');
});
