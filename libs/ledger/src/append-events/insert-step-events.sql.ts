import type { StepUsageEvent } from '@tollgate/contracts';
import type { PrismaService } from '@tollgate/database';
import type { PricedCost } from '../pricing/price-step';

export interface StepRow {
  event: StepUsageEvent;
  occurredAt: Date;
  cost: PricedCost;
}

/** jsonb_to_recordset column list; kept beside the mapping below so the two cannot drift. */
const RECORD_COLUMNS = `event_id text, occurred_at timestamptz, trace_id text, span_id text, run_id text,
  thread_id text, resource_id text, user_id text, organization_id text, session_id text,
  entity_type text, entity_name text, provider text, model text, environment text, service_name text,
  input_tokens bigint, output_tokens bigint, cache_read_tokens bigint, cache_write_tokens bigint,
  reasoning_tokens bigint, audio_input_tokens bigint, image_input_tokens bigint, duration_ms float8,
  finish_reason text, step_index int, reservation_id text, cost_micros bigint, input_cost_micros bigint,
  output_cost_micros bigint, cost_unit text, cost_source text, price_id text, unpriced boolean,
  labels jsonb, tags text[], data jsonb`;

const COLUMN_NAMES = RECORD_COLUMNS.split(',').map((c) => c.trim().split(/\s+/)[0]);

function toRecord({ event: e, occurredAt, cost }: StepRow): Record<string, unknown> {
  const u = e.usage;
  return {
    event_id: e.eventId,
    occurred_at: occurredAt.toISOString(),
    trace_id: e.traceId,
    span_id: e.spanId ?? null,
    run_id: e.runId ?? null,
    thread_id: e.threadId ?? null,
    resource_id: e.resourceId ?? null,
    user_id: e.userId ?? null,
    organization_id: e.organizationId ?? null,
    session_id: e.sessionId ?? null,
    entity_type: e.entityType,
    entity_name: e.entityName ?? null,
    provider: e.provider,
    model: e.model,
    environment: e.environment ?? null,
    service_name: e.serviceName ?? null,
    input_tokens: u.inputTokens,
    output_tokens: u.outputTokens,
    cache_read_tokens: u.cacheReadTokens ?? 0,
    cache_write_tokens: u.cacheWriteTokens ?? 0,
    reasoning_tokens: u.reasoningTokens ?? 0,
    audio_input_tokens: u.audioInputTokens ?? 0,
    image_input_tokens: u.imageInputTokens ?? 0,
    duration_ms: e.durationMs ?? null,
    finish_reason: e.finishReason ?? null,
    step_index: e.stepIndex ?? null,
    reservation_id: e.reservationId ?? null,
    cost_micros: cost.priced ? Number(cost.costMicros) : null,
    input_cost_micros: cost.priced ? Number(cost.inputCostMicros) : null,
    output_cost_micros: cost.priced ? Number(cost.outputCostMicros) : null,
    cost_unit: cost.priced ? cost.currency : null,
    cost_source: cost.priced ? cost.source : null,
    price_id: cost.priced ? cost.priceId : null,
    unpriced: !cost.priced,
    labels: e.labels ?? null,
    tags: e.tags ?? [],
    data: e.cost ? { reportedCost: e.cost } : null,
  };
}

/**
 * Appends step events that are not stored yet, in one statement: the event id is claimed in
 * `event_ids` (the idempotency table, not partitioned) and only the events whose claim succeeded
 * are written. A concurrent request with the same ids waits on the claim and then skips them.
 * Returns the stored events' positions by event id; the missing ones were duplicates.
 */
export async function insertStepEvents(tx: Pick<PrismaService, '$queryRawUnsafe'>, projectId: string, rows: StepRow[]): Promise<Map<string, string>> {
  if (rows.length === 0) return new Map();
  const cols = COLUMN_NAMES.join(', ');
  const stored = await tx.$queryRawUnsafe<{ event_id: string; position: string }[]>(
    `WITH input AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(${RECORD_COLUMNS})),
     claimed AS (
       INSERT INTO event_ids (project_id, event_id, occurred_at)
       SELECT $2, event_id, occurred_at FROM input
       ON CONFLICT DO NOTHING
       RETURNING event_id
     ),
     stored AS (
       INSERT INTO events (project_id, type, ${cols})
       SELECT $2, 'StepUsageRecorded', ${COLUMN_NAMES.map((c) => `input.${c}`).join(', ')}
         FROM input JOIN claimed USING (event_id)
       RETURNING event_id, position
     )
     SELECT event_id, position::text AS position FROM stored`,
    JSON.stringify(rows.map(toRecord)),
    projectId,
  );
  return new Map(stored.map((r) => [r.event_id, r.position]));
}
