// The setup in the page's address: every setting of Setup and Train that
// differs from its default is written into the query string as the form
// changes (history.replaceState) and read back when the page opens, after
// the preset's or task's defaults have filled the form, so a link sets up
// the same run — not its weights, nor the user's files, which no address
// can carry. The query, not the hash: the settings are read once, when the
// page opens, and a query edited by hand reloads the page (a hash would not).

import { $ } from './dom.js';
import { state, subscribe } from './state.js';
import { firstPreset, inputOf, presetDefaults, runSettings, taskDefaults } from './defaults.js';
import { recipeParam, takeRecipe } from './recipe-editor.js';

/// [name in the address, the input, its RunSpec field (null: the input's
/// own default)]: every run setting the form has (Rust's run::settings, in
/// its order), and how often to validate, which is the page's own.
async function fields() {
  const settings = (await runSettings()).map((s) => [s.field, inputOf(s.field), s.field]);
  return [...settings, ['valEvery', $('val-every'), null]].filter(([, input]) => input);
}
/// A defaults fill that never comes (the worker failed) stops waiting.
const FILL_WAIT_MS = 30_000;

/// A custom model's sizes, named by their Hugging Face fields.
const modelInputs = () => [...document.querySelectorAll('#custom-fields [data-field]')];
const optionInputs = () => [...document.querySelectorAll('#task-options [data-option]')];

const valueOf = (input) => (input.type === 'checkbox' ? String(input.checked) : input.value);
/// A setting's value in the address: the recipe's is a name or its JSON.
const settingOf = (input) => (input.id === 'precision' ? recipeParam() : input.value);
/// The same setting: numbers by value ("0.0020" is 0.002), others as text.
const same = (value, base) => (typeof base === 'number' ? Number(value) === base : value === String(base));

/// Why `raw` cannot go in `input`, or null when it can.
function refusal(input, raw) {
  if (input.tagName === 'SELECT') {
    return [...input.options].some((o) => o.value === raw) ? null : `not one of ${[...input.options].map((o) => o.value).join(', ')}`;
  }
  if (input.type === 'checkbox') return raw === 'true' || raw === 'false' ? null : 'not true or false';
  const v = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(v)) return 'not a number';
  if (input.min !== '' && v < Number(input.min)) return `below ${input.min}`;
  if (input.max !== '' && v > Number(input.max)) return `above ${input.max}`;
  if (input.step !== 'any' && !Number.isInteger(v)) return 'not a whole number';
  return null;
}

/// Sets `input` as a person would, so its panel hears it.
function set(input, raw) {
  if (input.type === 'checkbox') input.checked = raw === 'true'; else input.value = raw;
  for (const type of ['input', 'change']) input.dispatchEvent(new Event(type, { bubbles: true }));
}

/// The next time Setup fills the form from a preset's or task's defaults.
function nextFill() {
  return new Promise((resolve) => {
    $('setup').addEventListener('filled', resolve, { once: true });
    setTimeout(resolve, FILL_WAIT_MS);
  });
}

// --- writing ----------------------------------------------------------

let applying = true;
let writeTimer = 0;
let writes = 0;

function writeSoon() {
  if (applying) return;
  clearTimeout(writeTimer);
  writeTimer = setTimeout(write, 100);
}

/// The address for the form as it stands: the task's options that are not
/// their defaults, and what differs from the task's preset for its options,
/// or from the preset's (custom: the first preset's).
async function write() {
  const mine = ++writes;
  const preset = $('preset').value;
  const task = state.task;
  let base;
  let plain;
  let settings;
  try {
    base = await (task ? taskDefaults(task) : presetDefaults(preset === 'custom' ? firstPreset() : preset));
    plain = task && await taskDefaults({ name: task.name });
    settings = await fields();
  } catch {
    return; // no defaults to compare with: the address stays as it was
  }
  if (mine !== writes) return; // the form changed meanwhile
  const q = new URLSearchParams();
  if (task) {
    q.set('task', task.name);
    for (const [k, v] of Object.entries(task.options)) if (plain.task.options[k] !== v) q.set(`task.${k}`, v);
  } else if (preset !== firstPreset()) {
    q.set('preset', preset);
  }
  for (const [name, input, field] of settings) {
    const value = settingOf(input);
    if (!same(value, field ? base[field] : input.defaultValue)) q.set(name, value);
  }
  if (preset === 'custom') {
    for (const input of modelInputs()) {
      if (!same(valueOf(input), base.model[input.dataset.field])) q.set(input.dataset.field, valueOf(input));
    }
  }
  const search = q.toString();
  history.replaceState(history.state, '', `${location.pathname}${search ? `?${search}` : ''}${location.hash}`);
}

// --- reading ----------------------------------------------------------

/// Fills the form from the address's settings, after the first fill of
/// the defaults (`filled`): {used, ignored}, each a list of words.
async function apply(params, filled) {
  const given = new Map(params);
  const take = (name) => {
    const v = given.get(name);
    given.delete(name);
    return v;
  };
  const used = [];
  const ignored = [];
  const put = (input, name, raw) => {
    const why = refusal(input, raw);
    if (why) ignored.push(`${name}=${raw} (${why})`);
    else {
      set(input, raw);
      used.push(`${name} ${raw}`);
    }
  };
  await filled;

  const task = take('task');
  if (task !== undefined) {
    if (![...$('task').options].some((o) => o.value === task)) ignored.push(`task=${task} (no such task)`);
    else {
      const fill = nextFill();
      set($('task'), task);
      used.push(`task ${task}`);
      await fill;
      // the task's preset follows its options: the fields go over the last fill
      const refill = nextFill();
      const before = used.length;
      for (const input of optionInputs()) {
        const raw = take(`task.${input.dataset.option}`);
        if (raw !== undefined) put(input, `task.${input.dataset.option}`, raw);
      }
      if (used.length > before) await refill;
    }
  }
  const preset = take('preset');
  if (preset !== undefined) {
    if (state.task) ignored.push(`preset=${preset} (a task sizes its own model)`);
    else if (refusal($('preset'), preset)) ignored.push(`preset=${preset} (${refusal($('preset'), preset)})`);
    else if (preset !== $('preset').value) {
      const fill = nextFill();
      set($('preset'), preset);
      used.push(`preset ${preset}`);
      if (preset !== 'custom') await fill; // custom keeps the sizes there are
    }
  }
  for (const [name, input] of await fields()) {
    const raw = take(name);
    if (raw === undefined) continue;
    if (input.id !== 'precision') put(input, name, raw);
    else {
      // a recipe's name or JSON, checked by Rust
      const { label, refusal } = await takeRecipe(raw);
      if (refusal) ignored.push(`${name}=${raw} (${refusal})`); else used.push(`${name} ${label}`);
    }
  }
  const custom = $('preset').value === 'custom';
  for (const input of modelInputs()) {
    const name = input.dataset.field;
    const raw = take(name);
    if (raw === undefined) continue;
    if (!custom) ignored.push(`${name}=${raw} (only for a custom model: add preset=custom)`);
    else if (input.disabled) ignored.push(`${name}=${raw} (the task's own)`);
    else put(input, name, raw);
  }
  for (const [name, raw] of given) ignored.push(`${name}=${raw} (not a setting)`);
  return { used, ignored };
}

/// What the address set up, and what it could not: told, not thrown.
function tell({ used, ignored }) {
  const notice = $('url-notice');
  notice.hidden = used.length === 0 && ignored.length === 0;
  notice.textContent = (used.length ? `Set up from the link: ${used.join(', ')}.` : '')
    + (ignored.length ? ` Ignored: ${ignored.join('; ')}.` : '');
  Object.assign(notice.dataset, { used: used.length, ignored: ignored.length });
}

async function copyLink() {
  const status = $('link-status');
  try {
    await navigator.clipboard.writeText(location.href);
    status.textContent = 'Copied: the link sets up this run (its settings, not its weights).';
  } catch {
    status.textContent = `Copy this address: ${location.href}`;
  }
  if ($('corpus-user').checked) status.textContent += ' Your files are not in it: it opens on the built-in corpus.';
}

/// Call right after initSetup, before its first fill of the defaults.
export function initUrlSettings() {
  const filled = nextFill();
  apply([...new URLSearchParams(location.search)], filled).then(async (told) => {
    applying = false;
    await write();
    tell(told);
  });
  for (const type of ['input', 'change']) {
    document.addEventListener(type, (e) => { if (e.target.closest?.('#setup, #train')) writeSoon(); });
  }
  $('setup').addEventListener('filled', writeSoon);
  // a run made, loaded or converted sets the precision and state shown
  let seenRun = null;
  subscribe((s) => {
    if (s.run === seenRun) return;
    seenRun = s.run;
    writeSoon();
  });
  $('copy-link').addEventListener('click', copyLink);
}
