// Small helpers every panel uses: element lookup, number formatting, and
// errors shown in the page (a panel's own alert, or the global banner).

export const $ = (id) => document.getElementById(id);

export function bytes(n) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${Number.isInteger(n) ? n : n.toFixed(1)} ${units[i]}`;
}

/// 3 significant digits; exponent form for very small or large values.
export function num(x, digits = 3) {
  if (x === null || x === undefined) return '—';
  if (!Number.isFinite(x)) return String(x);
  if (x === 0) return '0';
  const a = Math.abs(x);
  if (a < 1e-3 || a >= 1e6) return x.toExponential(digits - 1);
  return Number(x.toPrecision(digits)).toString();
}

/// 1234567 → "1 234 567"
export function count(n) {
  return Math.round(n).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ' ');
}

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
