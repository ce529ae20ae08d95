// Time ranges and buckets, as the metric routes count them.
const HOUR = 3_600_000;
const DAY = 24 * HOUR;
export const WINDOWS = { '1h': HOUR, '6h': 6 * HOUR, '24h': DAY, '7d': 7 * DAY, '30d': 30 * DAY, '365d': 365 * DAY };
export const INTERVAL_MS = { '1m': 60_000, '5m': 300_000, '15m': 900_000, '1h': HOUR, '1d': DAY };

const MIN = 60_000;
// Chart buckets a window may use; each is a multiple of a metric interval, and of the one before it.
const BUCKETS = [
  [MIN, '1 min'],
  [2 * MIN, '2 min'],
  [5 * MIN, '5 min'],
  [10 * MIN, '10 min'],
  [15 * MIN, '15 min'],
  [30 * MIN, '30 min'],
  [HOUR, '1 h'],
  [2 * HOUR, '2 h'],
  [3 * HOUR, '3 h'],
  [6 * HOUR, '6 h'],
  [12 * HOUR, '12 h'],
  [DAY, '1 day'],
  [7 * DAY, '7 days'],
];
const TARGET_POINTS = 48;

/**
 * The chart bucket for a span: the smallest that gives at most ~48 points (the 7d chart was 168
 * hourly spikes; it is 28 six-hour buckets now), and the largest metric interval that divides it
 * (the routes' buckets, summed onto the chart's: sums add up exactly).
 */
export function chartBuckets(spanMs) {
  const [bucketMs, label] = BUCKETS.find(([b]) => spanMs / b <= TARGET_POINTS) ?? BUCKETS[BUCKETS.length - 1];
  const interval = Object.entries(INTERVAL_MS)
    .filter(([, i]) => bucketMs % i === 0)
    .sort((a, b) => b[1] - a[1])[0][0];
  return { bucketMs, interval, label };
}

/** The metric interval to fetch a span's chart with. */
export const intervalFor = (spanMs) => chartBuckets(spanMs).interval;

/** The selected time range, from the hash query: `w=7d`, or `from`/`to` (ISO) for a custom range. */
export function rangeOf(query, now = Date.now()) {
  const from = Date.parse(query.get('from') ?? '');
  const to = Date.parse(query.get('to') ?? '');
  if (Number.isFinite(from) && Number.isFinite(to) && to > from) {
    const b = chartBuckets(to - from);
    return {
      key: 'custom',
      start: new Date(from),
      end: new Date(to),
      spanMs: to - from,
      interval: b.interval,
      bucketMs: b.bucketMs,
      bucketLabel: b.label,
      label: 'custom range',
    };
  }
  const key = WINDOWS[query.get('w')] ? query.get('w') : '24h';
  const b = chartBuckets(WINDOWS[key]);
  return {
    key,
    start: new Date(now - WINDOWS[key]),
    end: new Date(now),
    spanMs: WINDOWS[key],
    interval: b.interval,
    bucketMs: b.bucketMs,
    bucketLabel: b.label,
    label: `last ${key}`,
  };
}

/** Bucket starts (epoch ms) covering [start, end], aligned as the metric routes align them (UTC). */
export function buckets(start, end, bucketMs) {
  const out = [];
  for (let t = Math.floor(start.getTime() / bucketMs) * bucketMs; t <= end.getTime(); t += bucketMs) out.push(t);
  return out;
}

/** A series' points summed onto the buckets (0 where the route returned none); `shiftMs` moves a previous period onto this one. */
export function onBuckets(points, bucketStarts, bucketMs, pick, shiftMs = 0) {
  const sums = new Map();
  for (const p of points) {
    const t = Math.floor((Date.parse(p.timestamp) + shiftMs) / bucketMs) * bucketMs;
    sums.set(t, (sums.get(t) ?? 0) + (pick(p) ?? 0));
  }
  return bucketStarts.map((t) => sums.get(t) ?? 0);
}
