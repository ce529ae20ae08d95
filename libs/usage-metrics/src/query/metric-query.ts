import { dimensionOf } from '../dimensions';
import { GRANULARITY_MS, type Granularity } from '../granularity';
import type { MetricsFilter } from '../mastra-contract';
import { METRIC_BY_NAME } from '../metric-names';
import type { Range } from './time-cover';

/** A field to group by or count distinct values of, and where its values live. */
export interface FieldRef {
  field: string;
  location: 'low' | 'scope' | 'raw' | 'name' | 'label' | 'none';
  /** events / metric_dimensions column, when location is low, scope or raw. */
  column?: string;
}

/** A metric query reduced to what the SQL needs (pure data; built from any of the routes). */
export interface MetricQuery {
  projectId: string;
  metricIds: number[];
  range: Range;
  /** Equality filters on dimension columns. */
  equals: { ref: FieldRef; value: string }[];
  traceIds?: string[];
  tags?: string[];
  labels?: Record<string, string>;
  /** A filter that no step event can match (requestId). */
  matchesNothing: boolean;
  groups: FieldRef[];
  distinct?: FieldRef;
  /** Time bucket of series points, ms. */
  bucketMs?: number;
  /** Needs each record's time and position (aggregation `last`). */
  last: boolean;
}

/** Mastra's distinct columns that step events do not carry: always null, so 0 distinct values. */
const ABSENT_FIELDS = new Set([
  'parentEntityType',
  'parentEntityName',
  'rootEntityType',
  'rootEntityName',
  'executionSource',
]);

export function fieldRef(field: string): FieldRef {
  if (ABSENT_FIELDS.has(field)) return { field, location: 'none' };
  return { field, ...dimensionOf(field) };
}

/** [from, to) in ms from Mastra's inclusive-unless-flagged range (occurredAt has ms precision). */
export function rangeOf(ts: MetricsFilter['timestamp']): Range {
  if (!ts) return { from: null, to: null };
  const from = ts.start ? ts.start.getTime() + (ts.startExclusive ? 1 : 0) : null;
  const to = ts.end ? ts.end.getTime() + (ts.endExclusive ? 0 : 1) : null;
  return { from, to };
}

const EQUALITY_FIELDS = [
  'traceId',
  'spanId',
  'runId',
  'threadId',
  'resourceId',
  'userId',
  'organizationId',
  'sessionId',
  'entityType',
  'entityName',
  'provider',
  'model',
  'costUnit',
  'environment',
  'serviceName',
] as const;

export function buildQuery(
  projectId: string,
  names: readonly string[],
  filters: MetricsFilter | undefined,
  shape: { groups?: string[]; distinct?: string; bucketMs?: number; last?: boolean },
): MetricQuery {
  const f = filters ?? {};
  const requested = names.map((n) => METRIC_BY_NAME.get(n)!.id);
  const also = f.name ? new Set(f.name.map((n) => METRIC_BY_NAME.get(n)?.id)) : null;
  const ids = also ? requested.filter((id) => also.has(id)) : requested;
  return {
    projectId,
    // No metric left after filters.name: the query still runs (for its lag) over the requested ones, matching nothing.
    metricIds: [...new Set(ids.length ? ids : requested)],
    range: rangeOf(f.timestamp),
    equals: EQUALITY_FIELDS.filter((k) => f[k] !== undefined).map((k) => ({ ref: fieldRef(k), value: f[k]! })),
    traceIds: f.traceIds,
    tags: f.tags?.length ? f.tags : undefined,
    labels: f.labels && Object.keys(f.labels).length ? f.labels : undefined,
    matchesNothing: f.requestId !== undefined || ids.length === 0,
    groups: (shape.groups ?? []).map(fieldRef),
    distinct: shape.distinct ? fieldRef(shape.distinct) : undefined,
    bucketMs: shape.bucketMs,
    last: shape.last ?? false,
  };
}

// Every step produces both token totals (METRICS' `always`, and a step always has input and output token counts).
const TOTAL_IDS = ['mastra_model_total_input_tokens', 'mastra_model_total_output_tokens'].map(
  (n) => METRIC_BY_NAME.get(n)!.id,
);

/**
 * Whether rollups can count a group's unpriced steps: they count records, and a group's steps are
 * those of its records — the records of one metric, or of a token total (which every step has).
 */
function stepsCountable(q: MetricQuery): boolean {
  return (
    q.metricIds.length === 1 ||
    q.metricIds.some((id) => TOTAL_IDS.includes(id)) ||
    q.groups.some((g) => g.location === 'name')
  );
}

/**
 * Which rollup levels can answer the query: none when it filters or groups on something only the
 * raw log has (trace/run/span ids, labels, tags), needs per-record order (`last`) or cannot count
 * its unpriced steps from records (several metrics, none a token total, see stepsCountable); the hourly
 * scoped cube when it involves scope ids; else the project cube's day/hour/minute levels. Series
 * buckets must be whole multiples of the level (all of Mastra's intervals are).
 */
export type Cube = 'unit' | 'project' | 'scope';

export function rollupLevels(q: MetricQuery): { cube: Cube; levels: Granularity[] } {
  const refs = [...q.equals.map((e) => e.ref), ...q.groups, ...(q.distinct ? [q.distinct] : [])];
  const rawOnly =
    q.last ||
    q.traceIds !== undefined ||
    q.tags !== undefined ||
    q.labels !== undefined ||
    refs.some((r) => r.location === 'raw' || r.location === 'label') ||
    !stepsCountable(q);
  if (rawOnly) return { cube: 'project', levels: [] };
  const scoped = refs.some((r) => r.location === 'scope');
  // Only the metric name and the cost unit: the small cost-unit cube answers.
  const unitOnly = refs.every((r) => r.location === 'name' || r.location === 'none' || r.column === 'cost_unit');
  const levels: Granularity[] = scoped ? ['h'] : ['d', 'h', 'm'];
  const fits = (g: Granularity) =>
    q.bucketMs === undefined || (q.bucketMs >= GRANULARITY_MS[g] && q.bucketMs % GRANULARITY_MS[g] === 0);
  return { cube: scoped ? 'scope' : unitOnly ? 'unit' : 'project', levels: levels.filter(fits) };
}
