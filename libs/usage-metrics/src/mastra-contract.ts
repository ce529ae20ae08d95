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
 * - Timestamps are ISO-8601 strings with a zone (what the client sends for a Date) between
 *   2000-01-01 and 9999-12-31, and so is the range `comparePeriod` compares with; a number, null or
 *   a zone-less date is a 400 (Mastra coerces them). Strings are printable (a control character
 *   is a 400: no id, name, tag or label of a step event has one). Every list is bounded: `name` and
 *   `filters.name` ≤ 100, `groupBy` ≤ 16, `percentiles` ≤ 100, `traceIds` ≤ 1000, `tags` ≤ 64,
 *   `labels` ≤ 64 pairs. A `groupBy` key that is not a column (by own name: `constructor` is not
 *   one) is a label key, whatever it is called.
 * - An empty `count` is 0 (SQL semantics; Mastra's in-memory store returns null); other empty
 *   aggregations are null, `count_distinct` 0.
 * - `last` is the value of the latest record by occurredAt (ties: later log position, then higher
 *   metric id). Breakdown ties are ordered by the dimensions' JSON; grouped series by name.
 * - Beside every cost (the aggregate, each breakdown group, each series point) are `unpricedSteps`
 *   and `unpricedTokens`: the steps behind the records that have no price, and their token values
 *   (see `Unpriced`). Mastra's client ignores fields it does not know.
 * - Every response carries `lag: { events, ms }` and headers `x-tollgate-projection-lag-events` /
 *   `-ms`: how many log events the rollup projection has not read yet, and how old the oldest is.
 *   Answers are exact regardless: events beyond the checkpoint are read from the log.
 */
import { isAcceptedInstant, isoInstantSchema, MAX_LABELS, MAX_TAGS, shortText } from '@tollgate/contracts';
import { z } from 'zod';
import { METRIC_BY_NAME, METRIC_NAMES } from './metric-names';

export const AGGREGATIONS = ['sum', 'avg', 'min', 'max', 'count', 'last', 'count_distinct'] as const;
export const INTERVALS = { '1m': 60_000, '5m': 300_000, '15m': 900_000, '1h': 3_600_000, '1d': 86_400_000 } as const;
export const DISTINCT_COLUMNS = [
  'entityType',
  'entityName',
  'parentEntityType',
  'parentEntityName',
  'rootEntityType',
  'rootEntityName',
  'name',
  'provider',
  'model',
  'environment',
  'executionSource',
  'serviceName',
  'threadId',
  'resourceId',
] as const;

/**
 * Bounds on every list of a query: far above what a dashboard or Mastra asks for, far below what
 * one SQL statement can hold (PostgreSQL allows 1664 columns; each group key or percentile is one).
 */
export const MAX_GROUP_BY = 16;
export const MAX_PERCENTILES = 100;
export const MAX_METRIC_NAMES = 100;
export const MAX_TRACE_IDS = 1000;

// Printable, as every id, name, tag and label a step event carries: a control character matches nothing.
const text = shortText(1024);
const noControl = /^[^\p{Cc}\p{Cs}]*$/u;
// Strings are ISO-8601 (Mastra's client sends Date#toISOString()); numbers, null or a date without a zone are not instants.
const instant = isoInstantSchema.transform((s) => new Date(s));
const unsupported = z
  .unknown()
  .refine(() => false, 'is a Mastra filter on a dimension that Tollgate step events do not carry')
  .optional();

const knownName = z
  .string()
  .refine((n) => METRIC_BY_NAME.has(n), { message: `is not a known metric name (known: ${METRIC_NAMES.join(', ')})` });
const names = z
  .array(knownName, { error: 'must be an array of metric names' })
  .min(1, 'must hold at least one metric name')
  .max(MAX_METRIC_NAMES, `must hold at most ${MAX_METRIC_NAMES} metric names`);

export const dateRangeSchema = z.strictObject({
  start: instant.optional(),
  end: instant.optional(),
  startExclusive: z.boolean().optional(),
  endExclusive: z.boolean().optional(),
});

export const metricsFilterSchema = z.strictObject({
  timestamp: dateRangeSchema.optional(),
  traceId: text.optional(),
  traceIds: z
    .array(text)
    .min(1, 'must hold at least one trace id')
    .max(MAX_TRACE_IDS, `must hold at most ${MAX_TRACE_IDS} trace ids`)
    .optional(),
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
  // A record has at most MAX_TAGS tags and MAX_LABELS labels: a filter needing more matches nothing.
  tags: z.array(text).max(MAX_TAGS, `must hold at most ${MAX_TAGS} tags`).optional(),
  labels: z
    .record(
      shortText(128),
      z.string().max(1024, 'must be at most 1024 characters').regex(noControl, 'must not contain control characters'),
    )
    .refine((l) => Object.keys(l).length <= MAX_LABELS, `must hold at most ${MAX_LABELS} labels`)
    .optional(),
  name: names.optional(),
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

const aggregation = z.enum(AGGREGATIONS, { error: `must be one of ${AGGREGATIONS.join(', ')}` });
const distinctColumn = z.enum(DISTINCT_COLUMNS, { error: `must be one of ${DISTINCT_COLUMNS.join(', ')}` }).optional();
const interval = z.enum(Object.keys(INTERVALS) as [keyof typeof INTERVALS], {
  error: `must be one of ${Object.keys(INTERVALS).join(', ')}`,
});
const groupBy = z
  .array(text, { error: 'must be an array of column names or label keys' })
  .min(1, 'must hold at least one column or label key')
  .max(MAX_GROUP_BY, `must hold at most ${MAX_GROUP_BY} columns or label keys`);

const needsDistinct = <T extends { aggregation: string; distinctColumn?: string }>(v: T, ctx: z.RefinementCtx) => {
  if (v.aggregation === 'count_distinct' && !v.distinctColumn)
    ctx.addIssue({
      code: 'custom',
      path: ['distinctColumn'],
      message: "is required when aggregation is 'count_distinct'",
    });
};

export const COMPARE_PERIODS = ['previous_period', 'previous_day', 'previous_week'] as const;
export type ComparePeriod = (typeof COMPARE_PERIODS)[number];
const DAY = 86_400_000;

/** The range comparePeriod compares with: shifted back by the range's length, a day or a week, keeping the exclusive flags. */
export function previousRange(ts: { start: Date; end: Date }, period: ComparePeriod): { start: Date; end: Date } {
  const shift =
    period === 'previous_day' ? DAY : period === 'previous_week' ? 7 * DAY : ts.end.getTime() - ts.start.getTime();
  return { start: new Date(ts.start.getTime() - shift), end: new Date(ts.end.getTime() - shift) };
}

// The compared range is a range of the query too: it must be one a request could name.
const comparableRange = (
  v: { comparePeriod?: ComparePeriod; filters?: { timestamp?: { start?: Date; end?: Date } } },
  ctx: z.RefinementCtx,
) => {
  const ts = v.filters?.timestamp;
  if (!v.comparePeriod || !(ts?.start instanceof Date) || !(ts.end instanceof Date)) return;
  const prev = previousRange({ start: ts.start, end: ts.end }, v.comparePeriod);
  if (!isAcceptedInstant(prev.start.getTime()) || !isAcceptedInstant(prev.end.getTime())) {
    ctx.addIssue({
      code: 'custom',
      path: ['comparePeriod'],
      message: `compares with ${prev.start.toISOString()} to ${prev.end.toISOString()}, outside 2000-01-01 to 9999-12-31`,
    });
  }
};

export const aggregateArgsSchema = z
  .strictObject({
    name: names,
    aggregation,
    distinctColumn,
    filters: metricsFilterSchema.optional(),
    comparePeriod: z.enum(COMPARE_PERIODS, { error: `must be one of ${COMPARE_PERIODS.join(', ')}` }).optional(),
  })
  .superRefine(needsDistinct)
  .superRefine(comparableRange);
export type AggregateArgs = z.infer<typeof aggregateArgsSchema>;

export const breakdownArgsSchema = z
  .strictObject({
    name: names,
    groupBy,
    aggregation,
    distinctColumn,
    filters: metricsFilterSchema.optional(),
    limit: z
      .number({ error: 'must be a number' })
      .int('must be an integer')
      .positive('must be positive')
      .max(1000, 'must be at most 1000')
      .optional(),
    orderDirection: z.enum(['ASC', 'DESC'], { error: 'must be ASC or DESC' }).optional(),
  })
  .superRefine(needsDistinct);
export type BreakdownArgs = z.infer<typeof breakdownArgsSchema>;

export const timeSeriesArgsSchema = z
  .strictObject({
    name: names,
    interval,
    aggregation,
    distinctColumn,
    filters: metricsFilterSchema.optional(),
    groupBy: groupBy.optional(),
  })
  .superRefine(needsDistinct);
export type TimeSeriesArgs = z.infer<typeof timeSeriesArgsSchema>;

export const percentilesArgsSchema = z.strictObject({
  name: knownName,
  percentiles: z
    .array(z.number({ error: 'must be a number' }).min(0, 'must be between 0 and 1').max(1, 'must be between 0 and 1'))
    .min(1, 'must hold at least one percentile')
    .max(MAX_PERCENTILES, `must hold at most ${MAX_PERCENTILES} percentiles`),
  interval,
  filters: metricsFilterSchema.optional(),
});
export type PercentilesArgs = z.infer<typeof percentilesArgsSchema>;

const limit = z.coerce
  .number({ error: 'must be a number' })
  .int('must be an integer')
  .min(1, 'must be at least 1')
  .optional();
const prefix = z
  .string({ error: 'must be a string' })
  .max(1024, 'must be at most 1024 characters')
  .regex(noControl, 'must not contain control characters')
  .optional();
const required = z
  .string({ error: 'is required' })
  .min(1, 'is required')
  .max(1024, 'must be at most 1024 characters')
  .regex(noControl, 'must not contain control characters');
export const metricNamesQuerySchema = z.strictObject({ prefix, limit });
export const labelKeysQuerySchema = z.strictObject({ metricName: required });
export const labelValuesQuerySchema = z.strictObject({ metricName: required, labelKey: required, prefix, limit });
export const entityTypeQuerySchema = z.strictObject({ entityType: text.optional() });
export const noQuerySchema = z.strictObject({});

/** How far the rollup projection is behind the log when the answer was computed. */
export interface ProjectionLag {
  events: number;
  ms: number;
}

/**
 * Tollgate's addition beside every cost: usage that has no cost because its model has no price
 * (an unknown model is unpriced, never free). `unpricedSteps` counts the steps without a price
 * behind the records, `unpricedTokens` sums their token values (whatever the aggregation, like
 * `estimatedCost`); both 0 when every step is priced.
 */
export interface Unpriced {
  unpricedSteps: number;
  unpricedTokens: number;
}

export interface AggregateResponse extends Unpriced {
  value: number | null;
  estimatedCost: number | null;
  costUnit: string | null;
  previousValue?: number | null;
  previousEstimatedCost?: number | null;
  changePercent?: number | null;
  costChangePercent?: number | null;
}
export interface BreakdownResponse {
  groups: ({
    dimensions: Record<string, string | null>;
    value: number;
    estimatedCost: number | null;
    costUnit: string | null;
  } & Unpriced)[];
}
export interface TimeSeriesResponse {
  series: {
    name: string;
    costUnit: string | null;
    points: ({ timestamp: string; value: number; estimatedCost: number | null } & Unpriced)[];
  }[];
}
export interface PercentilesResponse {
  series: { percentile: number; points: { timestamp: string; value: number }[] }[];
}

// ---- Response schemas (the OpenAPI document's; test/e2e/openapi-responses.spec.ts parses real answers with them) ----

const lagResponse = z
  .strictObject({
    events: z.number().describe('Events in the log not yet in the rollups'),
    ms: z.number().describe('Age of the oldest of them, in ms'),
  })
  .describe('How far the rollup projection was behind the log (also the x-tollgate-projection-lag-* headers)');
const costUnitOrNull = z.string().nullable().describe('The unit of estimatedCost; null when nothing was priced');
const unpricedFields = {
  unpricedSteps: z.number().describe('Steps behind the records whose model has no price (0 when all are priced)'),
  unpricedTokens: z.number().describe('The token values of those steps'),
};
const cost = z.number().nullable().describe('The cost of the matching token records in costUnit; null: not a cost');

export const aggregateResponseSchema = z.strictObject({
  value: z.number().nullable().describe('The aggregation over the matching records; null when none match'),
  estimatedCost: cost,
  costUnit: costUnitOrNull,
  ...unpricedFields,
  previousValue: z.number().nullable().optional().describe('With comparePeriod: the value over the earlier period'),
  previousEstimatedCost: z.number().nullable().optional(),
  changePercent: z.number().nullable().optional().describe('With comparePeriod: value vs previousValue, in percent'),
  costChangePercent: z.number().nullable().optional(),
  lag: lagResponse,
});

export const breakdownResponseSchema = z.strictObject({
  groups: z.array(
    z.strictObject({
      dimensions: z
        .record(z.string(), z.string().nullable())
        .describe('The group: each groupBy column or label key, and its value'),
      value: z.number(),
      estimatedCost: cost,
      costUnit: costUnitOrNull,
      ...unpricedFields,
    }),
  ),
  lag: lagResponse,
});

export const timeSeriesResponseSchema = z.strictObject({
  series: z.array(
    z.strictObject({
      name: z.string().describe('The metric name, or the group values joined when grouped'),
      costUnit: costUnitOrNull,
      points: z.array(
        z.strictObject({
          timestamp: z.string().describe('ISO 8601: the start of the bucket'),
          value: z.number(),
          estimatedCost: cost,
          ...unpricedFields,
        }),
      ),
    }),
  ),
  lag: lagResponse,
});

export const percentilesResponseSchema = z.strictObject({
  series: z.array(
    z.strictObject({
      percentile: z.number().describe('As asked, between 0 and 1'),
      points: z.array(z.strictObject({ timestamp: z.string().describe('ISO 8601'), value: z.number() })),
    }),
  ),
  lag: lagResponse,
});

/** A discovery route's answer: one sorted list under `key`. */
const listedResponse = <K extends string>(key: K, description: string) =>
  z.strictObject({ [key]: z.array(z.string()).describe(description), lag: lagResponse } as Record<
    K | 'lag',
    z.ZodType
  >);

export const metricNamesResponseSchema = listedResponse('names', 'Metric names with records, sorted');
export const labelKeysResponseSchema = listedResponse('keys', 'Label keys of the metric, sorted');
export const labelValuesResponseSchema = listedResponse('values', 'Values of the label key, sorted');
export const entityTypesResponseSchema = listedResponse('entityTypes', 'Entity types with records, sorted');
export const entityNamesResponseSchema = listedResponse('names', 'Entity names (of the entityType), sorted');
export const serviceNamesResponseSchema = listedResponse('serviceNames', 'Service names, sorted');
export const environmentsResponseSchema = listedResponse('environments', 'Environments, sorted');
export const tagsResponseSchema = listedResponse('tags', 'Tags (of the entityType), sorted');
