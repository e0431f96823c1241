// The page's start, as a person meets it: from the tokenizer being ready
// to the first step done (Create model builds the run and its kernels,
// Single step trains one step), timed in headless Chromium on SwiftShader.
// Each ROOT is a checkout with a built page (dist/, `bash scripts/build.sh`);
// the roots are timed in turn, ROUNDS times, so an old and a new build
// share the machine's state. By hand, not in CI (docs/PERFORMANCE.md).
//   node scripts/page-start-bench.mjs ROUNDS ROOT…

import { readFileSync } from 'node:fs';
import { preview } from 'vite';
import { chromium } from 'playwright-core';

const [rounds, ...roots] = process.argv.slice(2);
if (!rounds || roots.length === 0) {
  console.error('usage: node scripts/page-start-bench.mjs ROUNDS ROOT…');
  process.exit(2);
}
const webdriver = JSON.parse(readFileSync(new URL('../crate/webdriver.json', import.meta.url)));
const args = webdriver['goog:chromeOptions'].args.filter((a) => !a.startsWith('--headless'));

/// Seconds from Create model (the tokenizer ready) to the first step done, and to the run made.
async function once(root) {
  const server = await preview({ root, preview: { host: '127.0.0.1', port: 4173, strictPort: false }, logLevel: 'warn' });
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args });
  try {
    const page = await browser.newPage();
    await page.goto(server.resolvedUrls.local[0]);
    await page.waitForSelector('#corpus-files[data-count="1"]', { timeout: 300_000 });
    await page.click('#tokenizer-train');
    await page.waitForFunction(() => document.querySelector('#tokenizer-info').dataset.state === 'ready', null, { timeout: 300_000 });
    for (const [id, v] of [['batch', '4'], ['seq', '32'], ['steps', '40'], ['warmup', '5']]) await page.fill(`#${id}`, v);
    await page.waitForSelector('#plan-status[data-fits="true"]', { timeout: 300_000 });
    await page.waitForSelector('#create:not([disabled])', { timeout: 300_000 });
    const t0 = Date.now();
    await page.click('#create');
    await page.waitForFunction(() => document.querySelector('#train').dataset.phase === 'idle', null, { timeout: 300_000, polling: 50 });
    const created = (Date.now() - t0) / 1000;
    await page.click('#single-step');
    await page.waitForFunction(() => Number(document.querySelector('#stat-step').dataset.step) >= 1
      && document.querySelector('#train').dataset.phase === 'idle', null, { timeout: 300_000, polling: 50 });
    return { created, first_step: (Date.now() - t0) / 1000 };
  } finally {
    await browser.close();
    await server.close();
  }
}

for (let r = 0; r < Number(rounds); r++) {
  for (const root of roots) console.log(JSON.stringify({ root, round: r + 1, ...await once(root) }));
}
