// Small helpers every panel uses: element lookup, number formatting (from
// www/format.js), and errors shown in the page (a panel's own alert, or the
// global banner).

export { bytes, num, count, pct, formatLabel } from './format.js';

export const $ = (id) => document.getElementById(id);

export function el(tag, props = {}, children = []) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === 'dataset') Object.assign(e.dataset, v);
    else if (k in e) e[k] = v;
    else e.setAttribute(k, v);
  }
  for (const c of [].concat(children)) e.append(c);
  return e;
}

export function showError(target, error) {
  const message = error instanceof Error ? error.message : String(error);
  target.textContent = message;
  target.hidden = false;
}

export function clearError(target) {
  target.textContent = '';
  target.hidden = true;
}

/// The page-wide alert, with what the user can do next: `actions` are
/// [{label, run}] buttons beside the message's own dismiss button.
export function showBanner(message, actions = []) {
  const banner = $('banner');
  banner.textContent = '';
  const buttons = actions.map(({ label, run }) => el('button', { type: 'button', textContent: label, onclick: run }));
  const dismiss = el('button', { type: 'button', className: 'dismiss', textContent: 'Dismiss', onclick: () => { banner.hidden = true; } });
  banner.append(el('span', { className: 'message', textContent: message }), el('span', { className: 'actions' }, [...buttons, dismiss]));
  banner.hidden = false;
}

export const RELOAD = { label: 'Reload the page', run: () => location.reload() };

/// Runs `fn` with `errorEl` cleared; a failure shows in `errorEl` and
/// resolves to undefined.
export async function attempt(errorEl, fn) {
  clearError(errorEl);
  try {
    return await fn();
  } catch (e) {
    showError(errorEl, e);
    return undefined;
  }
}

export function intValue(id) {
  const v = Number($(id).value);
  return Number.isFinite(v) ? Math.round(v) : NaN;
}

export function numberValue(id) {
  return Number($(id).value);
}
