// The page: starts the training worker, asks it for the adapter, and wires
// up the panels. Each panel module draws and sends commands; the worker
// (www/worker.js) owns the wasm module, the device and the run.

import { startWorker } from './worker-client.js';
import { renderAdapter, renderAdapterError } from './adapter-card.js';
import { showBanner, RELOAD } from './dom.js';
import { initCharts } from './charts.js';
import { initCorpus, loadBuiltin } from './corpus.js';
import { initTasks } from './tasks.js';
import { initSetup } from './setup.js';
import { initRecipeEditor } from './recipe-editor.js';
import { initDefaults } from './defaults.js';
import { initUrlSettings } from './url-settings.js';
import { initRuns } from './runs.js';
import { initTrainPanel, resumeAfterLoss } from './train-panel.js';
import { initInspect } from './inspect-panel.js';
import { initInside } from './inside-panel.js';
import { initGenerate } from './generate-panel.js';
import { initCheckpoints, offerRestore } from './checkpoints.js';

const worker = startWorker({
  onFail: (message) => showBanner(`${message}. Reload the page; if it fails again, this browser cannot run the trainer (see the adapter card).`, [RELOAD]),
  onRecovered: resumeAfterLoss,
  onGone: (message) => showBanner(message, [RELOAD]),
});

initCharts();
initDefaults(worker);
initRuns();
initTrainPanel(worker);
initRecipeEditor(worker); // before initSetup: the book comes before the first preset's defaults
initCorpus(worker);
initTasks(worker);
initSetup(worker);
initUrlSettings(); // after initSetup: the address's settings go over the preset's defaults
initInspect(worker);
initInside(worker);
initGenerate(worker);
initCheckpoints(worker);

worker.call('adapter').then(renderAdapter, renderAdapterError);
// The default text, then whatever was autosaved last time.
loadBuiltin().then(offerRestore);

// Anything that escapes a panel still reaches the page.
window.addEventListener('unhandledrejection', (e) => {
  showBanner(`Unexpected error: ${e.reason?.message ?? e.reason}. The run is kept: save a checkpoint (Checkpoints), then reload the page if it misbehaves.`);
});
