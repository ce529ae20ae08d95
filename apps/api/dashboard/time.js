// Time ranges and buckets, as the metric routes count them.
const HOUR = 3_600_000;
const DAY = 24 * HOUR;
export const WINDOWS = { '1h': HOUR, '6h': 6 * HOUR, '24h': DAY, '7d': 7 * DAY, '30d': 30 * DAY, '365d': 365 * DAY };
export const INTERVAL_MS = { '1m': 60_000, '5m': 300_000, '15m': 900_000, '1h': HOUR, '1d': DAY };

/** The metric interval that gives a chart some tens to a few hundred points over a span. */
export function intervalFor(spanMs) {
  if (spanMs <= 2 * HOUR) return '1m';
  if (spanMs <= 12 * HOUR) return '5m';
  if (spanMs <= 2 * DAY) return '15m';
  if (spanMs <= 10 * DAY) return '1h';
  return '1d';
}

/** The selected time range, from the hash query: `w=7d`, or `from`/`to` (ISO) for a custom range. */
export function rangeOf(query, now = Date.now()) {
  const from = Date.parse(query.get('from') ?? '');
  const to = Date.parse(query.get('to') ?? '');
  if (Number.isFinite(from) && Number.isFinite(to) && to > from) {
    return { key: 'custom', start: new Date(from), end: new Date(to), spanMs: to - from, interval: intervalFor(to - from), label: 'custom range' };
  }
  const key = WINDOWS[query.get('w')] ? query.get('w') : '24h';
  return { key, start: new Date(now - WINDOWS[key]), end: new Date(now), spanMs: WINDOWS[key], interval: intervalFor(WINDOWS[key]), label: `last ${key}` };
}

/** Bucket starts (epoch ms) covering [start, end], aligned as the metric routes align them (UTC). */
export function buckets(start, end, interval) {
  const step = INTERVAL_MS[interval];
  const out = [];
  for (let t = Math.floor(start.getTime() / step) * step; t <= end.getTime(); t += step) out.push(t);
  return out;
}

/** A series' points summed onto the buckets (0 where the route returned none); `shiftMs` moves a previous period onto this one. */
export function onBuckets(points, bucketStarts, interval, pick, shiftMs = 0) {
  const step = INTERVAL_MS[interval];
  const sums = new Map();
  for (const p of points) {
    const t = Math.floor((Date.parse(p.timestamp) + shiftMs) / step) * step;
    sums.set(t, (sums.get(t) ?? 0) + (pick(p) ?? 0));
  }
  return bucketStarts.map((t) => sums.get(t) ?? 0);
}
