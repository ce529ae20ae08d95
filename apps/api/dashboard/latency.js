// Latency: each model's durationMs p50 and p95 over the window, and per time bucket.
import { percentiles, steps as stepsApi } from './api.js';
import { lineChart } from './charts.js';
import { escapeHtml, int, ms, timeZone } from './format.js';
import { buckets, INTERVAL_MS } from './time.js';

const CHARTED = 4;
const PALETTE = ['#1f5fbf', '#b7791f', '#2f855a', '#8e44ad'];

/** The percentile buckets for a span: the smallest metric interval with at most ~100 of them (percentiles do not add up, so they are never merged). */
export function latencyInterval(spanMs) {
  return Object.entries(INTERVAL_MS).find(([, i]) => spanMs / i <= 100)?.[0] ?? '1d';
}

export async function renderLatency(el, { range, href }) {
  const timestamp = { start: range.start.toISOString(), end: range.end.toISOString() };
  const { models } = await stepsApi.latency({ from: timestamp.start, to: timestamp.end, limit: 50 });
  const interval = latencyInterval(range.spanMs);
  const charted = models.slice(0, CHARTED);
  const series = await Promise.all(
    charted.map((m) =>
      percentiles({
        name: 'mastra_model_duration_ms',
        percentiles: [0.5, 0.95],
        interval,
        filters: { timestamp, ...(m.provider ? { provider: m.provider } : {}), ...(m.model ? { model: m.model } : {}) },
      }),
    ),
  );
  const name = (m) => `${m.provider ?? '—'} / ${m.model ?? '—'}`;
  el.innerHTML = `
    <div class="page-head"><h1>Latency</h1><span class="muted">durationMs the steps reported · ${escapeHtml(range.label)} · times in ${escapeHtml(timeZone())}</span></div>
    <section class="panel" data-testid="latency"><header><h2>Per model, over the window</h2><span class="muted small">slowest p95 first · pN is the sample at rank ⌊N% × count⌋, as the metric routes' percentiles</span></header>
    ${
      models.length
        ? `<table><thead><tr><th>Model</th><th class="num">Steps</th><th class="num">p50</th><th class="num">p95</th><th class="num">Max</th></tr></thead><tbody>${models
            .map(
              (m) => `<tr data-testid="latency-row" data-key="${escapeHtml(name(m))}">
          <td class="name wrap"><a href="${href('steps', undefined, { model: m.model, provider: m.provider })}">${escapeHtml(name(m))}</a></td>
          <td class="num" data-testid="latency-steps">${int(m.steps)}</td>
          <td class="num" data-testid="latency-p50">${ms(m.p50)}</td>
          <td class="num" data-testid="latency-p95">${ms(m.p95)}</td>
          <td class="num" data-testid="latency-max">${ms(m.max)}</td></tr>`,
            )
            .join('')}</tbody></table>`
        : `<p class="empty-row" data-testid="no-latency">No step in the ${escapeHtml(range.label)} reported a duration (durationMs).</p>`
    }</section>
    ${charted.map((m, i) => `<section class="panel"><header><h2>${escapeHtml(name(m))}</h2><span class="muted small">p50 and p95 per ${escapeHtml(interval)} bucket</span></header><div class="chart" id="chart-latency-${i}" data-testid="latency-chart"></div></section>`).join('')}`;

  return () => {
    // One time axis for every model: the window's buckets, empty where a model had no step.
    const bs = buckets(range.start, range.end, INTERVAL_MS[interval]);
    const onAxis = (points) => {
      const byTs = new Map(points.map((p) => [Date.parse(p.timestamp), p.value]));
      return bs.map((t) => byTs.get(t) ?? null);
    };
    charted.forEach((m, i) => {
      const [p50, p95] = series[i].series;
      lineChart(el.querySelector(`#chart-latency-${i}`), {
        xs: bs.map((t) => t / 1000),
        format: (v) => ms(v),
        height: 200,
        points: true,
        spanGaps: true,
        series: [
          { label: 'p50', values: onAxis(p50.points), color: PALETTE[i % PALETTE.length] },
          { label: 'p95', values: onAxis(p95.points), color: PALETTE[i % PALETTE.length], dash: [5, 4] },
        ],
      });
    });
  };
}
