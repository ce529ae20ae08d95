// How one step event of the ledger (GET /v1/steps, /v1/runs/:id) is shown: shared by the steps
// list and the run page.
import { dateTimeSec, escapeHtml, int, money, ms } from './format.js';

const SCOPE_LINKS = [
  ['traceId', 'run'],
  ['resourceId', 'resource'],
  ['userId', 'user'],
  ['threadId', 'thread'],
  ['organizationId', 'organization'],
  ['sessionId', 'session'],
];

export const modelName = (s) => `${s.provider ?? '—'} / ${s.model ?? '—'}`;

export function scopeCell(s, href) {
  return SCOPE_LINKS.filter(([k]) => s.scopes[k])
    .map(([k, scope]) => {
      const url =
        scope === 'run'
          ? href(`run/${encodeURIComponent(s.scopes[k])}`)
          : href(`scope/${scope}/${encodeURIComponent(s.scopes[k])}`);
      return `<span class="scope-id"><span class="muted">${scope}</span> <a href="${url}" data-testid="step-${scope}">${escapeHtml(s.scopes[k])}</a></span>`;
    })
    .join(' ');
}

/** Input tokens with the cached part beneath; output with the reasoning part. */
export function tokenCells(u) {
  return `<td class="num" data-testid="step-input">${int(u.inputTokens)}${u.cacheReadTokens || u.cacheWriteTokens ? `<div class="muted small"><span data-testid="step-cached">${int(u.cacheReadTokens)}</span> cached${u.cacheWriteTokens ? ` · ${int(u.cacheWriteTokens)} written` : ''}</div>` : ''}</td>
    <td class="num" data-testid="step-output">${int(u.outputTokens)}${u.reasoningTokens ? `<div class="muted small"><span data-testid="step-reasoning">${int(u.reasoningTokens)}</span> reasoning</div>` : ''}</td>`;
}

/** The cost, or a "no price" mark with the tokens it leaves out. */
export function costCell(s) {
  if (s.unpriced) {
    return `<td class="num cost"><span class="amount" data-testid="step-cost">—</span><div class="unpriced" data-testid="step-unpriced"><span class="badge warn">no price</span> <span>${int(s.usage.totalTokens)} tokens unpriced</span></div></td>`;
  }
  return `<td class="num cost"><span class="amount" data-testid="step-cost">${escapeHtml(money(s.cost, s.costUnit))}</span>${s.repriced ? '<div class="muted small">repriced</div>' : ''}</td>`;
}

const STATUS = { open: 'open', settled: 'settled', released: 'released', lapsed: 'lapsed' };

/** The reservation the step named, what it held, and how it was settled. */
export function reservationCell(s) {
  const r = s.reservation;
  if (!r) return '<td class="muted small" data-testid="step-reservation">none</td>';
  const held = `${r.reserved.cost === null ? 'unpriced' : escapeHtml(money(r.reserved.cost, r.reserved.costUnit))} · ${int(r.reserved.inputTokens)} in / ${int(r.reserved.outputTokens)} out`;
  let settlement;
  if (r.status === 'settled') {
    settlement =
      r.settledByEventId === s.eventId
        ? 'settled by this step'
        : `settled by step <code>${escapeHtml(r.settledByEventId ?? '?')}</code>`;
  } else {
    settlement = STATUS[r.status] ?? escapeHtml(r.status);
  }
  return `<td class="small" data-testid="step-reservation" data-reservation-id="${escapeHtml(r.id)}" data-status="${escapeHtml(r.status)}">
    <div><span class="muted">held</span> <span data-testid="step-reserved">${held}</span></div>
    <div><span data-testid="step-settlement">${settlement}</span>${r.exceeded ? ' <span class="badge warn" data-testid="step-exceeded">used more</span>' : ''}</div></td>`;
}

const dayFmt = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium' });
const clockFmt = new Intl.DateTimeFormat(undefined, { timeStyle: 'medium' });
/** Day above, time to the second below: narrow, and steps of one run are seconds apart. */
export const timeCell = (s) =>
  `<td class="when" data-testid="step-time" data-iso="${escapeHtml(s.occurredAt)}" title="${escapeHtml(dateTimeSec(s.occurredAt))}">${escapeHtml(dayFmt.format(new Date(s.occurredAt)))}<div class="muted small">${escapeHtml(clockFmt.format(new Date(s.occurredAt)))}</div></td>`;
export const latencyCell = (s) => `<td class="num" data-testid="step-latency">${ms(s.durationMs)}</td>`;
