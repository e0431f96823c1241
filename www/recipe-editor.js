// The precision selector's "custom…" and the recipe editor: a named
// recipe is chosen by its name; "custom…" (or Edit a copy) opens a table of
// the six operands (format, blocks, rounding, Hadamard) and the recipe's
// other parts, built from Rust's recipe book. Every edit is checked by
// Rust (`recipe.check`): a refusal is shown beside the editor with its
// reason, the edits kept, and Create and Switch wait for a recipe Rust
// takes. A run's recipe shows here when it is made, loaded or switched.

import { $, el } from './dom.js';
import { state, subscribe, update } from './state.js';
import { runSettings } from './defaults.js';
import { OPERANDS, partsOf, recipeBook, recipeLabel, setBook } from './recipes.js';

let worker;
/// The selector's value for the editor's recipe.
const CUSTOM = 'custom';
/// An operand's parts, the editor's columns, in Rust's order.
const OPERAND_PARTS = ['format', 'blocks', 'rounding', 'hadamard', 'hadamardSigns', 'hadamardSize'];
/// The recipe's other parts, [path, kind, label]: a choice takes the book's
/// values of the path's last name; an optional part is left out of the
/// recipe while its box is clear, and starts from the book's defaults. A
/// new part of recipes is a row here.
const FIELDS = [
  ['name', 'text', 'Name'],
  ['weights', 'choice', 'Weights'],
  ['boundaries', 'choice', 'Boundaries'],
  ['attention', 'choice', 'Attention products'],
  ['wide.first', 'int', 'Wide first layers'],
  ['wide.last', 'int', 'Wide last layers'],
  ['wide.head', 'bool', 'Wide head'],
  ['lossScaling', 'optional', 'Loss scaling'],
  ['lossScaling.init', 'float', 'init'],
  ['lossScaling.growthInterval', 'int', 'growth interval'],
  ['lossScaling.growth', 'float', 'growth'],
  ['lossScaling.backoff', 'float', 'backoff'],
];
/// The product each pass computes, as the rows' titles say.
const PRODUCTS = { forward: 'Y = X·Wᵀ', dgrad: 'dX = dY·W', wgrad: 'dW = dYᵀ·X' };
/// Kept in a compact recipe even where they equal fp32's.
const KEPT = new Set(['name', 'version', 'format']);

const inputs = () => [...$('recipe-editor').querySelectorAll('[data-path]')];

/// The control for `path`: a select of `choices`, a checkbox, a number or text.
function control(path, kind, choices = []) {
  const dataset = { path };
  if (kind === 'choice') return el('select', { dataset }, choices.map((c) => el('option', { value: c, textContent: c })));
  if (kind === 'bool') return el('input', { type: 'checkbox', dataset });
  if (kind === 'optional') return el('input', { type: 'checkbox', dataset: { optional: path } });
  if (kind === 'int') return el('input', { type: 'number', min: '0', step: '1', dataset });
  if (kind === 'float') return el('input', { type: 'number', step: 'any', dataset });
  return el('input', { type: 'text', size: 14, dataset });
}

function build({ parts }) {
  const last = (path) => path.split('.').at(-1);
  $('recipe-fields').replaceChildren(...FIELDS.map(([path, kind, label]) => {
    const input = control(path, kind, parts[last(path)]);
    const check = kind === 'bool' || kind === 'optional';
    return el('label', { className: check ? 'check' : '' }, check ? [input, label] : [label, input]);
  }), el('input', { type: 'hidden', dataset: { path: 'version', kind: 'int' } }));
  const titles = { hadamard: 'Hadamard', hadamardSigns: 'its signs', hadamardSize: 'its block' };
  const operandControl = (path, p) => {
    const input = control(path, p === 'hadamard' ? 'bool' : 'choice', parts[p]);
    if (p === 'hadamardSize') input.dataset.kind = 'int';  // a number in the recipe
    return input;
  };
  const head = el('tr', {}, ['operand', ...OPERAND_PARTS].map((c) => el('th', { textContent: titles[c] ?? c })));
  const rows = OPERANDS.map(([pass, op]) => el('tr', { title: `${pass}: ${PRODUCTS[pass]}` }, [
    el('th', { textContent: `${pass} ${op === 'dy' ? 'dY' : op.toUpperCase()}` }),
    ...OPERAND_PARTS.map((p) => el('td', {}, operandControl(`${pass}.${op}.${p}`, p))),
  ]));
  $('recipe-operands').replaceChildren(el('thead', {}, head), el('tbody', {}, rows));
}

const optionals = () => [...$('recipe-editor').querySelectorAll('[data-optional]')];
const get = (parts, path) => path.split('.').reduce((o, k) => o?.[k], parts);
/// Whether `input` belongs to an optional part whose box is clear.
const left = (input) => optionals().some((box) => !box.checked && input.dataset.path.startsWith(`${box.dataset.optional}.`));

/// The editor's recipe: its parts as the inputs say.
function edited() {
  const parts = {};
  for (const input of inputs().filter((i) => !left(i))) {
    const keys = input.dataset.path.split('.');
    const at = keys.slice(0, -1).reduce((o, k) => (o[k] ??= {}), parts);
    const number = input.type === 'number' || input.dataset.kind === 'int';
    at[keys.at(-1)] = input.type === 'checkbox' ? input.checked : number ? Number(input.value) : input.value;
  }
  return parts;
}

function fillEditor(parts) {
  for (const box of optionals()) box.checked = get(parts, box.dataset.optional) != null;
  for (const input of inputs()) {
    const v = get(parts, input.dataset.path) ?? get(recipeBook().defaults, input.dataset.path);
    if (input.type === 'checkbox') input.checked = Boolean(v); else input.value = String(v);
  }
  showOptionals();
}

/// An optional part's inputs are disabled while it is left out.
function showOptionals() {
  for (const input of inputs()) input.disabled = left(input);
}

const isObject = (v) => v !== null && typeof v === 'object';
/// Equal parts, whatever their keys' order (the book's are sorted).
const same = (a, b) => (isObject(a) && isObject(b)
  ? Object.keys(a).length === Object.keys(b).length && Object.keys(a).every((k) => same(a[k], b[k]))
  : a === b);

/// `parts` without what equals `base`'s (fp32's: the defaults), but for
/// the name, version and each operand's format, which Rust needs.
function compact(parts, base) {
  const out = {};
  for (const [k, v] of Object.entries(parts)) {
    if (KEPT.has(k)) out[k] = v;
    else if (!same(v, base?.[k])) out[k] = isObject(v) ? compact(v, base?.[k]) : v;
  }
  return out;
}

const custom = () => $('precision').value === CUSTOM;

/// The recipe the selector and editor give: a name, or the editor's parts.
export const chosenRecipe = () => (custom() ? edited() : $('precision').value);

/// The chosen recipe as the address writes it: a name, or compact JSON.
export const recipeParam = () => (custom() ? JSON.stringify(compact(edited(), recipeBook().recipes.fp32)) : $('precision').value);

/// `recipe` (a name or parts) as Rust takes it, or throws its refusal.
const check = (recipe) => worker.call('recipe.check', { recipe });

/// Shows `recipe` (a name, or a custom recipe's parts as Rust wrote them);
/// the editor keeps its edits while a named one is shown.
export function showRecipe(recipe) {
  const named = typeof recipe === 'string';
  $('precision').value = named ? recipe : CUSTOM;
  $('recipe-editor').hidden = named;
  if (named) {
    lastNamed = recipe;
    if (state.recipeRefusal) update({ recipeRefusal: null });
  } else {
    fillEditor(recipe);
    $('recipe-editor').dataset.filled = 'true';
    tell(recipe, null);
  }
}

/// Shows Rust's verdict on the editor's recipe: `taken` (as Rust writes
/// it), or `refusal`.
function tell(taken, refusal) {
  const status = $('recipe-status');
  status.dataset.state = refusal ? 'refused' : 'ok';
  status.className = refusal ? 'error small' : 'muted small';
  status.textContent = refusal ?? (typeof taken === 'string' ? `This is the named recipe ${taken}, unchanged.` : 'Rust takes this recipe.');
  if (state.recipeRefusal !== refusal) update({ recipeRefusal: refusal });
}

/// Checks the editor's recipe after each edit; the last edit's answer wins.
let checks = 0;
async function edit() {
  const mine = ++checks;
  let taken = null;
  let refusal = null;
  try {
    taken = await check(edited());
  } catch (e) {
    refusal = e.message;
  }
  if (mine === checks && custom()) tell(taken, refusal);
}

/// The named recipe chosen last: "custom…" starts from a copy of it.
let lastNamed = null;

/// The selector changed: "custom…" opens the editor, on a copy of the
/// recipe chosen before where it has nothing of its own yet.
function chosen() {
  if (!custom()) showRecipe($('precision').value);
  else {
    if (!$('recipe-editor').dataset.filled) copy(lastNamed);
    $('recipe-editor').hidden = false;
    edit();
  }
  update(); // Edit a copy follows the choice
}

/// The editor opens on a copy of named recipe `name`.
function copy(name) {
  fillEditor(partsOf(name));
  $('recipe-editor').dataset.filled = 'true';
  $('precision').value = CUSTOM;
  $('recipe-editor').hidden = false;
}

/// The address's `precision` (a name, or a recipe's JSON) into the
/// selector and editor: {label}, or {refusal} saying why not.
export async function takeRecipe(raw) {
  await ready;
  let recipe;
  try {
    recipe = raw.trimStart().startsWith('{') ? JSON.parse(raw) : raw;
  } catch (e) {
    return { refusal: `not JSON: ${e.message}` };
  }
  try {
    recipe = await check(recipe);
  } catch (e) {
    return { refusal: e.message };
  }
  showRecipe(recipe);
  $('precision').dispatchEvent(new Event('input', { bubbles: true })); // the plan follows; a run does not switch
  return { label: recipeLabel(recipe) };
}

function render(s) {
  const idle = s.run && !s.training && s.busy.size === 0;
  $('recipe-copy').disabled = s.training || custom();
  $('recipe-apply').hidden = !s.run;
  $('recipe-apply').disabled = !idle || Boolean(s.recipeRefusal);
}

/// Settled once the editor is built from the book.
let ready;

async function start() {
  const [book, settings] = await Promise.all([worker.call('recipe.book', {}), runSettings()]);
  setBook(book);
  build(book);
  lastNamed = settings.find((s) => s.field === 'precision').choices[0];
  $('precision').append(el('option', { value: CUSTOM, textContent: 'custom…' }));
  subscribe(render);
}

/// Call before initSetup: the book is asked before any preset's defaults.
export function initRecipeEditor(w) {
  worker = w;
  ready = start();
  ready.catch(() => {}); // the worker's failure is told by the banner
  $('precision').addEventListener('change', chosen);
  $('recipe-editor').addEventListener('input', () => {
    $('recipe-editor').dataset.filled = 'true';
    showOptionals();
    edit();
  });
  $('recipe-copy').addEventListener('click', () => { copy($('precision').value); edit(); });
}
