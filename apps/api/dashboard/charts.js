// Line charts drawn by uPlot (loaded as a classic script: window.uPlot). Times are seconds; uPlot
// labels them in the viewer's time zone.
const uPlot = window.uPlot;
const css = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();

/**
 * A chart in `el`: `xs` in epoch seconds, `series` [{ label, values, color?, dash?, fill? }],
 * `thresholds` [{ label, value, color }] drawn as flat lines across the chart.
 */
export function lineChart(
  el,
  { xs, series, thresholds = [], format = String, height = 240, points = false, spanGaps = false },
) {
  el.replaceChildren();
  const data = [xs, ...series.map((s) => s.values), ...thresholds.map((t) => xs.map(() => t.value))];
  const opts = {
    width: Math.max(el.clientWidth, 280),
    height,
    legend: { show: true },
    cursor: { points: { size: 6 } },
    scales: {
      x: { time: true },
      y: { range: (u, min, max) => [0, Math.max(max, ...thresholds.map((t) => t.value)) * 1.08 || 1] },
    },
    axes: [
      { stroke: css('--muted'), grid: { stroke: css('--line'), width: 1 }, ticks: { show: false } },
      {
        stroke: css('--muted'),
        grid: { stroke: css('--line'), width: 1 },
        ticks: { show: false },
        size: 64,
        values: (u, vals) => vals.map((v) => format(v, true)),
      },
    ],
    series: [
      {},
      ...series.map((s) => ({
        label: s.label,
        stroke: s.color ?? css('--accent'),
        width: s.width ?? 2,
        dash: s.dash,
        fill: s.fill ? s.fill : undefined,
        points: { show: s.points ?? points, size: s.points ? 8 : 5 },
        spanGaps,
        value: (u, v) => (v === null || v === undefined ? '—' : format(v)),
      })),
      ...thresholds.map((t) => ({
        label: t.label,
        stroke: t.color,
        width: 1.5,
        dash: [6, 4],
        points: { show: false },
        value: () => format(t.value),
      })),
    ],
  };
  const chart = new uPlot(opts, data, el);
  // What is drawn, for tests and the curious: the number of buckets and each series' total.
  el.dataset.points = String(xs.length);
  el.dataset.sums = JSON.stringify(series.map((s) => s.values.reduce((a, v) => a + (v ?? 0), 0)));
  const ro = new ResizeObserver(() => chart.setSize({ width: Math.max(el.clientWidth, 280), height }));
  ro.observe(el);
  return chart;
}

export const colors = {
  accent: () => css('--accent'),
  prev: () => css('--prev'),
  warn: () => css('--warn'),
  deny: () => css('--deny'),
  fill: () => 'rgba(31, 95, 191, 0.08)',
};
