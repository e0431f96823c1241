// The page's tests on Chromium with the default flags, in one process: one
// preview server and one Chromium for all of them (browser.mjs's
// `sharedApp`), each area a suite with its own pages. An area runs alone
// with `node --test tests/e2e/AREA.e2e.mjs`. Tests that need other
// browser flags (no-adapter, survive, soak) or no browser (dawn) are files
// of their own.

import './adapter.e2e.mjs';
import './training.e2e.mjs';
import './errors.e2e.mjs';
import './runs.e2e.mjs';
import './export-hf.e2e.mjs';
import './interop.e2e.mjs';
import './tasks.e2e.mjs';
