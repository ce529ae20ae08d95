import {
  RUN_ID,
  SCOPE_TABLE,
  WINDOWED_SCOPES,
  type ReservationExceededView,
  type StepUsageEvent,
} from '@tollgate/contracts';
import type { Sql } from '@tollgate/database';
import type { PricedCost } from '../pricing/price-step';
import { heldColumns, holdTotalsSql } from '../reservations/hold-totals.sql';

/** A step event as stored: its position, and whether it settled a reservation with more than it held. */
export interface StoredStep {
  position: string;
  exceeded?: ReservationExceededView;
}

export interface StepRow {
  event: StepUsageEvent;
  occurredAt: Date;
  cost: PricedCost;
}

/**
 * A provider that reports a cost of 0 for a step that used tokens is believed (the cost is stored
 * as reported) but flagged: it is as often a missing price as a free model.
 */
export const isZeroCostWithTokens = (e: StepUsageEvent) =>
  e.cost !== undefined && e.cost.amount === 0 && e.usage.inputTokens + e.usage.outputTokens > 0;

/** jsonb_to_recordset column list; kept beside the mapping below so the two cannot drift. */
const RECORD_COLUMNS = `event_id text, occurred_at timestamptz, trace_id text, span_id text, run_id text,
  thread_id text, resource_id text, user_id text, organization_id text, session_id text,
  entity_type text, entity_name text, provider text, model text, environment text, service_name text,
  input_tokens bigint, output_tokens bigint, cache_read_tokens bigint, cache_write_tokens bigint,
  cache_write_1h_tokens bigint, reasoning_tokens bigint, audio_input_tokens bigint, image_input_tokens bigint, duration_ms float8,
  finish_reason text, step_index int, reservation_id text, cost_micros bigint, input_cost_micros bigint,
  output_cost_micros bigint, cost_unit text, cost_source text, price_id text, unpriced boolean,
  labels jsonb, tags text[], data jsonb`;

const COLUMN_NAMES = RECORD_COLUMNS.split(',').map((c) => c.trim().split(/\s+/)[0]);

/** (scope, id) of every windowed scope on a fresh event `f`; constant, so the statement's text is the same for every call. */
const WINDOWED_SCOPE_IDS = WINDOWED_SCOPES.map((s) => `('${s}', f.${SCOPE_TABLE[s].column})`).join(', ');

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
    cache_write_1h_tokens: u.cacheWrite1hTokens ?? 0,
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
    data: dataOf(e),
  };
}

/** What a step keeps beside its columns: a reported cost, and the provider's usage as it was sent. */
function dataOf(e: StepUsageEvent): Record<string, unknown> | null {
  const data = {
    ...(e.cost ? { reportedCost: e.cost, ...(isZeroCostWithTokens(e) ? { zeroCostWithTokens: true } : {}) } : {}),
    ...(e.providerUsage ? { providerUsage: e.providerUsage } : {}),
  };
  return Object.keys(data).length ? data : null;
}

/**
 * Appends step events that are not stored yet, in one statement (one round trip, atomic):
 * - the event id is claimed in `event_ids` (the idempotency table, not partitioned) and only the
 *   events whose claim succeeded are written; a concurrent request with the same ids waits on the
 *   claim and then skips them;
 * - the guard's usage counters of every scope on the event (hour and day buckets, and the run's
 *   total) are incremented, in key order so that concurrent batches never deadlock;
 * - the reservations the events name are settled (the actual usage replaces the estimate from the
 *   same commit on), each with a `ReservationSettled` event, and a `ReservationExceeded` event when
 *   the actual usage passed what was held; the ratio of actual to estimated input tokens is added
 *   to the model's histogram, from which the guard learns its margin.
 * Returns the stored events by event id; the missing ones were duplicates.
 */
export async function insertStepEvents(tx: Sql, projectId: string, rows: StepRow[]): Promise<Map<string, StoredStep>> {
  if (rows.length === 0) return new Map();
  const cols = COLUMN_NAMES.join(', ');
  const stored = await tx.query<{ event_id: string; position: string; exceeded: ReservationExceededView | null }>(
    `WITH input AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(${RECORD_COLUMNS})),
     claimed AS (
       INSERT INTO event_ids (project_id, event_id, occurred_at)
       SELECT $2, event_id, occurred_at FROM input ORDER BY event_id
       ON CONFLICT DO NOTHING
       RETURNING event_id
     ),
     fresh AS (SELECT input.* FROM input JOIN claimed USING (event_id)),
     stored AS (
       INSERT INTO events (project_id, type, ${cols})
       SELECT $2, 'StepUsageRecorded', ${COLUMN_NAMES.map((c) => `fresh.${c}`).join(', ')} FROM fresh
       RETURNING event_id, position
     ),
     scoped AS (
       SELECT k.scope, k.scope_id, g.granularity,
              CASE g.granularity WHEN 'h' THEN date_trunc('hour', f.occurred_at, 'UTC') ELSE date_trunc('day', f.occurred_at, 'UTC') END AS bucket_start,
              f.cost_unit, f.input_tokens, f.output_tokens, f.cost_micros, f.unpriced
         FROM fresh f
        CROSS JOIN LATERAL (VALUES ${WINDOWED_SCOPE_IDS}) AS k(scope, scope_id)
        CROSS JOIN (VALUES ('h'::"char"), ('d'::"char")) AS g(granularity)
        WHERE k.scope_id IS NOT NULL
       UNION ALL
       SELECT 'run', r.id, 'r'::"char", 'epoch'::timestamptz, f.cost_unit, f.input_tokens, f.output_tokens, f.cost_micros, f.unpriced
         FROM fresh f
        CROSS JOIN LATERAL (SELECT f.${SCOPE_TABLE.run.column} UNION SELECT f.${RUN_ID.column}) AS r(id)
        WHERE r.id IS NOT NULL
     ),
     counted AS (
       INSERT INTO usage_counters AS c (project_id, scope, scope_id, granularity, bucket_start, cost_unit,
                                        input_tokens, output_tokens, cost_micros, unpriced_events, events)
       SELECT $2, scope, scope_id, granularity, bucket_start, coalesce(cost_unit, ''), sum(input_tokens), sum(output_tokens),
              coalesce(sum(cost_micros), 0), count(*) FILTER (WHERE unpriced), count(*)
         FROM scoped
        GROUP BY scope, scope_id, granularity, bucket_start, coalesce(cost_unit, '')
        ORDER BY scope, scope_id, granularity, bucket_start, coalesce(cost_unit, '')
       ON CONFLICT (project_id, scope, scope_id, granularity, bucket_start, cost_unit) DO UPDATE
          SET input_tokens = c.input_tokens + excluded.input_tokens,
              output_tokens = c.output_tokens + excluded.output_tokens,
              cost_micros = c.cost_micros + excluded.cost_micros,
              unpriced_events = c.unpriced_events + excluded.unpriced_events,
              events = c.events + excluded.events
       RETURNING 1
     ),
     -- The reservations to settle, locked in id order, as every writer of reservations takes them
     -- (a sweep skips those locked), so that two statements never wait on each other crosswise;
     -- each found by its key and updated by its row address (as a join, the planner walked every
     -- open reservation of the project).
     settling AS (
       SELECT r.tid, r.id FROM (SELECT DISTINCT reservation_id FROM fresh WHERE reservation_id IS NOT NULL ORDER BY reservation_id) f
        CROSS JOIN LATERAL (
          SELECT ctid AS tid, id FROM reservations r WHERE r.project_id = $2 AND r.id = f.reservation_id AND r.status = 'open' FOR UPDATE) r
     ),
     settled AS (
       UPDATE reservations r SET status = 'settled', closed_at = now()
         FROM settling l JOIN (
           SELECT DISTINCT ON (reservation_id) reservation_id, event_id, provider, model, input_tokens, output_tokens, cost_micros, cost_unit
             FROM fresh WHERE reservation_id IS NOT NULL ORDER BY reservation_id, event_id) s ON s.reservation_id = l.id
        WHERE r.ctid = l.tid AND r.status = 'open'
       RETURNING r.id, r.scope_keys, r.expires_at, r.cost_micros AS r_cost, r.cost_unit AS r_unit, r.input_tokens AS r_in, r.output_tokens AS r_out,
                 r.estimated_input_tokens, r.provider AS r_provider, r.model AS r_model,
                 s.event_id AS step_event_id, s.input_tokens, s.output_tokens, s.cost_micros, s.cost_unit,
                 -- Money is compared only in one unit; tokens always.
                 (s.input_tokens > r.input_tokens OR s.output_tokens > r.output_tokens
                  OR (s.cost_unit = r.cost_unit AND s.cost_micros > r.cost_micros)) AS exceeded
     ),
     unheld AS (
       DELETE FROM reservation_holds h USING (SELECT id, expires_at, unnest(scope_keys) AS scope_key FROM settled) x
        WHERE h.project_id = $2 AND h.scope_key = x.scope_key AND h.expires_at = x.expires_at AND h.reservation_id = x.id
       RETURNING ${heldColumns('h')}
     ),
     unheld_totals AS (${holdTotalsSql([['unheld', -1]])}),
     -- A reservation settles once (the UPDATE takes open ones only), so its events' ids, in the
     -- system's own namespace, are new: claimed, and logged without joining the claims (a join
     -- of two CTEs estimated at one row each runs as a nested loop, quadratic in the batch).
     settle_claimed AS (
       INSERT INTO event_ids (project_id, event_id, occurred_at)
       SELECT $2, 'tg:reservation:' || id || ':settled', now() FROM settled ORDER BY id
       ON CONFLICT DO NOTHING
     ),
     settle_logged AS (
       INSERT INTO events (project_id, event_id, type, occurred_at, reservation_id, data)
       SELECT $2, 'tg:reservation:' || s.id || ':settled', 'ReservationSettled', now(), s.id, jsonb_build_object('stepEventId', s.step_event_id)
         FROM settled s
       RETURNING 1
     ),
     exceeded_claimed AS (
       INSERT INTO event_ids (project_id, event_id, occurred_at)
       SELECT $2, 'tg:reservation:' || id || ':exceeded', now() FROM settled WHERE exceeded ORDER BY id
       ON CONFLICT DO NOTHING
     ),
     exceeded_logged AS (
       INSERT INTO events (project_id, event_id, type, occurred_at, reservation_id, data)
       SELECT $2, 'tg:reservation:' || s.id || ':exceeded', 'ReservationExceeded', now(), s.id,
              jsonb_build_object('stepEventId', s.step_event_id, 'scopeKeys', s.scope_keys,
                'reserved', jsonb_build_object('costMicros', s.r_cost, 'costUnit', nullif(s.r_unit, ''), 'inputTokens', s.r_in, 'outputTokens', s.r_out),
                'actual', jsonb_build_object('costMicros', s.cost_micros, 'costUnit', s.cost_unit, 'inputTokens', s.input_tokens, 'outputTokens', s.output_tokens))
         FROM settled s WHERE s.exceeded
       RETURNING 1
     ),
     -- What settlements teach the guard's margin: actual ÷ estimated input tokens, binned
     -- (bin b holds (0.5 + 0.05 (b − 1), 0.5 + 0.05 b]; see estimate-margins.ts).
     ratios AS (
       INSERT INTO estimate_ratio_bins AS b (project_id, provider, model, bin, n)
       SELECT $2, r_provider, r_model, bin, count(*)
         FROM (SELECT r_provider, r_model,
                      least(69, greatest(0, ceil((input_tokens::numeric / estimated_input_tokens - 0.5) / 0.05)))::smallint AS bin
                 FROM settled WHERE estimated_input_tokens > 0 AND r_provider IS NOT NULL) x
        GROUP BY r_provider, r_model, bin
        ORDER BY r_provider, r_model, bin
       ON CONFLICT (project_id, provider, model, bin) DO UPDATE SET n = b.n + excluded.n
       RETURNING 1
     ),
     exceeded_view AS (
       SELECT step_event_id, jsonb_build_object('reservationId', id,
                'reserved', jsonb_build_object('cost', r_cost / 1e6, 'costUnit', nullif(r_unit, ''), 'inputTokens', r_in, 'outputTokens', r_out),
                'actual', jsonb_build_object('cost', cost_micros / 1e6, 'costUnit', cost_unit, 'inputTokens', input_tokens, 'outputTokens', output_tokens)) AS view
         FROM settled WHERE exceeded
     )
     SELECT st.event_id, st.position::text AS position, x.view AS exceeded FROM stored st LEFT JOIN exceeded_view x ON x.step_event_id = st.event_id`,
    JSON.stringify(rows.map(toRecord)),
    projectId,
  );
  return new Map(stored.map((r) => [r.event_id, { position: r.position, exceeded: r.exceeded ?? undefined }]));
}
