/**
 * Mastra's observability metric API, as Tollgate serves it.
 *
 * What Mastra 1.71 defines (`@mastra/core` storage/domains/observability, `@mastra/client-js`
 * `Observability`, and the in-memory store used as Mastra's reference semantics):
 *
 * - Routes under `/api/observability`. The client POSTs the args object itself as the JSON body
 *   (no envelope; Dates become ISO strings) to `metrics/{aggregate,breakdown,timeseries,percentiles}`,
 *   and GETs `discovery/*` with flat query params (`toQueryParams`: `?prefix=&limit=`,
 *   `?metricName=&labelKey=`, `?entityType=`; entity-types, service-names and environments take none).
 * - `getMetricAggregate({ name: string[] ≥1, aggregation: sum|avg|min|max|count|last|count_distinct,
 *   distinctColumn? (required for count_distinct: entityType, entityName, parentEntityType,
 *   parentEntityName, rootEntityType, rootEntityName, name, provider, model, environment,
 *   executionSource, serviceName, threadId, resourceId), filters?, comparePeriod?:
 *   previous_period|previous_day|previous_week })` → `{ value: number|null, estimatedCost?,
 *   costUnit?, previousValue?, previousEstimatedCost?, changePercent?, costChangePercent? }`.
 *   Comparison fields appear only when `filters.timestamp` has both start and end; the previous
 *   range is shifted by (end − start), 1 day or 7 days, keeping the exclusive flags.
 *   changePercent = (value − prev) / |prev| × 100, null when prev is null or 0 (same for cost).
 * - `estimatedCost` sums the cost of every matching record that has one (null when none), whatever
 *   the aggregation; `costUnit` is the one unit of those records, null when mixed or none.
 *   Mastra's TokenCostControl calls aggregate with `name: [total_input, total_output]`,
 *   `aggregation: 'sum'`, filters `{ resourceId|threadId|userId|organizationId|sessionId|traceId,
 *   entityType: 'agent', timestamp: { start } }` and reads only `estimatedCost` and `costUnit`;
 *   with `includeBreakdown` it calls breakdown with `groupBy: ['provider','model'], limit: 10`.
 * - `getMetricBreakdown({ name, groupBy: string[] ≥1, aggregation, distinctColumn?, filters?,
 *   limit? (int 1..1000), orderDirection?: ASC|DESC (default DESC) })` → `{ groups: [{ dimensions:
 *   Record<string, string|null>, value: number, estimatedCost?, costUnit? }] }`. A groupBy key that
 *   is not a record column is a label key.
 * - `getMetricTimeSeries({ name, interval: 1m|5m|15m|1h|1d, aggregation, distinctColumn?, filters?,
 *   groupBy? })` → `{ series: [{ name, costUnit?, points: [{ timestamp, value, estimatedCost? }] }] }`.
 *   Buckets are floor(epoch ms / interval) (UTC). Without groupBy: one series named
 *   `name.join(',')` (empty points when nothing matches); with groupBy: one series per group named
 *   by its values joined with '|' (null as '').
 * - `getMetricPercentiles({ name: string, percentiles: number[0..1] ≥1, interval, filters? })` →
 *   `{ series: [{ percentile, points: [{ timestamp, value }] }] }`; a bucket's p-value is
 *   sorted[min(floor(p × n), n − 1)] (no interpolation).
 * - Filters (`metricsFilterSchema`): `timestamp { start?, end?, startExclusive?, endExclusive? }`
 *   (inclusive unless the flag is set), traceId, traceIds (1..1000), spanId, runId, threadId,
 *   resourceId, userId, organizationId, sessionId, requestId, entityType, entityName, provider,
 *   model, costUnit, environment, serviceName, `tags` (record must have all), `labels` (exact match
 *   of every pair), `name` (string[]), plus entityVersionId, parentEntity*, rootEntity*,
 *   experimentId, executionSource, source.
 * - Discovery: metric-names `{ prefix?, limit? }` → `{ names }`; metric-label-keys `{ metricName }`
 *   → `{ keys }`; metric-label-values `{ metricName, labelKey, prefix?, limit? }` → `{ values }`;
 *   entity-types → `{ entityTypes }`; entity-names `{ entityType? }` → `{ names }`; service-names →
 *   `{ serviceNames }`; environments → `{ environments }`; tags `{ entityType? }` → `{ tags }`.
 *   All sorted ascending.
 *
 * Where Tollgate differs, deliberately:
 * - Unknown filter keys, unknown top-level keys and unknown metric names are a 400 naming the field
 *   (Mastra strips unknown keys). Mastra filters on dimensions a step event does not have
 *   (entity versions, parent/root entities, experimentId, executionSource, source) are a 400 too,
 *   rather than silently matching nothing. `requestId` is accepted but no step event carries one,
 *   so it matches nothing (as in Mastra's own store for records without it). `entityType` is free
 *   text (agents report more types than Mastra's enum).
 * - An empty `count` is 0 (SQL semantics; Mastra's in-memory store returns null); other empty
 *   aggregations are null, `count_distinct` 0.
 * - `last` is the value of the latest record by occurredAt (ties: later log position, then higher
 *   metric id). Breakdown ties are ordered by the dimensions' JSON; grouped series by name.
 * - Every response carries `lag: { events, ms }` and headers `x-tollgate-projection-lag-events` /
 *   `-ms`: how many log events the rollup projection has not read yet, and how old the oldest is.
 *   Answers are exact regardless: events beyond the checkpoint are read from the log.
 */
import { z } from 'zod';
import { METRIC_BY_NAME, METRIC_NAMES } from './metric-names';

export const AGGREGATIONS = ['sum', 'avg', 'min', 'max', 'count', 'last', 'count_distinct'] as const;
export const INTERVALS = { '1m': 60_000, '5m': 300_000, '15m': 900_000, '1h': 3_600_000, '1d': 86_400_000 } as const;
export const DISTINCT_COLUMNS = [
  'entityType', 'entityName', 'parentEntityType', 'parentEntityName', 'rootEntityType', 'rootEntityName', 'name',
  'provider', 'model', 'environment', 'executionSource', 'serviceName', 'threadId', 'resourceId',
] as const;

const text = z.string().min(1, 'must not be empty').max(1024, 'must be at most 1024 characters');
const unsupported = z
  .unknown()
  .refine(() => false, 'is a Mastra filter on a dimension that Tollgate step events do not carry')
  .optional();

export const dateRangeSchema = z.strictObject({
  start: z.coerce.date({ error: 'must be an ISO-8601 timestamp' }).optional(),
  end: z.coerce.date({ error: 'must be an ISO-8601 timestamp' }).optional(),
  startExclusive: z.boolean().optional(),
  endExclusive: z.boolean().optional(),
});

export const metricsFilterSchema = z.strictObject({
  timestamp: dateRangeSchema.optional(),
  traceId: text.optional(),
  traceIds: z.array(text).min(1, 'must hold at least one trace id').max(1000, 'must hold at most 1000 trace ids').optional(),
  spanId: text.optional(),
  runId: text.optional(),
  threadId: text.optional(),
  resourceId: text.optional(),
  userId: text.optional(),
  organizationId: text.optional(),
  sessionId: text.optional(),
  requestId: text.optional(),
  entityType: text.optional(),
  entityName: text.optional(),
  provider: text.optional(),
  model: text.optional(),
  costUnit: text.optional(),
  environment: text.optional(),
  serviceName: text.optional(),
  tags: z.array(text).optional(),
  labels: z.record(z.string(), z.string()).optional(),
  name: z.array(text).min(1, 'must hold at least one metric name').optional(),
  entityVersionId: unsupported,
  parentEntityVersionId: unsupported,
  rootEntityVersionId: unsupported,
  experimentId: unsupported,
  parentEntityType: unsupported,
  parentEntityName: unsupported,
  rootEntityType: unsupported,
  rootEntityName: unsupported,
  executionSource: unsupported,
  source: unsupported,
});
export type MetricsFilter = z.infer<typeof metricsFilterSchema>;

const knownName = z.string().refine((n) => METRIC_BY_NAME.has(n), { message: `is not a known metric name (known: ${METRIC_NAMES.join(', ')})` });
const names = z.array(knownName, { error: 'must be an array of metric names' }).min(1, 'must hold at least one metric name');
const aggregation = z.enum(AGGREGATIONS, { error: `must be one of ${AGGREGATIONS.join(', ')}` });
const distinctColumn = z.enum(DISTINCT_COLUMNS, { error: `must be one of ${DISTINCT_COLUMNS.join(', ')}` }).optional();
const interval = z.enum(Object.keys(INTERVALS) as [keyof typeof INTERVALS], { error: `must be one of ${Object.keys(INTERVALS).join(', ')}` });
const groupBy = z.array(text, { error: 'must be an array of column names or label keys' }).min(1, 'must hold at least one column or label key');

const needsDistinct = <T extends { aggregation: string; distinctColumn?: string }>(v: T, ctx: z.RefinementCtx) => {
  if (v.aggregation === 'count_distinct' && !v.distinctColumn) ctx.addIssue({ code: 'custom', path: ['distinctColumn'], message: "is required when aggregation is 'count_distinct'" });
};

export const aggregateArgsSchema = z
  .strictObject({ name: names, aggregation, distinctColumn, filters: metricsFilterSchema.optional(), comparePeriod: z.enum(['previous_period', 'previous_day', 'previous_week'], { error: 'must be one of previous_period, previous_day, previous_week' }).optional() })
  .superRefine(needsDistinct);
export type AggregateArgs = z.infer<typeof aggregateArgsSchema>;

export const breakdownArgsSchema = z
  .strictObject({
    name: names,
    groupBy,
    aggregation,
    distinctColumn,
    filters: metricsFilterSchema.optional(),
    limit: z.number({ error: 'must be a number' }).int('must be an integer').positive('must be positive').max(1000, 'must be at most 1000').optional(),
    orderDirection: z.enum(['ASC', 'DESC'], { error: 'must be ASC or DESC' }).optional(),
  })
  .superRefine(needsDistinct);
export type BreakdownArgs = z.infer<typeof breakdownArgsSchema>;

export const timeSeriesArgsSchema = z
  .strictObject({ name: names, interval, aggregation, distinctColumn, filters: metricsFilterSchema.optional(), groupBy: groupBy.optional() })
  .superRefine(needsDistinct);
export type TimeSeriesArgs = z.infer<typeof timeSeriesArgsSchema>;

export const percentilesArgsSchema = z.strictObject({
  name: knownName,
  percentiles: z.array(z.number({ error: 'must be a number' }).min(0, 'must be between 0 and 1').max(1, 'must be between 0 and 1')).min(1, 'must hold at least one percentile'),
  interval,
  filters: metricsFilterSchema.optional(),
});
export type PercentilesArgs = z.infer<typeof percentilesArgsSchema>;

const limit = z.coerce.number({ error: 'must be a number' }).int('must be an integer').min(1, 'must be at least 1').optional();
export const metricNamesQuerySchema = z.strictObject({ prefix: z.string().optional(), limit });
export const labelKeysQuerySchema = z.strictObject({ metricName: z.string({ error: 'is required' }).min(1, 'is required') });
export const labelValuesQuerySchema = z.strictObject({ metricName: z.string({ error: 'is required' }).min(1, 'is required'), labelKey: z.string({ error: 'is required' }).min(1, 'is required'), prefix: z.string().optional(), limit });
export const entityTypeQuerySchema = z.strictObject({ entityType: z.string().min(1).optional() });
export const noQuerySchema = z.strictObject({});

/** How far the rollup projection is behind the log when the answer was computed. */
export interface ProjectionLag {
  events: number;
  ms: number;
}

export interface AggregateResponse {
  value: number | null;
  estimatedCost: number | null;
  costUnit: string | null;
  previousValue?: number | null;
  previousEstimatedCost?: number | null;
  changePercent?: number | null;
  costChangePercent?: number | null;
}
export interface BreakdownResponse {
  groups: { dimensions: Record<string, string | null>; value: number; estimatedCost: number | null; costUnit: string | null }[];
}
export interface TimeSeriesResponse {
  series: { name: string; costUnit: string | null; points: { timestamp: string; value: number; estimatedCost: number | null }[] }[];
}
export interface PercentilesResponse {
  series: { percentile: number; points: { timestamp: string; value: number }[] }[];
}
