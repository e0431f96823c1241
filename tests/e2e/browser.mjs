// Shared by the e2e tests: serve the built app (dist/) on 127.0.0.1 with
// Vite's preview server, and launch Debian's Chromium with WebGPU on
// SwiftShader, using the same flags as the wasm-pack tier (crate/webdriver.json).
// The tests on that browser (tests/e2e/*.e2e.mjs, run together by
// all.test.mjs) share one server and one Chromium per process
// (`sharedApp`); each opens its own pages, each page in a fresh browser
// context (its own storage). A test of other flags starts its own app.

import { after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { preview } from 'vite';
import { chromium } from 'playwright-core';

const webdriver = JSON.parse(readFileSync(new URL('../../crate/webdriver.json', import.meta.url)));
// Playwright sets headless mode itself.
const CHROME_ARGS = webdriver['goog:chromeOptions'].args.filter((a) => !a.startsWith('--headless'));

/// `without` drops Chrome flags, e.g. to see the page on a browser with no
/// adapter; `extra` adds some.
export async function startApp({ without = [], extra = [] } = {}) {
  const server = await preview({ preview: { host: '127.0.0.1', port: 4173, strictPort: false }, logLevel: 'warn' });
  const url = server.resolvedUrls.local[0];
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    args: [...CHROME_ARGS.filter((a) => !without.includes(a)), ...extra],
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

let shared = null;

/// The app of the default flags, started by its first user in this process
/// and closed after the process's last test.
export function sharedApp() {
  shared ??= startApp();
  return shared;
}

after(async () => {
  const app = await shared?.catch(() => null); // a failed start failed its users
  await app?.close();
});

/// A page in a fresh browser context (closing the page closes it) that
/// records uncaught errors and console errors in `errors`, for
/// `noErrors` to check.
export async function openPage(app, path = '/', { errors = [] } = {}) {
  const page = await app.browser.newPage({ viewport: { width: 1100, height: 760 } });
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(`console: ${m.text()}`); });
  await page.goto(app.url.replace(/\/$/, '') + path);
  return { page, errors };
}

/// For `afterEach`: no uncaught error or console error recorded in `errors`
/// since the last check (the test just run, and any hook before it); clears
/// the list for the next test.
export function noErrors(errors) {
  assert.deepEqual(errors.splice(0), [], 'uncaught errors or console errors in the page');
}

/// Steps the trainer has submitted, as the page shows them.
export async function stepCount(page) {
  return Number(await page.locator('#stat-step').getAttribute('data-step'));
}

/// Waits until the page's Train panel is in `phase` ('none', 'idle', 'running', 'pausing').
export async function waitPhase(page, phase, timeout = 300_000) {
  await page.waitForSelector(`#train[data-phase="${phase}"]`, { timeout });
}

/// The text of a panel's error area, or null while it is hidden.
export async function errorText(page, id) {
  const e = page.locator(`#${id}`);
  return (await e.isHidden()) ? null : (await e.textContent()).trim();
}

/// Waits until `fn` (run in the page) is truthy, or fails with the panel's error.
export async function waitOrError(page, fn, errorId, { timeout = 300_000, arg } = {}) {
  const done = page.waitForFunction(fn, arg, { timeout, polling: 250 }).then(() => null);
  const failed = page.waitForSelector(`#${errorId}:not([hidden])`, { timeout }).then(async (h) => (await h.textContent()).trim());
  return Promise.race([done, failed]);
}

/// Frees the settings a run took at Create model for the next one, where
/// a run holds them read-only.
export async function forNextCreate(page) {
  const change = page.locator('#create-settings-change');
  if (await change.isVisible()) await change.click();
}

/// Setup on the built-in corpus: a tokenizer of the preset's vocabulary and
/// a model of `batch` × `seq` (small: SwiftShader is slow).
export async function createModel(page, { preset = 'tiny', batch = 4, seq = 32, lr = 0.003, warmup = 5, steps = 40, precision = 'fp32', optimState = 'fp32' } = {}) {
  await page.waitForSelector('#adapter[data-state="ready"]', { timeout: 120_000 });
  await page.waitForSelector('#corpus-files[data-count="1"]', { timeout: 120_000 });
  await page.selectOption('#preset', preset);
  await page.click('#tokenizer-train');
  const failed = await waitOrError(page, () => document.querySelector('#tokenizer-info').dataset.state === 'ready', 'setup-error');
  if (failed) throw new Error(`tokenizer: ${failed}`);
  await page.fill('#batch', String(batch));
  await page.fill('#seq', String(seq));
  await forNextCreate(page);
  await page.fill('#lr', String(lr));
  await page.fill('#warmup', String(warmup));
  await page.fill('#steps', String(steps));
  await page.selectOption('#precision', precision);
  await page.selectOption('#optim-state', optimState);
  await page.waitForSelector('#plan-status[data-fits="true"]', { timeout: 120_000 });
  await page.waitForSelector('#create:not([disabled])', { timeout: 60_000 });
  await page.click('#create');
  const created = await waitOrError(page, () => document.querySelector('#train').dataset.phase === 'idle', 'setup-error');
  if (created) throw new Error(`create: ${created}`);
}

/// Start, then Pause once the step count reaches `until` (or the schedule ends).
export async function trainUntil(page, until, timeout = 600_000) {
  await page.click('#start');
  await page.waitForFunction((n) => {
    const phase = document.querySelector('#train').dataset.phase;
    return phase === 'idle' || Number(document.querySelector('#stat-step').dataset.step) >= n;
  }, until, { timeout, polling: 200 });
  await page.click('#pause', { timeout: 2_000 }).catch(() => {}); // already paused at the schedule's end
  await waitPhase(page, 'idle', timeout);
}

/// Trains exactly `n` more steps with Single step, each waited for (its
/// stats reach the charts before the next).
export async function singleSteps(page, n = 1) {
  for (let i = 0; i < n; i++) {
    const before = await stepCount(page);
    await page.click('#single-step');
    const failed = await waitOrError(page, (m) => Number(document.querySelector('#stat-step').dataset.step) > m, 'train-error', { arg: before });
    if (failed) throw new Error(`single step after step ${before}: ${failed}`);
    const after = await stepCount(page);
    if (after !== before + 1) throw new Error(`single step after step ${before} reached step ${after}`);
  }
}
