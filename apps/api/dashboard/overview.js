import { discovery, metrics, STEPS, TOKENS } from './api.js';
import { colors, lineChart } from './charts.js';
import { change, compact, escapeHtml, int, money, timeZone, unpriced } from './format.js';
import { buckets, onBuckets } from './time.js';
import { topTable } from './top-table.js';

// Every group, so that sorting by cost (the default) or by tokens picks the real top rows.
const GROUPS = 1000;

export async function renderOverview(el, { range, href }) {
  const timestamp = { start: range.start.toISOString(), end: range.end.toISOString() };
  const prevStart = new Date(range.start.getTime() - range.spanMs);
  const filters = { timestamp };
  const top = (groupBy) => metrics.breakdown({ name: TOKENS, groupBy, aggregation: 'sum', filters, limit: GROUPS });
  const [totals, steps, series, prevSeries, models, resources, agents, types] = await Promise.all([
    metrics.aggregate({ name: TOKENS, aggregation: 'sum', filters, comparePeriod: 'previous_period' }),
    metrics.aggregate({ name: STEPS, aggregation: 'count', filters, comparePeriod: 'previous_period' }),
    metrics.timeseries({ name: TOKENS, interval: range.interval, aggregation: 'sum', filters }),
    metrics.timeseries({
      name: TOKENS,
      interval: range.interval,
      aggregation: 'sum',
      filters: { timestamp: { start: prevStart.toISOString(), end: timestamp.start } },
    }),
    top(['provider', 'model']),
    top(['resourceId']),
    top(['entityName']),
    discovery('entity-types'),
  ]);

  if (!types.entityTypes.length) {
    el.innerHTML = firstEventHelp();
    return;
  }

  const unit = totals.costUnit;
  const costDelta = change(totals.costChangePercent);
  const tokenDelta = change(totals.changePercent);
  const stepDelta = change(steps.changePercent);
  const tables = [
    topTable('models', 'Top models', models.groups, {
      name: (d) => `${d.provider ?? '—'} / ${d.model ?? '—'}`,
      link: (d) =>
        d.model && href('steps', undefined, { model: d.model, ...(d.provider ? { provider: d.provider } : {}) }),
      fallbackUnit: unit,
    }),
    topTable('resources', 'Top resources', resources.groups, {
      name: (d) => d.resourceId ?? '(no resource)',
      link: (d) => d.resourceId && href(`scope/resource/${encodeURIComponent(d.resourceId)}`),
      fallbackUnit: unit,
    }),
    topTable('agents', 'Top agents', agents.groups, {
      name: (d) => d.entityName ?? '(unnamed)',
      link: (d) => d.entityName && href('steps', undefined, { entityName: d.entityName }),
      fallbackUnit: unit,
    }),
  ];
  el.innerHTML = `
    <div class="page-head"><h1>Overview</h1><span class="muted">${escapeHtml(range.label)} · times in ${escapeHtml(timeZone())}</span></div>
    ${steps.value === 0 ? `<section class="panel empty" data-testid="empty-window"><h2>No steps in this window</h2><p>Your agents have sent events before, just not in the ${escapeHtml(range.label)}. Pick a longer window above.</p></section>` : ''}
    <div class="kpis">
      ${kpi('cost', 'Cost', money(totals.estimatedCost ?? 0, unit ?? 'USD'), totals.estimatedCost, costDelta, `previous ${money(totals.previousEstimatedCost ?? 0, unit ?? 'USD')}`, unpriced(totals, 'kpi-cost-unpriced'))}
      ${kpi('tokens', 'Tokens', int(totals.value ?? 0), totals.value ?? 0, tokenDelta, `previous ${int(totals.previousValue ?? 0)}`)}
      ${kpi('steps', 'LLM steps', int(steps.value ?? 0), steps.value ?? 0, stepDelta, `previous ${int(steps.previousValue ?? 0)}`)}
      ${kpi('cost-per-step', 'Cost per step', steps.value ? money((totals.estimatedCost ?? 0) / steps.value, unit ?? 'USD') : '—', null, null, 'average over the window')}
    </div>
    <div class="grid cols-2">
      <section class="panel"><header><h2>Cost</h2><span class="muted small">per ${escapeHtml(range.bucketLabel)}, dashed: previous period</span></header><div class="chart" id="chart-cost"></div></section>
      <section class="panel"><header><h2>Tokens</h2><span class="muted small">per ${escapeHtml(range.bucketLabel)}, dashed: previous period</span></header><div class="chart" id="chart-tokens"></div></section>
    </div>
    <div class="grid cols-3">${tables.map((t) => t.html).join('')}</div>`;
  for (const t of tables) t.mount(el);

  const bs = buckets(range.start, range.end, range.bucketMs);
  const xs = bs.map((t) => t / 1000);
  const cur = series.series[0]?.points ?? [];
  const prev = prevSeries.series[0]?.points ?? [];
  return () => {
    const fmtCost = (v) => money(v, unit ?? 'USD');
    lineChart(el.querySelector('#chart-cost'), {
      xs,
      format: fmtCost,
      series: [
        {
          label: 'This period',
          values: onBuckets(cur, bs, range.bucketMs, (p) => p.estimatedCost),
          fill: colors.fill(),
        },
        {
          label: 'Previous period',
          values: onBuckets(prev, bs, range.bucketMs, (p) => p.estimatedCost, range.spanMs),
          color: colors.prev(),
          dash: [5, 4],
        },
      ],
    });
    lineChart(el.querySelector('#chart-tokens'), {
      xs,
      format: (v, axis) => (axis ? compact(v) : int(v)),
      series: [
        { label: 'This period', values: onBuckets(cur, bs, range.bucketMs, (p) => p.value), fill: colors.fill() },
        {
          label: 'Previous period',
          values: onBuckets(prev, bs, range.bucketMs, (p) => p.value, range.spanMs),
          color: colors.prev(),
          dash: [5, 4],
        },
      ],
    });
  };
}

function kpi(id, label, text, raw, delta, note, extra = '') {
  const dir = delta && delta.startsWith('+') ? 'up' : delta && /^[-−]/.test(delta) ? 'down' : '';
  return `<div class="kpi" data-testid="kpi-${id}">
    <div class="label">${label}</div>
    <div class="value" data-testid="kpi-${id}-value" data-value="${raw ?? ''}">${escapeHtml(text)}</div>
    <div class="delta">${delta ? `<span class="${dir}" data-testid="kpi-${id}-change">${escapeHtml(delta)}</span> vs previous period · ` : ''}${escapeHtml(note)}</div>
    ${extra}
  </div>`;
}

/** What a project with no events at all sees: how to send the first one. */
export function firstEventHelp() {
  const origin = location.origin;
  const now = new Date().toISOString();
  return `<section class="panel empty" data-testid="empty-project">
    <h2>No events yet</h2>
    <p>Tollgate shows what your agents spend once they report their LLM steps. Send a first event with a key that has the <code>ingest</code> scope:</p>
    <pre>curl -X POST ${escapeHtml(origin)}/v1/events \\
  -H "authorization: Bearer $TOLLGATE_INGEST_KEY" \\
  -H "content-type: application/json" \\
  -d '{"events":[{"eventId":"first-step-1","occurredAt":"${now}","traceId":"run-1",
       "resourceId":"customer-42","entityType":"agent","entityName":"support-agent",
       "provider":"openai","model":"gpt-4o","usage":{"inputTokens":812,"outputTokens":64}}]}'</pre>
    <p>or from TypeScript, with the SDK:</p>
    <pre>import { TollgateClient } from '@tollgate/sdk';
const tollgate = new TollgateClient({ baseUrl: '${escapeHtml(origin)}', apiKey: process.env.TOLLGATE_INGEST_KEY });
tollgate.events.record({ traceId, resourceId, entityType: 'agent', entityName: 'support-agent',
  provider: 'openai', model: 'gpt-4o', usage: { inputTokens: 812, outputTokens: 64 } });</pre>
    <p>Then reload this page.</p>
  </section>`;
}
