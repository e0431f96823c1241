// The Train panel's held-out examples of a task run, as of the last
// validation: each one's prompt, answer and the model's prediction, every
// predicted character marked right or wrong against the answer's.

import { $, el, count } from './dom.js';

/// Examples shown: enough to see which ones the model gets wrong.
const SHOWN = 8;

/// A new run: shown for a task run (empty until it validates), else hidden.
export function resetExamples(task) {
  $('task-examples').hidden = !task;
  $('task-examples-table').querySelector('tbody').textContent = '';
  $('task-examples-status').textContent = 'Validate to see the model\'s answers.';
  $('task-examples').dataset.count = 0;
  delete $('task-examples').dataset.step;
}

/// `examples` from `train.validate` ([] for a text run) at `step`.
export function showExamples(examples, step) {
  if (examples.length === 0) return;
  const shown = examples.slice(0, SHOWN);
  const body = $('task-examples-table').querySelector('tbody');
  body.textContent = '';
  for (const { prompt, answer, predicted } of shown) {
    const want = [...answer];
    body.append(el('tr', { dataset: { right: predicted === answer } }, [
      el('td', { className: 'prompt', textContent: prompt }),
      el('td', { className: 'answer', textContent: answer }),
      el('td', { className: 'predicted' }, [...predicted].map((c, i) =>
        el('span', { className: `char ${c === want[i] ? 'right' : 'wrong'}`, textContent: c, dataset: { right: c === want[i] } }))),
    ]));
  }
  const right = shown.filter((e) => e.predicted === e.answer).length;
  $('task-examples-status').textContent = `At step ${count(step)}: ${right} of these ${shown.length} answered whole.`;
  Object.assign($('task-examples').dataset, { count: shown.length, step });
}
