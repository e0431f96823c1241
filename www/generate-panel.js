// The Generate panel: a prompt and sampling settings go to the worker
// (`generate`); the continuation streams into the output as the worker
// reports each token ({token: its text, text: the continuation so far,
// decoded whole so a character split across tokens comes out right, prob:
// the model's probability of the token}), each token a span whose hover
// shows that probability.

import { $, el, attempt, intValue, numberValue, num } from './dom.js';
import { subscribe, busy } from './state.js';

let worker;

/// The prompt this panel last put in for a task run (its first held-out
/// example's): a text's "The " means nothing in a task's characters. The
/// person's own prompt is never replaced.
let offered = null;

function offerPrompt(run) {
  const box = $('prompt');
  const mine = box.value !== box.defaultValue && box.value !== offered;
  if (mine) return;
  offered = run?.task_prompt ?? null;
  box.value = offered ?? box.defaultValue;
}

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
    worker.call('generate', request, ({ token, prob }) => {
      generated.append(el('span', { className: 'token', textContent: token, title: `p = ${num(prob, 3)}` }));
      out.dataset.tokens = Number(out.dataset.tokens) + 1;
    })));
  if (!result) {
    out.dataset.state = 'error';
    return;
  }
  // a character split across tokens arrives with the later one: the spans
  // hold the continuation, or else it is shown whole
  if (generated.textContent !== result.text) generated.textContent = result.text;
  out.dataset.state = 'done';
}

export function initGenerate(w) {
  worker = w;
  $('generate-run').addEventListener('click', generate);
  subscribe((s) => {
    $('generate-run').disabled = !s.run || s.busy.has('generate') || s.busy.has('load');
    if (s.run) $('gen-length').max = s.run.config.model.max_position_embeddings;
    offerPrompt(s.run);
  });
}
