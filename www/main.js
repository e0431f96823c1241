// The page: asks the worker for the adapter report and shows what it means.

import { startWorker } from './worker-client.js';
import { renderAdapter, renderAdapterError } from './adapter-card.js';

const worker = startWorker();

worker.call('adapter').then(renderAdapter, renderAdapterError);
