// The Generate panel: a prompt and sampling settings go to the worker
// (`generate`); each token's text streams into the output as the worker
// reports it, and the final answer replaces the streamed text.

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
      generated.textContent += text;
      out.dataset.tokens = Number(out.dataset.tokens) + 1;
    })));
  if (!result) {
    out.dataset.state = 'error';
    return;
  }
  // the answer is the whole text: the prompt's continuation, or with the prompt
  generated.textContent = result.text.startsWith(prompt) ? result.text.slice(prompt.length) : result.text;
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
