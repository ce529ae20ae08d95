// Budget alerts (BudgetThresholdCrossed, BudgetExhausted), newest first; #/alerts/<scopeKey> for one scope.
import { api } from './api.js';
import { dateTime, escapeHtml, int, money } from './format.js';

const SCOPE_KEY = /^(run|thread|resource|user|organization|session):(.+)$/s;

/** An alert's usage against its limit, in the limit's unit. */
export const alertFigures = (a) =>
  a.unit === 'tokens'
    ? `${int(a.usage)} of ${int(a.limit)} tokens`
    : `${money(a.usage, a.unit)} of ${money(a.limit, a.unit)}`;

/** The alerts of one scope (or of the project), for this page and the scope page's chart marks. */
export const fetchAlerts = (scopeKey, limit = 100) =>
  api('GET', `/v1/alerts?limit=${limit}${scopeKey ? `&scopeKey=${encodeURIComponent(scopeKey)}` : ''}`).then(
    (r) => r.alerts,
  );

/** The table of alerts; `pageScopeKey` leaves out the scope column's link to the page itself. */
export function alertsTable(alerts, href, pageScopeKey) {
  if (!alerts.length)
    return '<p class="muted" data-testid="no-alerts">No budget alert yet. A policy names its thresholds with <code>alerts: [50, 80, 100]</code>; a hard limit that denies a step alerts too.</p>';
  const rows = alerts
    .map((a) => {
      const [, scope, id] = SCOPE_KEY.exec(a.scopeKey) ?? [];
      const scopeCell =
        a.scopeKey === pageScopeKey || !scope
          ? escapeHtml(a.scopeKey)
          : `<a href="${href(`scope/${encodeURIComponent(scope)}/${encodeURIComponent(id)}`)}">${escapeHtml(a.scopeKey)}</a>`;
      const what =
        a.kind === 'BudgetExhausted'
          ? '<span class="badge hard">exhausted</span>'
          : `<span class="badge soft">${escapeHtml(String(a.threshold))}%</span>`;
      return `<tr data-testid="alert" data-kind="${escapeHtml(a.kind)}" data-threshold="${a.threshold}" data-event-id="${escapeHtml(a.eventId)}">
        <td>${escapeHtml(dateTime(a.occurredAt))}</td><td>${what}</td><td>${scopeCell}${a.window ? ` <span class="muted">(${escapeHtml(a.window)})</span>` : ''}</td>
        <td>${escapeHtml(a.source)}</td><td>${escapeHtml(a.limitType)}</td><td data-testid="alert-figures">${escapeHtml(alertFigures(a))}</td></tr>`;
    })
    .join('');
  return `<table class="table" data-testid="alerts-table"><thead><tr><th>When</th><th>Alert</th><th>Scope</th><th>Policy</th><th>Limit</th><th>Usage</th></tr></thead><tbody>${rows}</tbody></table>`;
}

export async function renderAlerts(el, ctx) {
  const scopeKey = ctx.params.length ? ctx.params.join('/') : undefined;
  const alerts = await fetchAlerts(scopeKey && SCOPE_KEY.test(scopeKey) ? scopeKey : undefined, 200);
  el.innerHTML = `<div class="page-head"><h1>Budget alerts${scopeKey ? ` <span data-testid="alerts-scope">${escapeHtml(scopeKey)}</span>` : ''}</h1><span class="muted">newest first · each threshold alerts once per crossing${scopeKey ? ` · <a href="${ctx.href('alerts')}">all scopes</a>` : ''}</span></div>
    <section class="panel" data-testid="alerts">${alertsTable(alerts, ctx.href, scopeKey)}</section>`;
}
