import type { LoggedEvent } from '@tollgate/database';

/** A cost in micro-units of `currency`, as priced at ingest (or by a reprice). */
export interface WireCost {
  micros: number;
  inputMicros: number | null;
  outputMicros: number | null;
  currency: string;
  source: string | null;
  priceId: string | null;
}

/** The event type of a step's usage. */
export const STEP_EVENT_TYPE = 'StepUsageRecorded';
/** The event type of a correction of a stored step's cost (see `repriced`). */
export const REPRICED_EVENT_TYPE = 'StepRepriced';

/** An event as exporters send it: the log row in the step event's own shape, costs in micro-units. */
export interface WireEvent {
  eventId: string;
  /** Log position, as a string (a bigint). */
  position: string;
  type: string;
  projectId: string;
  occurredAt: string;
  recordedAt: string;
  traceId: string | null;
  spanId: string | null;
  runId: string | null;
  threadId: string | null;
  resourceId: string | null;
  userId: string | null;
  organizationId: string | null;
  sessionId: string | null;
  entityType: string | null;
  entityName: string | null;
  provider: string | null;
  model: string | null;
  environment: string | null;
  serviceName: string | null;
  usage: {
    inputTokens: number;
    outputTokens: number;
    cacheReadTokens: number;
    cacheWriteTokens: number;
    reasoningTokens: number;
    audioInputTokens: number;
    imageInputTokens: number;
  };
  durationMs: number | null;
  finishReason: string | null;
  stepIndex: number | null;
  reservationId: string | null;
  /** Null when the event could not be priced (`unpriced` is then true). On a StepRepriced: the step's cost from then on. */
  cost: WireCost | null;
  unpriced: boolean;
  labels: Record<string, unknown> | null;
  tags: string[];
  data: Record<string, unknown> | null;
  /**
   * StepRepriced only: a stored step's cost was corrected (the step's own event is never sent
   * again). It carries the step's scope ids, dimensions and usage so a receiver can file it like
   * the step — count tokens from StepUsageRecorded only — and `cost` is the step's cost from now
   * on: add `cost − previousCost` to whatever totals the step's event went into.
   */
  repriced?: { stepEventId: string; sequence: number; previousCost: WireCost | null };
}

const num = (v: unknown): number => (v === null || v === undefined ? 0 : Number(v));
const numOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));
const str = (v: unknown): string | null => (v === null || v === undefined ? null : String(v));
const iso = (v: unknown): string => (v instanceof Date ? v.toISOString() : new Date(String(v)).toISOString());

interface StoredStepCost {
  costMicros: number | null;
  inputCostMicros: number | null;
  outputCostMicros: number | null;
  costUnit: string | null;
  priceId: string | null;
  source: string | null;
}

function repricedOf(data: unknown): WireEvent['repriced'] {
  const d = data as { stepEventId?: string; sequence?: number; old?: StoredStepCost } | null;
  if (!d?.stepEventId || !d.old) return undefined;
  const old = d.old;
  return {
    stepEventId: d.stepEventId,
    sequence: Number(d.sequence),
    previousCost:
      old.costMicros === null
        ? null
        : {
            micros: old.costMicros,
            inputMicros: old.inputCostMicros,
            outputMicros: old.outputCostMicros,
            currency: old.costUnit ?? 'USD',
            source: old.source,
            priceId: old.priceId,
          },
  };
}

export function toWireEvent(e: LoggedEvent): WireEvent {
  const r = e.row;
  const costMicros = numOrNull(r.cost_micros);
  const repriced = e.type === REPRICED_EVENT_TYPE ? repricedOf(r.data) : undefined;
  return {
    eventId: e.eventId,
    position: e.position.toString(),
    type: e.type,
    projectId: e.projectId,
    occurredAt: iso(e.occurredAt),
    recordedAt: iso(e.recordedAt),
    traceId: str(r.trace_id),
    spanId: str(r.span_id),
    runId: str(r.run_id),
    threadId: str(r.thread_id),
    resourceId: str(r.resource_id),
    userId: str(r.user_id),
    organizationId: str(r.organization_id),
    sessionId: str(r.session_id),
    entityType: str(r.entity_type),
    entityName: str(r.entity_name),
    provider: str(r.provider),
    model: str(r.model),
    environment: str(r.environment),
    serviceName: str(r.service_name),
    usage: {
      inputTokens: num(r.input_tokens),
      outputTokens: num(r.output_tokens),
      cacheReadTokens: num(r.cache_read_tokens),
      cacheWriteTokens: num(r.cache_write_tokens),
      reasoningTokens: num(r.reasoning_tokens),
      audioInputTokens: num(r.audio_input_tokens),
      imageInputTokens: num(r.image_input_tokens),
    },
    durationMs: numOrNull(r.duration_ms),
    finishReason: str(r.finish_reason),
    stepIndex: numOrNull(r.step_index),
    reservationId: str(r.reservation_id),
    cost:
      costMicros === null
        ? null
        : {
            micros: costMicros,
            inputMicros: numOrNull(r.input_cost_micros),
            outputMicros: numOrNull(r.output_cost_micros),
            currency: str(r.cost_unit) ?? 'USD',
            source: str(r.cost_source),
            priceId: str(r.price_id),
          },
    unpriced: Boolean(r.unpriced),
    labels: (r.labels as Record<string, unknown> | null) ?? null,
    tags: (r.tags as string[] | null) ?? [],
    data: (r.data as Record<string, unknown> | null) ?? null,
    ...(repriced ? { repriced } : {}),
  };
}
