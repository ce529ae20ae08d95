// Numbers and times in the viewer's locale and time zone (Intl, no library).
const locale = undefined; // the browser's

const intFmt = new Intl.NumberFormat(locale, { maximumFractionDigits: 0 });
const compactFmt = new Intl.NumberFormat(locale, { notation: 'compact', maximumFractionDigits: 1 });
const pctFmt = new Intl.NumberFormat(locale, { style: 'percent', maximumFractionDigits: 1 });
const signedPctFmt = new Intl.NumberFormat(locale, {
  style: 'percent',
  maximumFractionDigits: 1,
  signDisplay: 'exceptZero',
});
const timesFmt = new Intl.NumberFormat(locale, { minimumFractionDigits: 2, maximumFractionDigits: 2 });
const dateTimeFmt = new Intl.DateTimeFormat(locale, { dateStyle: 'medium', timeStyle: 'short' });
const moneyFmts = new Map();

/**
 * One money format everywhere: two decimals, and up to four when the amount has sub-cent digits
 * (agents' costs are often fractions of a cent): $1.00, $0.50, $0.0045, $12.3457.
 */
export const MONEY_DIGITS = { min: 2, max: 4 };

function moneyFormat(unit) {
  if (!moneyFmts.has(unit)) {
    let fmt;
    try {
      fmt = new Intl.NumberFormat(locale, {
        style: 'currency',
        currency: unit,
        minimumFractionDigits: MONEY_DIGITS.min,
        maximumFractionDigits: MONEY_DIGITS.max,
      });
    } catch {
      // Not an ISO 4217 code (e.g. "credits"): a plain number followed by the unit.
      const plain = new Intl.NumberFormat(locale, {
        minimumFractionDigits: MONEY_DIGITS.min,
        maximumFractionDigits: MONEY_DIGITS.max,
      });
      fmt = { format: (v) => `${plain.format(v)} ${unit}` };
    }
    moneyFmts.set(unit, fmt);
  }
  return moneyFmts.get(unit);
}

/** A cost in the unit the data has; null cost is "—", a cost of mixed units says so. */
export function money(amount, unit) {
  if (amount === null || amount === undefined) return '—';
  if (!unit) return `${intlNumber(amount)} (mixed units)`;
  return moneyFormat(unit).format(amount);
}

function intlNumber(v) {
  return new Intl.NumberFormat(locale, {
    minimumFractionDigits: MONEY_DIGITS.min,
    maximumFractionDigits: MONEY_DIGITS.max,
  }).format(v);
}

export const int = (v) => (v === null || v === undefined ? '—' : intFmt.format(v));
export const compact = (v) => compactFmt.format(v);
export const pct = (ratio) => pctFmt.format(ratio);
/** A ratio as a multiple, e.g. "3.00×"; "—" when there is nothing to divide by. */
export const times = (ratio) => (Number.isFinite(ratio) ? `${timesFmt.format(ratio)}×` : '—');
export const dateTime = (iso) => dateTimeFmt.format(new Date(iso));
const timeSecFmt = new Intl.DateTimeFormat(locale, { dateStyle: 'medium', timeStyle: 'medium' });
/** To the second: steps of one run are often seconds apart. */
export const dateTimeSec = (iso) => timeSecFmt.format(new Date(iso));
const msFmt = new Intl.NumberFormat(locale, { maximumFractionDigits: 0 });
/** A latency in milliseconds ("—" when the step reported none). */
export const ms = (v) => (v === null || v === undefined ? '—' : `${msFmt.format(v)} ms`);

/** "+12.5% vs previous period", from Mastra's changePercent (null when there is nothing to compare). */
export function change(percent) {
  if (percent === null || percent === undefined) return null;
  return signedPctFmt.format(percent / 100);
}

export const timeZone = () => Intl.DateTimeFormat().resolvedOptions().timeZone;

export function duration(ms) {
  const s = Math.round(ms / 1000);
  if (s < 120) return `${s} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  return `${Math.round(s / 3600)} h`;
}

export function escapeHtml(s) {
  return String(s).replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c],
  );
}

/**
 * What a cost leaves out (the metric routes' unpricedSteps / unpricedTokens): a "no price" badge
 * when none of the row's steps had a price, "partly unpriced" when some did not, and their tokens.
 * Empty when every step was priced.
 */
export function unpriced(u, testId = 'unpriced') {
  if (!u || !u.unpricedSteps) return '';
  const whole = u.estimatedCost === null || u.estimatedCost === undefined;
  const steps = `${int(u.unpricedSteps)} step${u.unpricedSteps === 1 ? '' : 's'}`;
  return (
    `<div class="unpriced" data-testid="${testId}" data-steps="${u.unpricedSteps}" data-tokens="${u.unpricedTokens}" title="${escapeHtml(`${steps} without a price: their tokens are not in the cost`)}">` +
    `<span class="badge warn" data-testid="${testId}-badge">${whole ? 'no price' : 'partly unpriced'}</span> ` +
    `<span><span data-testid="${testId}-tokens">${int(u.unpricedTokens)} tokens</span> unpriced</span></div>`
  );
}
