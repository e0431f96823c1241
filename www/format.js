// Numbers in words, for the page and the worker alike (no DOM): sizes in
// bytes, 3 significant digits, counts in groups of three digits, shares
// as percents; number formats' names.

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

/// A share 0–1 as a percent: 0, <0.01%, 2 decimals under 1 %, else 1.
export const pct = (share) => (share === 0 ? '0' : share < 1e-4 ? '<0.01%' : `${(100 * share).toFixed(share < 0.01 ? 2 : 1)}%`);

/// A number format's name as the page writes it: E4M3, bf16, Q1.15, mxfp4.
export const formatLabel = (f) => (/^e\d/.test(f) ? f.toUpperCase() : f.replace(/^q/, 'Q'));
