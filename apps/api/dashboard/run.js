// A run (#/run/<traceId>): its steps in order with the cumulative cost against the run budget, and
// the guard's reservations and decisions between them.
import { api, steps as stepsApi } from './api.js';
import { colors, lineChart } from './charts.js';
import { dateTimeSec, escapeHtml, int, money, pct, timeZone } from './format.js';
import { findingText } from './scope.js';
import { costCell, latencyCell, modelName, reservationCell, tokenCells } from './step-cells.js';

/**
 * The run's cost budget: the smallest stored run policy with maxCost, else the smallest cost limit
 * on this run that a guard decision reported (a request's limits are not stored anywhere else).
 */
export function runBudget(policies, guard, scopeKey) {
  const stored = policies.filter((p) => p.maxCost !== undefined).sort((a, b) => a.maxCost - b.maxCost)[0];
  if (stored)
    return {
      limit: stored.maxCost,
      unit: stored.costUnit ?? null,
      source: `policy ${stored.name}`,
      warnAtPercent: stored.warnAtPercent,
    };
  const findings = guard
    .filter((g) => g.kind === 'decision')
    .flatMap((g) => [...g.violations, ...g.warnings])
    .filter((f) => f.scopeKey === scopeKey && f.limitType === 'cost');
  const reported = findings.sort((a, b) => a.limit - b.limit)[0];
  return reported
    ? {
        limit: reported.limit,
        unit: reported.unit,
        source: reported.source === 'request' ? 'request limit' : `policy ${reported.source.replace(/^policy:/, '')}`,
      }
    : null;
}

export async function renderRun(el, { params, href }) {
  const traceId = params[0];
  if (!traceId) {
    location.hash = href('steps');
    return;
  }
  const scopeKey = `run:${traceId}`;
  const [run, usage] = await Promise.all([
    stepsApi.run(traceId),
    api('GET', `/v1/guard/usage?scopeKey=${encodeURIComponent(scopeKey)}`),
  ]);
  const head = `<div class="page-head"><h1>run <span data-testid="run-id">${escapeHtml(traceId)}</span></h1><span class="muted">every step and guard event of the run, oldest first · times in ${escapeHtml(timeZone())} · <a href="${href(`scope/run/${encodeURIComponent(traceId)}`)}">its budgets</a></span></div>`;
  if (!run.steps.length && !run.guard.length) {
    el.innerHTML = `${head}<section class="panel empty" data-testid="no-data"><h2>No data for this run</h2><p>No step event, reservation or guard decision of this project has the traceId <code>${escapeHtml(traceId)}</code>.</p></section>`;
    return;
  }

  const budget = runBudget(usage.policies, run.guard, scopeKey);
  // Cumulative cost per unit (a run is usually in one); the budget line compares the budget's unit.
  const unit = budget?.unit ?? run.steps.find((s) => s.costUnit)?.costUnit ?? 'USD';
  let cumulative = 0;
  let unpricedTokens = 0;
  const stepRows = run.steps.map((s, i) => {
    if (s.cost !== null && s.costUnit === unit) cumulative += s.cost;
    if (s.unpriced) unpricedTokens += s.usage.totalTokens;
    return { kind: 'step', at: s.occurredAt, n: i + 1, step: s, cumulative };
  });
  const items = [...run.guard.map((g) => ({ kind: 'guard', at: g.occurredAt, guard: g })), ...stepRows].sort((a, b) =>
    a.at === b.at ? (a.kind === 'guard' ? -1 : 1) : a.at < b.at ? -1 : 1,
  );
  const total = cumulative;
  const tokens = run.steps.reduce((a, s) => a + s.usage.totalTokens, 0);
  const ratio = budget ? total / budget.limit : null;
  const status =
    ratio === null
      ? 'ok'
      : ratio >= 1
        ? 'hard'
        : budget.warnAtPercent !== undefined && ratio * 100 >= budget.warnAtPercent
          ? 'soft'
          : 'ok';

  el.innerHTML = `${head}
    <div class="kpis">
      <div class="kpi" data-testid="run-steps"><div class="label">LLM steps</div><div class="value" data-testid="run-steps-value">${int(run.steps.length)}</div><div class="delta">${int(run.guard.filter((g) => g.kind === 'decision').length)} guard denials or warnings</div></div>
      <div class="kpi" data-testid="run-cost"><div class="label">Cost</div><div class="value" data-testid="run-cost-value" data-value="${total}">${escapeHtml(money(total, unit))}</div>${unpricedTokens ? `<div class="unpriced" data-testid="run-unpriced"><span class="badge warn">partly unpriced</span> ${int(unpricedTokens)} tokens unpriced</div>` : '<div class="delta">every step priced</div>'}</div>
      <div class="kpi" data-testid="run-tokens"><div class="label">Tokens</div><div class="value" data-testid="run-tokens-value">${int(tokens)}</div><div class="delta">input + output</div></div>
      <div class="kpi" data-testid="run-budget"><div class="label">Run budget</div><div class="value" data-testid="run-budget-value">${budget ? escapeHtml(money(budget.limit, budget.unit ?? unit)) : '—'}</div><div class="delta">${budget ? `<span class="badge ${status}" data-testid="run-budget-percent">${pct(ratio)} used</span> · ${escapeHtml(budget.source)}` : 'no run budget: a run policy or a request limit on the run scope'}</div></div>
    </div>
    ${run.truncated ? '<p class="lag" data-testid="run-truncated">This run has more events than one page shows (the first 500 of each kind are listed).</p>' : ''}
    <section class="panel"><header><h2>Cumulative cost</h2><span class="muted small">after each step${budget ? ', against the run budget' : ''}</span></header><div class="chart" id="chart-run"></div></section>
    <section class="panel" data-testid="timeline"><header><h2>Timeline</h2><span class="muted small">steps and the guard's reservations and decisions, in the order they happened</span></header>
    <div class="scroll-x"><table class="timeline"><thead><tr><th>#</th><th>Time</th><th>Event</th><th class="num">Input</th><th class="num">Output</th><th class="num">Cost</th><th class="num">Cumulative</th><th class="num">Latency</th><th>Reservation</th></tr></thead>
    <tbody>${items.map((it) => (it.kind === 'step' ? stepRow(it, unit, budget) : guardRow(it.guard, scopeKey, href))).join('')}</tbody></table></div></section>`;

  return () => {
    const xs = stepRows.map((r) => Date.parse(r.at) / 1000);
    lineChart(el.querySelector('#chart-run'), {
      xs,
      format: (v) => money(v, unit),
      series: [{ label: 'Cumulative cost', values: stepRows.map((r) => r.cumulative), fill: colors.fill() }],
      thresholds: budget ? [{ label: `Run budget (${budget.source})`, value: budget.limit, color: colors.deny() }] : [],
    });
  };
}

function stepRow({ n, step: s, cumulative }, unit, budget) {
  return `<tr data-testid="run-step" data-event-id="${escapeHtml(s.eventId)}" data-cumulative="${cumulative}">
    <td class="num">${n}</td>
    <td class="when">${escapeHtml(dateTimeSec(s.occurredAt))}</td>
    <td><span class="badge">step</span> <span data-testid="step-model">${escapeHtml(modelName(s))}</span><div class="muted small">${escapeHtml(s.entityName ?? '')} <code>${escapeHtml(s.eventId)}</code></div></td>
    ${tokenCells(s.usage)}
    ${costCell(s)}
    <td class="num"><span data-testid="run-cumulative">${escapeHtml(money(cumulative, unit))}</span>${budget ? `<div class="muted small" data-testid="run-cumulative-percent">${pct(cumulative / budget.limit)} of budget</div>` : ''}</td>
    ${latencyCell(s)}
    ${reservationCell(s)}
  </tr>`;
}

function guardRow(g, scopeKey, href) {
  if (g.kind === 'reservation') {
    const r = g.reservation;
    return `<tr class="guard" data-testid="run-guard" data-kind="reservation" data-reservation-id="${escapeHtml(r.id)}">
      <td></td><td class="when">${escapeHtml(dateTimeSec(g.occurredAt))}</td>
      <td colspan="7"><span class="badge ok">allowed · reserved</span> <span data-testid="run-reserved">${r.cost === null ? 'unpriced estimate' : escapeHtml(money(r.cost, r.costUnit))} · ${int(r.inputTokens)} in / ${int(r.outputTokens)} out</span> <span class="muted small">for ${g.stepId ? `step <code>${escapeHtml(g.stepId)}</code>` : 'a step'}, reservation <code>${escapeHtml(r.id)}</code>, holds ${r.scopeKeys.map(escapeHtml).join(', ')}</span></td></tr>`;
  }
  return `<tr class="guard" data-testid="run-guard" data-kind="decision" data-decision="${escapeHtml(g.decision)}">
    <td></td><td class="when">${escapeHtml(dateTimeSec(g.occurredAt))}</td>
    <td colspan="7"><span class="badge ${g.decision === 'deny' ? 'deny' : 'warn'}">${g.decision === 'deny' ? 'denied' : 'warned'}</span> ${[...g.violations, ...g.warnings].map((f) => findingText(f, scopeKey, href)).join('<br>')}</td></tr>`;
}
