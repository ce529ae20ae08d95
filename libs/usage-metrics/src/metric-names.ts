/**
 * The metrics a `StepUsageRecorded` event produces, named as Mastra names its automatic model
 * metrics. Each has a small stable id (stored in the rollups: never renumber, only append), a
 * value taken from the event row, and the cost attributed to it: the input cost to the input
 * total, the output cost to the output total, nothing to the breakdown metrics — so
 * `sum` over `[total_input, total_output]` returns each step's whole cost exactly once.
 *
 * Usage rule (DESIGN.md): input tokens include cache reads/writes, audio and image tokens; output
 * tokens include reasoning tokens. So `input_text = input − cache_read − cache_write − audio − image`
 * and `output_text = output − reasoning` (never below 0). Tollgate's step event has no output
 * audio/image fields: those two names are known (queries accept them) but never produced.
 */
export interface MetricDef {
  id: number;
  name: string;
  /** Produced even when the value is 0 (the totals); the others only when non-zero. */
  always: boolean;
  /** The value from an event row (snake_case columns, as the log reader returns them), or null when not produced. */
  valueOf(row: EventRow): number | null;
  /** The same value as an SQL expression over `events e`, typed numeric (NULL when not produced). */
  sql: string;
  /** Which cost column is attributed to this metric. */
  cost: 'input_cost_micros' | 'output_cost_micros' | null;
}

export type EventRow = Record<string, unknown>;

const n = (row: EventRow, col: string): number => Number(row[col] ?? 0);
const tokens = (col: string) => (row: EventRow) => n(row, col);

const DEFS: Omit<MetricDef, 'id'>[] = [
  {
    name: 'mastra_model_total_input_tokens',
    always: true,
    valueOf: tokens('input_tokens'),
    sql: 'e.input_tokens::numeric',
    cost: 'input_cost_micros',
  },
  {
    name: 'mastra_model_total_output_tokens',
    always: true,
    valueOf: tokens('output_tokens'),
    sql: 'e.output_tokens::numeric',
    cost: 'output_cost_micros',
  },
  {
    name: 'mastra_model_input_text_tokens',
    always: false,
    valueOf: (r) =>
      Math.max(
        n(r, 'input_tokens') -
          n(r, 'cache_read_tokens') -
          n(r, 'cache_write_tokens') -
          n(r, 'audio_input_tokens') -
          n(r, 'image_input_tokens'),
        0,
      ),
    sql: 'greatest(e.input_tokens - e.cache_read_tokens - e.cache_write_tokens - e.audio_input_tokens - e.image_input_tokens, 0)::numeric',
    cost: null,
  },
  {
    name: 'mastra_model_input_cache_read_tokens',
    always: false,
    valueOf: tokens('cache_read_tokens'),
    sql: 'e.cache_read_tokens::numeric',
    cost: null,
  },
  {
    name: 'mastra_model_input_cache_write_tokens',
    always: false,
    valueOf: tokens('cache_write_tokens'),
    sql: 'e.cache_write_tokens::numeric',
    cost: null,
  },
  {
    name: 'mastra_model_input_audio_tokens',
    always: false,
    valueOf: tokens('audio_input_tokens'),
    sql: 'e.audio_input_tokens::numeric',
    cost: null,
  },
  {
    name: 'mastra_model_input_image_tokens',
    always: false,
    valueOf: tokens('image_input_tokens'),
    sql: 'e.image_input_tokens::numeric',
    cost: null,
  },
  {
    name: 'mastra_model_output_text_tokens',
    always: false,
    valueOf: (r) => Math.max(n(r, 'output_tokens') - n(r, 'reasoning_tokens'), 0),
    sql: 'greatest(e.output_tokens - e.reasoning_tokens, 0)::numeric',
    cost: null,
  },
  {
    name: 'mastra_model_output_reasoning_tokens',
    always: false,
    valueOf: tokens('reasoning_tokens'),
    sql: 'e.reasoning_tokens::numeric',
    cost: null,
  },
  { name: 'mastra_model_output_audio_tokens', always: false, valueOf: () => null, sql: 'NULL::numeric', cost: null },
  { name: 'mastra_model_output_image_tokens', always: false, valueOf: () => null, sql: 'NULL::numeric', cost: null },
  {
    name: 'mastra_model_duration_ms',
    // Produced whenever the event has a duration, 0 included.
    always: true,
    valueOf: (r) => (r.duration_ms === null || r.duration_ms === undefined ? null : Number(r.duration_ms)),
    // float8 → text gives the shortest exact digits (as JS does), so numeric sums agree with the projector's.
    sql: 'e.duration_ms::text::numeric',
    cost: null,
  },
];

export const METRICS: readonly MetricDef[] = DEFS.map((d, i) => ({ ...d, id: i + 1 }));
export const METRIC_NAMES: readonly string[] = METRICS.map((m) => m.name);
export const METRIC_BY_NAME: ReadonlyMap<string, MetricDef> = new Map(METRICS.map((m) => [m.name, m]));
export const METRIC_BY_ID: ReadonlyMap<number, MetricDef> = new Map(METRICS.map((m) => [m.id, m]));

/** The event types that produce metrics; every other type in the log is skipped. */
export const METRIC_EVENT_TYPE = 'StepUsageRecorded';

export interface MetricRecord {
  metric: MetricDef;
  value: number;
  /** Cost attributed to this record in micro-units of the event's cost unit; null when unpriced or not a cost metric. */
  costMicros: bigint | null;
}

/** The metric records one event row produces (pure; the projector's `evolve`). */
export function metricRecordsOf(row: EventRow): MetricRecord[] {
  if (row.type !== METRIC_EVENT_TYPE) return [];
  const out: MetricRecord[] = [];
  for (const metric of METRICS) {
    const value = metric.valueOf(row);
    if (value === null || (!metric.always && value <= 0)) continue;
    const cost = metric.cost ? row[metric.cost] : null;
    out.push({
      metric,
      value,
      costMicros: cost === null || cost === undefined ? null : BigInt(cost as bigint | number | string),
    });
  }
  return out;
}
