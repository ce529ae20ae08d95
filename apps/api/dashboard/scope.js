import { api, metrics, STEPS, steps as stepsApi, TOKENS } from './api.js';
import { LIMIT_TYPES, SCOPE_FILTER, statusOf, usageFor } from './budget-math.js';
import { colors, lineChart } from './charts.js';
import { change, compact, dateTime, escapeHtml, int, money, pct, times, timeZone, unpriced } from './format.js';
import { buckets, chartBuckets, onBuckets, WINDOWS } from './time.js';
import { alertsTable, fetchAlerts } from './alerts.js';

const PICKABLE = ['resource', 'thread', 'user', 'organization', 'session', 'run'];

export async function renderScope(el, ctx) {
  const [scope, id] = ctx.params;
  if (!scope || !id || !SCOPE_FILTER[scope]) return renderPicker(el, ctx);
  const { range, href } = ctx;
  const scopeKey = `${scope}:${id}`;
  const base = { [SCOPE_FILTER[scope]]: id };
  const filters = { ...base, timestamp: { start: range.start.toISOString(), end: range.end.toISOString() } };
  const [totals, steps, series, budgets, decisions, exceeded, ever] = await Promise.all([
    metrics.aggregate({ name: TOKENS, aggregation: 'sum', filters, comparePeriod: 'previous_period' }),
    metrics.aggregate({ name: STEPS, aggregation: 'count', filters }),
    metrics.timeseries({ name: TOKENS, interval: range.interval, aggregation: 'sum', filters }),
    api('GET', `/v1/guard/usage?scopeKey=${encodeURIComponent(scopeKey)}`),
    api('GET', `/v1/guard/decisions?scopeKey=${encodeURIComponent(scopeKey)}&limit=20`),
    api('GET', `/v1/guard/exceeded?scopeKey=${encodeURIComponent(scopeKey)}&limit=20`),
    stepsApi.list({ [SCOPE_FILTER[scope]]: id, limit: 1 }),
  ]);

  // An id the ledger has never seen (no step at any time, no guard decision, nothing reserved) is not a scope at zero.
  const held = Object.values(budgets.usage).some(
    (u) => u.reservedInputTokens || u.reservedOutputTokens || u.reservedCost,
  );
  if (!ever.steps.length && !decisions.decisions.length && !held) {
    el.innerHTML = `<div class="page-head"><h1>${escapeHtml(scope)} <span data-testid="scope-id">${escapeHtml(id)}</span></h1><span class="muted"><a href="${href('scope')}">other scope</a></span></div>
      <section class="panel empty" data-testid="no-data"><h2>No data for this ${escapeHtml(scope)}</h2>
      <p>No step event, reservation or guard decision of this project names the ${escapeHtml(scope)} id <code>${escapeHtml(id)}</code>, at any time. Check the id (ids are case-sensitive), or pick one from the lists.</p></section>`;
    return;
  }

  // Each budget's chart: the scope's usage accumulated over that budget's own window, up to now.
  const now = Date.now();
  const limits = budgets.policies.flatMap((p) =>
    LIMIT_TYPES.filter((l) => p[l.field] !== undefined).map((l) => ({ policy: p, ...l, limit: p[l.field] })),
  );
  const windowSeries = await Promise.all(
    limits.map((l) => {
      const span = l.policy.window && scope !== 'run' ? WINDOWS[l.policy.window] : range.spanMs;
      const start = new Date(now - span);
      const { interval, bucketMs } = chartBuckets(span);
      return metrics
        .timeseries({
          name: l.names,
          interval,
          aggregation: 'sum',
          filters: { ...base, timestamp: { start: start.toISOString(), end: new Date(now).toISOString() } },
        })
        .then((r) => ({ start, end: new Date(now), bucketMs, points: r.series[0]?.points ?? [] }));
    }),
  );

  const alerts = await fetchAlerts(scopeKey, 100);
  const unit = totals.costUnit ?? 'USD';
  const delta = change(totals.costChangePercent);
  el.innerHTML = `
    <div class="page-head"><h1>${escapeHtml(scope)} <span data-testid="scope-id">${escapeHtml(id)}</span></h1><span class="muted">${escapeHtml(range.label)} · times in ${escapeHtml(timeZone())} · <a href="${href('steps', undefined, { [SCOPE_FILTER[scope]]: id })}">its steps</a>${scope === 'run' ? ` · <a href="${href(`run/${encodeURIComponent(id)}`)}" data-testid="run-link">run timeline</a>` : ''} · <a href="${href('scope')}">other scope</a></span></div>
    <div class="kpis">
      <div class="kpi" data-testid="kpi-cost"><div class="label">Cost</div><div class="value" data-testid="kpi-cost-value" data-value="${totals.estimatedCost ?? ''}">${escapeHtml(money(totals.estimatedCost ?? 0, unit))}</div><div class="delta">${delta ? `${escapeHtml(delta)} vs previous period` : 'no previous period to compare'}</div>${unpriced(totals, 'kpi-cost-unpriced')}</div>
      <div class="kpi" data-testid="kpi-tokens"><div class="label">Tokens</div><div class="value" data-testid="kpi-tokens-value" data-value="${totals.value ?? 0}">${int(totals.value ?? 0)}</div><div class="delta">input + output</div></div>
      <div class="kpi" data-testid="kpi-steps"><div class="label">LLM steps</div><div class="value" data-testid="kpi-steps-value" data-value="${steps.value ?? 0}">${int(steps.value ?? 0)}</div><div class="delta">in the ${escapeHtml(range.label)}</div></div>
    </div>
    <section class="panel"><header><h2>Cost over the ${escapeHtml(range.label)}</h2></header><div class="chart" id="chart-scope"></div></section>
    <section class="grid" data-testid="budgets">
      <div class="page-head"><h2>Budgets that apply</h2><span class="muted small">usage as the guard counts it now: committed steps + open reservations</span></div>
      ${limits.length ? `<div class="budget-grid">${limits.map((l, i) => budgetCard(l, budgets.usage[l.policy.usageKey], i)).join('')}</div>` : noBudgetHelp(scope)}
    </section>
    <section class="panel" data-testid="decisions"><header><h2>Recent guard denials and warnings</h2><span class="muted small">newest first</span></header>${decisionsTable(decisions.decisions, scopeKey, href)}</section>
    <section class="panel" data-testid="exceeded"><header><h2>Steps that used more than they reserved</h2><span class="muted small">newest first · actual usage as the step event that settled the reservation reported it</span></header>${exceededTable(exceeded.exceeded, scope)}</section>
    <section class="panel" data-testid="scope-alerts"><header><h2>Budget alerts</h2><span class="muted small">newest first · marked on the budgets' charts · <a href="${href(`alerts/${encodeURIComponent(scopeKey)}`)}">all of them</a></span></header>${alertsTable(alerts.slice(0, 20), href, scopeKey)}</section>`;

  return () => {
    const bs = buckets(range.start, range.end, range.bucketMs);
    lineChart(el.querySelector('#chart-scope'), {
      xs: bs.map((t) => t / 1000),
      format: (v) => money(v, unit),
      series: [
        {
          label: 'Cost',
          values: onBuckets(series.series[0]?.points ?? [], bs, range.bucketMs, (p) => p.estimatedCost),
          fill: colors.fill(),
        },
      ],
    });
    limits.forEach((l, i) => {
      const w = windowSeries[i];
      const bs = buckets(w.start, w.end, w.bucketMs);
      let sum = 0;
      const cumulative = onBuckets(w.points, bs, w.bucketMs, l.pick).map((v) => (sum += v));
      const fmt = l.type === 'cost' ? (v) => money(v, unit) : (v, axis) => (axis ? compact(v) : int(v));
      const thresholds = [];
      if (l.policy.warnAtPercent !== undefined)
        thresholds.push({
          label: `Soft (${l.policy.warnAtPercent}%)`,
          value: (l.limit * l.policy.warnAtPercent) / 100,
          color: colors.warn(),
        });
      thresholds.push({ label: 'Hard limit', value: l.limit, color: colors.deny() });
      // Each alert of this budget, marked at its bucket on the usage line.
      const mine = alerts.filter((a) => a.source === `policy:${l.policy.name}` && a.limitType === l.type);
      const marks = bs.map((b, k) =>
        mine.some((a) => Date.parse(a.occurredAt) >= b && Date.parse(a.occurredAt) < b + w.bucketMs)
          ? cumulative[k]
          : null,
      );
      const alertSeries = mine.length
        ? [{ label: 'Alerts', values: marks, color: colors.deny(), points: true, width: 0 }]
        : [];
      lineChart(el.querySelector(`#chart-budget-${i}`), {
        xs: bs.map((t) => t / 1000),
        format: fmt,
        height: 200,
        series: [{ label: `Used (${l.label})`, values: cumulative, fill: colors.fill() }, ...alertSeries],
        thresholds,
      });
    });
  };
}

function budgetCard(l, usage, i) {
  const { policy, type, limit, label } = l;
  const used = usageFor(type, usage);
  const status = statusOf(used, limit, policy.warnAtPercent);
  const fmt = (v) => (type === 'cost' ? money(v, usage?.costUnit ?? 'USD') : int(v));
  // In several units the guard's one figure converts only what has a rate to the project's unit: show each unit's own amount.
  const byUnit = type === 'cost' ? costByUnit(usage) : [];
  const usedText =
    byUnit.length > 1
      ? byUnit
          .map(
            ([unit, v]) =>
              `<span data-testid="budget-used-unit" data-unit="${escapeHtml(unit)}">${escapeHtml(money(v, unit))}</span>`,
          )
          .join(' · ')
      : escapeHtml(fmt(used));
  const statusText =
    status === 'hard'
      ? policy.strategy === 'block'
        ? 'limit reached: steps denied'
        : 'over limit (warn only)'
      : status === 'soft'
        ? 'past soft threshold'
        : 'within budget';
  const ratio = limit ? used / limit : 0;
  return `<section class="panel budget" data-testid="budget" data-policy="${escapeHtml(policy.name)}" data-limit-type="${type}" data-used="${used}" data-limit="${limit}">
    <header><h3>${escapeHtml(policy.name)}</h3><span class="badge ${status}">${statusText}</span></header>
    <div class="figures"><span><span class="big" data-testid="budget-used">${usedText}</span> <span class="muted">of <span data-testid="budget-limit">${escapeHtml(fmt(limit))}</span> ${escapeHtml(label)}</span></span><span class="muted" data-testid="budget-percent">${pct(ratio)}</span></div>
    <div class="meter" aria-hidden="true"><div class="fill ${status === 'ok' ? '' : status}" style="width:${Math.min(ratio * 100, 100).toFixed(2)}%"></div>${policy.warnAtPercent !== undefined ? `<div class="mark" style="left:${policy.warnAtPercent}%"></div>` : ''}</div>
    <div class="facts"><span class="badge">${policy.window ? `rolling ${escapeHtml(policy.window)}` : 'per run'}</span><span class="badge">${policy.strategy === 'block' ? 'blocks' : 'warns only'}</span>${policy.warnAtPercent !== undefined ? `<span class="badge soft">soft at ${policy.warnAtPercent}%</span>` : ''}${policy.entityName ? `<span class="badge">agent ${escapeHtml(policy.entityName)}</span>` : ''}</div>
    ${forecastLine(l, usage, fmt)}
    <div class="chart" id="chart-budget-${i}" style="min-height:200px;margin-top:.6rem"></div>
  </section>`;
}

/** When the limit is reached at the last hour's burn rate (the guard's forecast). */
function forecastLine(l, usage, fmt) {
  const f = usage?.forecast;
  if (!f) return '';
  const mine = f.limits.find((x) => x.source === `policy:${l.policy.name}` && x.limitType === l.type);
  if (!mine) return '';
  const rate = l.type === 'cost' ? money(f.burnRate.cost, f.burnRate.costUnit ?? 'USD') : int(f.burnRate[l.type] ?? 0);
  const when = mine.reachedAt
    ? `limit reached ${escapeHtml(dateTime(mine.reachedAt))}`
    : 'limit not reached within the window';
  return `<div class="muted small" data-testid="budget-forecast" data-reached-at="${escapeHtml(mine.reachedAt ?? '')}">burn ${escapeHtml(rate)}/h over the last hour · ${when}</div>`;
}

/** Committed + reserved cost of each unit, largest first. */
function costByUnit(usage) {
  const committed = usage?.costByUnit ?? {};
  const reserved = usage?.reservedCostByUnit ?? {};
  return [...new Set([...Object.keys(committed), ...Object.keys(reserved)])]
    .map((unit) => [unit, (committed[unit] ?? 0) + (reserved[unit] ?? 0)])
    .sort((a, b) => b[1] - a[1]);
}

const SCOPE_PAGE = /^(run|thread|resource|user|organization|session):(.+)$/s;

/**
 * One limit of a decision: which scope's limit it was (a denial on this page may come from a limit
 * on another scope of the same check, e.g. the run's request limit), where it came from, and the figures.
 */
export function findingText(f, pageScopeKey, href) {
  const fmt = (v) => (f.limitType === 'cost' ? money(v, f.unit) : int(v));
  const m = SCOPE_PAGE.exec(f.scopeKey ?? '');
  const scopeName = m ? `${m[1]} ${m[2]}` : f.scope;
  const other = f.scopeKey && f.scopeKey !== pageScopeKey;
  const scopeHtml =
    other && m
      ? `<a href="${href(`scope/${m[1]}/${encodeURIComponent(m[2])}`)}" data-testid="finding-scope">${escapeHtml(scopeName)}</a>`
      : `<span data-testid="finding-scope">${escapeHtml(scopeName)}</span>`;
  const source = f.source === 'request' ? 'request limit' : `policy ${f.source.replace(/^policy:/, '')}`;
  return `<span data-testid="finding" data-scope-key="${escapeHtml(f.scopeKey ?? '')}">${scopeHtml}${other ? ' <span class="badge">other scope</span>' : ''} · ${escapeHtml(source)}: ${escapeHtml(f.limitType)} ${escapeHtml(fmt(f.usage))} of ${escapeHtml(fmt(f.limit))}${f.window ? ` / ${escapeHtml(f.window)}` : ''} <span class="badge ${f.threshold}">${f.threshold}</span></span>`;
}

function decisionsTable(decisions, scopeKey, href) {
  if (!decisions.length)
    return '<p class="empty-row">No denials or warnings for this scope. They appear here when a guard check passes a soft threshold or is denied.</p>';
  return `<table><thead><tr><th>When</th><th>Decision</th><th>Limits</th><th>Agent</th></tr></thead><tbody>${decisions
    .map(
      (d) => `<tr data-testid="decision" data-decision="${d.decision}">
      <td class="num" style="text-align:left">${escapeHtml(dateTime(d.occurredAt))}</td>
      <td><span class="badge ${d.decision === 'deny' ? 'deny' : 'warn'}">${d.decision === 'deny' ? 'denied' : 'warned'}</span></td>
      <td>${[...d.violations, ...d.warnings].map((f) => findingText(f, scopeKey, href)).join('<br>')}</td>
      <td>${escapeHtml(d.context.entityName ?? '—')}</td></tr>`,
    )
    .join('')}</tbody></table>`;
}

const costText = (cost, unit) => (unit && cost !== null && cost !== undefined ? money(cost, unit) : 'not priced');

function exceededTable(entries, scope) {
  if (!entries.length)
    return `<p class="empty-row" data-testid="no-exceeded">No step of this ${escapeHtml(scope)} used more than the guard reserved for it. A step appears here when its actual tokens or cost pass its reservation, e.g. when the tokenizer counts more input tokens than the estimate.</p>`;
  const pair = (name, reserved, actual) =>
    `<span data-testid="exceeded-reserved-${name}">${escapeHtml(reserved)}</span> → <span data-testid="exceeded-actual-${name}">${escapeHtml(actual)}</span>`;
  return `<div class="scroll-x"><table><thead><tr><th>When</th><th class="num">Input tokens, reserved → actual</th><th class="num">Actual ÷ reserved input</th><th class="num">Output tokens, reserved → actual</th><th class="num">Cost, reserved → actual</th></tr></thead><tbody>${entries
    .map(
      (
        e,
      ) => `<tr data-testid="exceeded-step" data-reservation-id="${escapeHtml(e.reservationId)}" data-step-event-id="${escapeHtml(e.stepEventId)}">
      <td>${escapeHtml(dateTime(e.occurredAt))}<div class="muted small">step ${escapeHtml(e.stepEventId)}</div></td>
      <td class="num">${pair('input', int(e.reserved.inputTokens), int(e.actual.inputTokens))}</td>
      <td class="num"><span class="badge ${e.actual.inputTokens > e.reserved.inputTokens ? 'warn' : ''}" data-testid="exceeded-ratio">${escapeHtml(times(e.reserved.inputTokens ? e.actual.inputTokens / e.reserved.inputTokens : NaN))}</span></td>
      <td class="num">${pair('output', int(e.reserved.outputTokens), int(e.actual.outputTokens))}</td>
      <td class="num">${pair('cost', costText(e.reserved.cost, e.reserved.costUnit), costText(e.actual.cost, e.actual.costUnit))}</td></tr>`,
    )
    .join('')}</tbody></table></div>`;
}

function noBudgetHelp(scope) {
  return `<div class="panel empty" data-testid="no-budgets"><h2>No budget applies to this ${escapeHtml(scope)}</h2>
    <p>Stored policies apply to every guard check of the project. Create one with a key that has the <code>admin</code> scope:</p>
    <pre>curl -X PUT ${escapeHtml(location.origin)}/v1/policies/${escapeHtml(scope)}-weekly \\
  -H "authorization: Bearer $TOLLGATE_ADMIN_KEY" -H "content-type: application/json" \\
  -d '{"scope":"${escapeHtml(scope)}","window":"7d","maxCost":25,"warnAtPercent":80}'</pre></div>`;
}

async function renderPicker(el, { range, href }) {
  const filters = { timestamp: { start: range.start.toISOString(), end: range.end.toISOString() } };
  const dims = [
    ['resource', 'resourceId', 'Resources'],
    ['user', 'userId', 'Users'],
    ['thread', 'threadId', 'Threads'],
  ];
  const lists = await Promise.all(
    dims.map(([, col]) => metrics.breakdown({ name: TOKENS, groupBy: [col], aggregation: 'sum', filters, limit: 10 })),
  );
  el.innerHTML = `
    <div class="page-head"><h1>Scopes</h1><span class="muted">one resource, user, thread, organization, session or run: its usage, budgets and guard decisions</span></div>
    <form class="panel scope-form" id="scope-form">
      <select id="scope-type" aria-label="Scope">${PICKABLE.map((s) => `<option>${s}</option>`).join('')}</select>
      <input id="scope-id" placeholder="id, e.g. customer-42" required aria-label="Scope id">
      <button type="submit">Open</button>
    </form>
    <div class="grid cols-3">${dims
      .map(([scope, col, title], i) => {
        const groups = lists[i].groups.filter((g) => g.dimensions[col] !== null);
        return `<section class="panel"><header><h2>${title}</h2><span class="muted small">${escapeHtml(range.label)}, by tokens</span></header><table><tbody>${
          groups
            .map(
              (g) =>
                `<tr><td class="name"><a href="${href(`scope/${scope}/${encodeURIComponent(g.dimensions[col])}`)}">${escapeHtml(g.dimensions[col])}</a></td><td class="num">${int(g.value)}</td><td class="num cost"><span class="amount">${money(g.estimatedCost, g.costUnit)}</span>${unpriced(g)}</td></tr>`,
            )
            .join('') || `<tr><td class="empty-row">No steps with a ${escapeHtml(col)} in this window.</td></tr>`
        }</tbody></table></section>`;
      })
      .join('')}</div>`;
  el.querySelector('#scope-form').onsubmit = (e) => {
    e.preventDefault();
    location.hash = href(
      `scope/${el.querySelector('#scope-type').value}/${encodeURIComponent(el.querySelector('#scope-id').value.trim())}`,
    );
  };
}
