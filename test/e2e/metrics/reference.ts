/**
 * A reference implementation of Mastra's metric queries, computed in memory from the raw event
 * rows of the log — deliberately naive and independent of libs/metrics, so the service's rollups,
 * edges and tail handling are checked against first principles.
 */
export interface RefRecord {
  name: string;
  value: number;
  costMicros: bigint | null;
  at: number;
  position: bigint;
  row: Record<string, any>;
}

const COLS: Record<string, string> = {
  entityType: 'entity_type',
  entityName: 'entity_name',
  provider: 'provider',
  model: 'model',
  costUnit: 'cost_unit',
  environment: 'environment',
  serviceName: 'service_name',
  resourceId: 'resource_id',
  threadId: 'thread_id',
  userId: 'user_id',
  organizationId: 'organization_id',
  sessionId: 'session_id',
  traceId: 'trace_id',
  runId: 'run_id',
  spanId: 'span_id',
};

export function recordsOf(rows: Record<string, any>[]): RefRecord[] {
  const out: RefRecord[] = [];
  for (const row of rows) {
    if (row.type !== 'StepUsageRecorded') continue;
    const num = (c: string) => Number(row[c]);
    const push = (name: string, value: number, cost: unknown = null) =>
      out.push({
        name,
        value,
        costMicros: cost === null || cost === undefined ? null : BigInt(cost as any),
        at: new Date(row.occurred_at).getTime(),
        position: BigInt(row.position),
        row,
      });
    push('mastra_model_total_input_tokens', num('input_tokens'), row.input_cost_micros);
    push('mastra_model_total_output_tokens', num('output_tokens'), row.output_cost_micros);
    const parts: [string, number][] = [
      [
        'mastra_model_input_text_tokens',
        Math.max(
          0,
          num('input_tokens') -
            num('cache_read_tokens') -
            num('cache_write_tokens') -
            num('audio_input_tokens') -
            num('image_input_tokens'),
        ),
      ],
      ['mastra_model_input_cache_read_tokens', num('cache_read_tokens')],
      ['mastra_model_input_cache_write_tokens', num('cache_write_tokens')],
      ['mastra_model_input_audio_tokens', num('audio_input_tokens')],
      ['mastra_model_input_image_tokens', num('image_input_tokens')],
      ['mastra_model_output_text_tokens', Math.max(0, num('output_tokens') - num('reasoning_tokens'))],
      ['mastra_model_output_reasoning_tokens', num('reasoning_tokens')],
    ];
    for (const [name, v] of parts) if (v > 0) push(name, v);
    if (row.duration_ms !== null) push('mastra_model_duration_ms', Number(row.duration_ms));
  }
  return out;
}

export function fieldOf(r: RefRecord, field: string): string | null {
  if (field === 'name') return r.name;
  const col = COLS[field];
  if (col) return r.row[col] ?? null;
  if (['parentEntityType', 'parentEntityName', 'rootEntityType', 'rootEntityName', 'executionSource'].includes(field))
    return null;
  return r.row.labels?.[field] ?? null;
}

export function filterRecords(records: RefRecord[], names: string[], filters: any = {}): RefRecord[] {
  const ts = filters.timestamp ?? {};
  const start = ts.start ? Date.parse(ts.start) : null;
  const end = ts.end ? Date.parse(ts.end) : null;
  return records.filter((r) => {
    if (!names.includes(r.name)) return false;
    if (filters.name && !filters.name.includes(r.name)) return false;
    if (start !== null && (ts.startExclusive ? r.at <= start : r.at < start)) return false;
    if (end !== null && (ts.endExclusive ? r.at >= end : r.at > end)) return false;
    for (const f of Object.keys(COLS)) if (filters[f] !== undefined && fieldOf(r, f) !== filters[f]) return false;
    if (filters.requestId !== undefined) return false;
    if (filters.traceIds && !filters.traceIds.includes(r.row.trace_id)) return false;
    if (filters.tags && !filters.tags.every((t: string) => (r.row.tags ?? []).includes(t))) return false;
    if (filters.labels && !Object.entries(filters.labels).every(([k, v]) => r.row.labels?.[k] === v)) return false;
    return true;
  });
}

export function aggregateOf(records: RefRecord[], aggregation: string, distinctColumn?: string): number | null {
  if (aggregation === 'count') return records.length;
  if (aggregation === 'count_distinct')
    return new Set(records.map((r) => fieldOf(r, distinctColumn!)).filter((v) => v !== null)).size;
  if (records.length === 0) return null;
  const values = records.map((r) => r.value);
  switch (aggregation) {
    case 'sum':
      return values.reduce((a, b) => a + b, 0);
    case 'avg':
      return values.reduce((a, b) => a + b, 0) / values.length;
    case 'min':
      return Math.min(...values);
    case 'max':
      return Math.max(...values);
    case 'last': {
      const ids = [
        'mastra_model_total_input_tokens',
        'mastra_model_total_output_tokens',
        'mastra_model_input_text_tokens',
        'mastra_model_input_cache_read_tokens',
        'mastra_model_input_cache_write_tokens',
        'mastra_model_input_audio_tokens',
        'mastra_model_input_image_tokens',
        'mastra_model_output_text_tokens',
        'mastra_model_output_reasoning_tokens',
        'mastra_model_output_audio_tokens',
        'mastra_model_output_image_tokens',
        'mastra_model_duration_ms',
      ];
      const sorted = [...records].sort(
        (a, b) =>
          b.at - a.at ||
          (b.position > a.position ? 1 : b.position < a.position ? -1 : 0) ||
          ids.indexOf(b.name) - ids.indexOf(a.name),
      );
      return sorted[0].value;
    }
  }
  throw new Error(aggregation);
}

export function costOf(records: RefRecord[]): { estimatedCost: number | null; costUnit: string | null } {
  const costed = records.filter((r) => r.costMicros !== null);
  if (!costed.length) return { estimatedCost: null, costUnit: null };
  const micros = costed.reduce((a, r) => a + r.costMicros!, 0n);
  const units = new Set(costed.map((r) => r.row.cost_unit));
  return { estimatedCost: Number(micros) / 1e6, costUnit: units.size === 1 ? [...units][0] : null };
}

/** Steps with no price behind the records (each counted once), and the token values of their records. */
export function unpricedOf(records: RefRecord[]): { unpricedSteps: number; unpricedTokens: number } {
  const unpriced = records.filter((r) => r.row.unpriced === true);
  return {
    unpricedSteps: new Set(unpriced.map((r) => r.position)).size,
    unpricedTokens: unpriced.filter((r) => r.name.endsWith('_tokens')).reduce((a, r) => a + r.value, 0),
  };
}

const change = (now: number | null, before: number | null) =>
  before === null || before === 0 || now === null ? null : ((now - before) / Math.abs(before)) * 100;

export function refAggregate(all: RefRecord[], args: any) {
  const recs = filterRecords(all, args.name, args.filters);
  const out: any = {
    value: aggregateOf(recs, args.aggregation, args.distinctColumn),
    ...costOf(recs),
    ...unpricedOf(recs),
  };
  const ts = args.filters?.timestamp;
  if (args.comparePeriod && ts?.start && ts?.end) {
    const s = Date.parse(ts.start);
    const e = Date.parse(ts.end);
    const shift =
      args.comparePeriod === 'previous_day' ? 86_400_000 : args.comparePeriod === 'previous_week' ? 604_800_000 : e - s;
    const prev = filterRecords(all, args.name, {
      ...args.filters,
      timestamp: { ...ts, start: new Date(s - shift).toISOString(), end: new Date(e - shift).toISOString() },
    });
    const pc = costOf(prev);
    out.previousValue = aggregateOf(prev, args.aggregation, args.distinctColumn);
    out.previousEstimatedCost = pc.estimatedCost;
    out.changePercent = change(out.value, out.previousValue);
    out.costChangePercent = change(out.estimatedCost, out.previousEstimatedCost);
  }
  return out;
}

const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

function groupsOf(recs: RefRecord[], fields: string[]) {
  const groups = new Map<string, { values: (string | null)[]; records: RefRecord[] }>();
  for (const r of recs) {
    const values = fields.map((f) => fieldOf(r, f));
    const key = JSON.stringify(values);
    if (!groups.has(key)) groups.set(key, { values, records: [] });
    groups.get(key)!.records.push(r);
  }
  return [...groups.values()];
}

export function refBreakdown(all: RefRecord[], args: any) {
  const recs = filterRecords(all, args.name, args.filters);
  const dir = args.orderDirection === 'ASC' ? 1 : -1;
  const groups = groupsOf(recs, args.groupBy)
    .map((g) => ({
      dimensions: Object.fromEntries(args.groupBy.map((f: string, i: number) => [f, g.values[i]])),
      value: aggregateOf(g.records, args.aggregation, args.distinctColumn) ?? 0,
      ...costOf(g.records),
      ...unpricedOf(g.records),
    }))
    .sort((a, b) => (a.value - b.value) * dir || cmp(JSON.stringify(a.dimensions), JSON.stringify(b.dimensions)));
  return { groups: args.limit ? groups.slice(0, args.limit) : groups };
}

const INTERVAL: Record<string, number> = {
  '1m': 60_000,
  '5m': 300_000,
  '15m': 900_000,
  '1h': 3_600_000,
  '1d': 86_400_000,
};

function pointsOf(recs: RefRecord[], interval: string, toPoint: (ts: number, rs: RefRecord[]) => any) {
  const size = INTERVAL[interval];
  const buckets = new Map<number, RefRecord[]>();
  for (const r of recs) {
    const b = Math.floor(r.at / size) * size;
    if (!buckets.has(b)) buckets.set(b, []);
    buckets.get(b)!.push(r);
  }
  return [...buckets.entries()].sort(([a], [b]) => a - b).map(([ts, rs]) => toPoint(ts, rs));
}

export function refTimeSeries(all: RefRecord[], args: any) {
  const recs = filterRecords(all, args.name, args.filters);
  const point = (ts: number, rs: RefRecord[]) => ({
    timestamp: new Date(ts).toISOString(),
    value: aggregateOf(rs, args.aggregation, args.distinctColumn) ?? 0,
    estimatedCost: costOf(rs).estimatedCost,
    ...unpricedOf(rs),
  });
  if (!args.groupBy)
    return {
      series: [
        { name: args.name.join(','), costUnit: costOf(recs).costUnit, points: pointsOf(recs, args.interval, point) },
      ],
    };
  return {
    series: groupsOf(recs, args.groupBy)
      .map((g) => ({
        name: g.values.map((v) => v ?? '').join('|'),
        costUnit: costOf(g.records).costUnit,
        points: pointsOf(g.records, args.interval, point),
      }))
      .sort((a, b) => cmp(a.name, b.name)),
  };
}

export function refPercentiles(all: RefRecord[], args: any) {
  const recs = filterRecords(all, [args.name], args.filters);
  return {
    series: args.percentiles.map((p: number) => ({
      percentile: p,
      points: pointsOf(recs, args.interval, (ts, rs) => {
        const sorted = rs.map((r) => r.value).sort((a, b) => a - b);
        return {
          timestamp: new Date(ts).toISOString(),
          value: sorted[Math.min(Math.floor(p * sorted.length), sorted.length - 1)],
        };
      }),
    })),
  };
}

/** Deep equality that allows float rounding (durations are summed as exact decimals by the service). */
export function expectClose(actual: unknown, expected: unknown, path = '$'): void {
  if (typeof expected === 'number' && typeof actual === 'number') {
    const ok = actual === expected || Math.abs(actual - expected) <= 1e-9 * Math.max(1, Math.abs(expected));
    if (!ok) throw new Error(`${path}: expected ${expected}, got ${actual}`);
    return;
  }
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual) || actual.length !== expected.length)
      throw new Error(
        `${path}: expected ${JSON.stringify(expected).slice(0, 400)}, got ${JSON.stringify(actual).slice(0, 400)}`,
      );
    expected.forEach((e, i) => expectClose(actual[i], e, `${path}[${i}]`));
    return;
  }
  if (expected && typeof expected === 'object') {
    if (!actual || typeof actual !== 'object')
      throw new Error(`${path}: expected an object, got ${JSON.stringify(actual)}`);
    const keys = new Set([...Object.keys(expected), ...Object.keys(actual as object)].filter((k) => k !== 'lag'));
    for (const k of keys) expectClose((actual as any)[k], (expected as any)[k], `${path}.${k}`);
    return;
  }
  if (actual !== expected)
    throw new Error(`${path}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`);
}
