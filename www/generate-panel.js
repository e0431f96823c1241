// The Generate panel: a prompt and sampling settings go to the worker
// (`generate`); the continuation streams into the output as the worker
// reports each token ({token: its text, text: the continuation so far,
// decoded whole so a character split across tokens comes out right}).

import { $, el, attempt, intValue, numberValue } from './dom.js';
import { subscribe, busy } from './state.js';

let worker;

async function generate() {
  const prompt = $('prompt').value;
  const out = $('generate-output');
  const generated = el('span', { className: 'generated' });
  out.textContent = '';
  out.append(el('span', { className: 'prompt', textContent: prompt }), generated);
  out.dataset.state = 'streaming';
  out.dataset.tokens = 0;
  const request = {
    prompt,
    temperature: numberValue('temperature'),
    topK: intValue('top-k'),
    length: intValue('gen-length'),
    seed: intValue('gen-seed'),
  };
  const result = await busy('generate', () => attempt($('generate-error'), () =>
    worker.call('generate', request, ({ text }) => {
      generated.textContent = text;
      out.dataset.tokens = Number(out.dataset.tokens) + 1;
    })));
  if (!result) {
    out.dataset.state = 'error';
    return;
  }
  generated.textContent = result.text; // the continuation, without the prompt
  out.dataset.state = 'done';
}

export function initGenerate(w) {
  worker = w;
  $('generate-run').addEventListener('click', generate);
  subscribe((s) => {
    $('generate-run').disabled = !s.run || s.busy.has('generate') || s.busy.has('load');
    if (s.run) $('gen-length').max = s.run.config.model.max_position_embeddings;
  });
}
