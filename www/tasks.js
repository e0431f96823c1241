// Setup, step 1's third source: an algorithmic task (sort, reverse, …)
// whose examples Rust generates. Its options are number inputs made from
// the worker's `tasks` list; the choice lives in `state.task`, and Setup
// fills the model form from the task's preset.

import { $, el, attempt } from './dom.js';
import { update, subscribe } from './state.js';

let list = [];

/// "reverse (len 8)": a task spec in words.
export function taskLabel({ name, options }) {
  const set = Object.entries(options ?? {}).map(([k, v]) => `${k} ${v}`).join(', ');
  return set ? `${name} (${set})` : name;
}

function chosen() {
  return list.find((t) => t.name === $('task').value);
}

/// The option inputs as they stand.
function options() {
  return Object.fromEntries([...$('task-options').querySelectorAll('input')].map((i) => [i.dataset.option, Math.round(Number(i.value))]));
}

function renderOptions(task) {
  $('task-summary').textContent = task.summary;
  $('task-options').textContent = '';
  for (const o of task.options) {
    $('task-options').append(el('label', { title: o.summary }, [
      o.name,
      el('input', { type: 'number', min: o.min, max: o.max, step: 1, value: o.default, dataset: { option: o.name }, oninput: choose }),
      el('span', { className: 'muted small', textContent: `${o.min}–${o.max}` }),
    ]));
  }
}

/// `state.task` from the form: the task picked, or null where the radio is on text.
function choose() {
  const on = $('corpus-task').checked;
  $('task-fields').hidden = !on;
  $('corpus-text').hidden = on;
  update({ task: on ? { name: $('task').value, options: options() } : null });
}

export async function initTasks(worker) {
  for (const radio of document.getElementsByName('corpus-source')) radio.addEventListener('change', choose);
  $('task').addEventListener('change', () => {
    $('corpus-task').checked = true;
    renderOptions(chosen());
    choose();
  });
  subscribe((s) => {
    const disabled = s.busy.has('corpus') || s.busy.has('tokenizer');
    $('corpus-task').disabled = disabled || list.length === 0;
    $('task').disabled = disabled || list.length === 0;
  });
  list = (await attempt($('setup-error'), () => worker.call('tasks'))) ?? [];
  for (const t of list) $('task').append(el('option', { value: t.name, textContent: t.title }));
  if (list.length > 0) renderOptions(list[0]);
  update();
}
