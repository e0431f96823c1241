// Shared by the e2e tests: serve the built app (dist/) on 127.0.0.1 with
// Vite's preview server, and launch Debian's Chromium with WebGPU on
// SwiftShader, using the same flags as the wasm-pack tier (crate/webdriver.json).

import { readFileSync } from 'node:fs';
import { preview } from 'vite';
import { chromium } from 'playwright-core';

const webdriver = JSON.parse(readFileSync(new URL('../../crate/webdriver.json', import.meta.url)));
// Playwright sets headless mode itself.
const CHROME_ARGS = webdriver['goog:chromeOptions'].args.filter((a) => !a.startsWith('--headless'));

/// `without` drops Chrome flags, e.g. to see the page on a browser with no adapter.
export async function startApp({ without = [] } = {}) {
  const server = await preview({ preview: { host: '127.0.0.1', port: 4173, strictPort: false }, logLevel: 'warn' });
  const url = server.resolvedUrls.local[0];
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    args: CHROME_ARGS.filter((a) => !without.includes(a)),
  });
  return {
    url,
    browser,
    async close() {
      await browser.close();
      await server.close();
    },
  };
}

/// A page that records uncaught errors and console errors, for asserting none.
export async function openPage(app, path = '/') {
  const page = await app.browser.newPage({ viewport: { width: 1100, height: 760 } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(`console: ${m.text()}`); });
  await page.goto(app.url.replace(/\/$/, '') + path);
  return { page, errors };
}
