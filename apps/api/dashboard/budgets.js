import { api, metrics } from './api.js';
import { LIMIT_TYPES, SCOPE_FILTER, statusOf } from './budget-math.js';
import { escapeHtml, int, money, pct } from './format.js';
import { WINDOWS } from './time.js';

const SHOWN = 8;

export async function renderBudgets(el, { range, href }) {
  const { policies } = await api('GET', '/v1/policies');
  if (!policies.length) {
    el.innerHTML = `<div class="page-head"><h1>Budgets</h1></div>${noPolicies()}`;
    return;
  }
  const now = Date.now();
  // For each limit: the scopes with the most usage in the policy's window, as the metric routes count it.
  const limits = policies.flatMap((p) =>
    LIMIT_TYPES.filter((l) => p[l.field] !== undefined).map((l) => ({ policy: p, ...l, limit: p[l.field] })),
  );
  const cache = new Map();
  const usageOf = (l) => {
    const col = SCOPE_FILTER[l.policy.scope];
    const span = l.policy.scope === 'run' ? range.spanMs : WINDOWS[l.policy.window];
    const key = `${col}|${span}|${l.names}`;
    if (!cache.has(key)) {
      const timestamp = { start: new Date(now - span).toISOString(), end: new Date(now).toISOString() };
      cache.set(
        key,
        metrics
          .breakdown({ name: l.names, groupBy: [col], aggregation: 'sum', filters: { timestamp }, limit: 1000 })
          .then((r) => ({ timestamp, groups: r.groups.filter((g) => g.dimensions[col] !== null) })),
      );
    }
    return cache.get(key);
  };
  const usage = await Promise.all(limits.map(usageOf));

  el.innerHTML = `
    <div class="page-head"><h1>Budgets</h1><span class="muted">stored policies, applied to every guard check of the project; usage is committed steps in each policy's window (the scope page adds open reservations)</span></div>
    <div class="budget-grid">${limits.map((l, i) => policyCard(l, usage[i], href, range)).join('')}</div>`;
}

function policyCard(l, { groups, timestamp }, href, range) {
  const { policy, type, limit, label } = l;
  const col = SCOPE_FILTER[policy.scope];
  const value = (g) => l.pick(g) ?? 0;
  const unitOf = (g) => g.costUnit ?? 'USD';
  const fmt = (v, g) => (type === 'cost' ? money(v, g ? unitOf(g) : 'USD') : int(v));
  const sorted = [...groups].sort((a, b) => value(b) - value(a));
  const top = sorted.slice(0, SHOWN);
  const over = groups.filter((g) => statusOf(value(g), limit, policy.warnAtPercent) === 'hard').length;
  const soft = groups.filter((g) => statusOf(value(g), limit, policy.warnAtPercent) === 'soft').length;
  const windowText = policy.scope === 'run' ? `per run (runs in the ${range.label})` : `rolling ${policy.window}`;
  const rows = top
    .map((g) => {
      const id = g.dimensions[col];
      const used = value(g);
      const status = statusOf(used, limit, policy.warnAtPercent);
      const ratio = used / limit;
      return `<tr data-testid="policy-usage" data-scope-id="${escapeHtml(id)}" data-used="${used}">
        <td class="name"><a href="${href(`scope/${policy.scope}/${encodeURIComponent(id)}`)}">${escapeHtml(id)}</a>
          <div class="meter"><div class="fill ${status === 'ok' ? '' : status}" style="width:${Math.min(ratio * 100, 100).toFixed(2)}%"></div>${policy.warnAtPercent !== undefined ? `<div class="mark" style="left:${policy.warnAtPercent}%"></div>` : ''}</div></td>
        <td class="num used">${escapeHtml(fmt(used, g))}</td>
        <td class="num muted">${pct(ratio)}</td>
      </tr>`;
    })
    .join('');
  return `<section class="panel budget" data-testid="policy" data-policy="${escapeHtml(policy.name)}" data-limit-type="${type}" data-start="${timestamp.start}" data-end="${timestamp.end}">
    <header><h3>${escapeHtml(policy.name)}</h3><span>${over ? `<span class="badge hard">${int(over)} at limit</span> ` : ''}${soft ? `<span class="badge soft">${int(soft)} past soft</span>` : ''}${!over && !soft ? '<span class="badge ok">all within budget</span>' : ''}</span></header>
    <div class="figures"><span><span class="big" data-testid="policy-limit">${escapeHtml(fmt(limit))}</span> <span class="muted">${escapeHtml(label)} per ${escapeHtml(policy.scope)}</span></span></div>
    <div class="facts"><span class="badge">${escapeHtml(windowText)}</span><span class="badge">${policy.strategy === 'block' ? 'blocks' : 'warns only'}</span>${policy.warnAtPercent !== undefined ? `<span class="badge soft">soft at ${policy.warnAtPercent}%</span>` : ''}${policy.entityName ? `<span class="badge">agent ${escapeHtml(policy.entityName)}</span>` : ''}</div>
    <table style="margin-top:.8rem"><thead><tr><th>${escapeHtml(policy.scope)}</th><th class="num">Used</th><th class="num">of limit</th></tr></thead>
    <tbody>${rows || `<tr><td colspan="3" class="empty-row">No ${escapeHtml(policy.scope)} has usage in this window yet.</td></tr>`}</tbody></table>
    ${groups.length > SHOWN ? `<p class="muted small">${int(groups.length - SHOWN)} more ${escapeHtml(policy.scope)}s with less usage.</p>` : ''}
  </section>`;
}

function noPolicies() {
  return `<section class="panel empty" data-testid="no-policies"><h2>No budgets yet</h2>
    <p>A policy caps the cost or tokens of every resource, thread, user, organization, session or run over a rolling window, and the guard enforces it before each LLM step. Create one with a key that has the <code>admin</code> scope:</p>
    <pre>curl -X PUT ${escapeHtml(location.origin)}/v1/policies/per-customer-weekly \\
  -H "authorization: Bearer $TOLLGATE_ADMIN_KEY" -H "content-type: application/json" \\
  -d '{"scope":"resource","window":"7d","maxCost":25,"warnAtPercent":80}'</pre>
    <p>Budgets can also be passed per request in <code>POST /v1/guard/check</code> (<code>limits</code>) or by the SDK's processors.</p></section>`;
}
