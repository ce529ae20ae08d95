import type { Sql } from '@tollgate/database';
import type { StepCost } from '../events';

/** One correction to append: the step (by position and occurredAt), its latest cost and its new one. */
export interface CorrectionRow {
  eventId: string;
  stepEventId: string;
  stepPosition: string;
  occurredAt: Date;
  sequence: number;
  old: StepCost;
  new: StepCost;
}

const RECORD_COLUMNS = `event_id text, step_position bigint, occurred_at timestamptz, cost_micros bigint, input_cost_micros bigint,
  output_cost_micros bigint, cost_unit text, cost_source text, price_id text, unpriced boolean, old_cost_micros bigint,
  old_cost_unit text, old_unpriced boolean, data jsonb`;

/** The step's columns a correction carries, so every reader can file and filter it like its step. */
const COPIED = `trace_id, span_id, run_id, thread_id, resource_id, user_id, organization_id, session_id, entity_type, entity_name,
  provider, model, environment, service_name, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cache_write_1h_tokens,
  reasoning_tokens, audio_input_tokens, image_input_tokens, duration_ms, finish_reason, step_index, labels, tags`;
const COPIED_FROM_STEP = COPIED.split(',')
  .map((c) => `s.${c.trim()}`)
  .join(', ');

function toRecord(c: CorrectionRow) {
  return {
    event_id: c.eventId,
    step_position: c.stepPosition,
    occurred_at: c.occurredAt.toISOString(),
    cost_micros: c.new.costMicros,
    input_cost_micros: c.new.inputCostMicros,
    output_cost_micros: c.new.outputCostMicros,
    cost_unit: c.new.costUnit,
    cost_source: c.new.source,
    price_id: c.new.priceId,
    unpriced: c.new.costMicros === null,
    old_cost_micros: c.old.costMicros,
    old_cost_unit: c.old.costUnit,
    old_unpriced: c.old.costMicros === null,
    data: { stepEventId: c.stepEventId, stepPosition: c.stepPosition, sequence: c.sequence, old: c.old, new: c.new },
  };
}

/**
 * Appends `StepRepriced` corrections and applies them to the guard's usage counters, in one
 * statement (so in the caller's transaction, atomically):
 * - each correction's id (`tg:reprice:<stepEventId>:<sequence>`) is claimed in `event_ids`; a
 *   correction whose id is already claimed (another reprice got there first) is neither appended
 *   nor counted — a step is never corrected twice for the same latest cost;
 * - the counters of every scope on the step, in the same hour, day and run buckets that
 *   insertStepEvents incremented, get `new − old`: the step leaves the row of its old cost unit
 *   ('' when it was unpriced: tokens, cost, unpriced and event counts) and lands on the row of
 *   its new one, exactly as if it had been ingested at its new price. Rows are upserted in key
 *   order, like insertStepEvents, so a reprice and an ingest never deadlock.
 * Returns the appended corrections' positions by event id.
 */
export async function appendRepricedSteps(
  tx: Sql,
  projectId: string,
  corrections: readonly CorrectionRow[],
): Promise<Map<string, string>> {
  if (corrections.length === 0) return new Map();
  const rows = await tx.query<{ event_id: string; position: string }>(
    `WITH input AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(${RECORD_COLUMNS})),
     claimed AS (
       INSERT INTO event_ids (project_id, event_id, occurred_at)
       SELECT $2, event_id, occurred_at FROM input ORDER BY event_id
       ON CONFLICT DO NOTHING
       RETURNING event_id
     ),
     fresh AS (
       SELECT i.*, ${COPIED_FROM_STEP}
         FROM input i JOIN claimed USING (event_id)
         JOIN events s ON s.project_id = $2 AND s.position = i.step_position AND s.occurred_at = i.occurred_at AND s.type = 'StepUsageRecorded'
     ),
     stored AS (
       INSERT INTO events (project_id, event_id, type, occurred_at, ${COPIED},
                           cost_micros, input_cost_micros, output_cost_micros, cost_unit, cost_source, price_id, unpriced, data)
       SELECT $2, event_id, 'StepRepriced', occurred_at, ${COPIED},
              cost_micros, input_cost_micros, output_cost_micros, cost_unit, cost_source, price_id, unpriced, data
         FROM fresh
       RETURNING event_id, position
     ),
     -- The step leaves its old cost and lands on its new one.
     moved AS (
       SELECT f.occurred_at, f.trace_id, f.run_id, f.thread_id, f.resource_id, f.user_id, f.organization_id, f.session_id,
              f.input_tokens, f.output_tokens, v.sign, v.cost_unit, v.cost_micros, v.unpriced
         FROM fresh f
        CROSS JOIN LATERAL (VALUES (-1, f.old_cost_unit, f.old_cost_micros, f.old_unpriced), (1, f.cost_unit, f.cost_micros, f.unpriced)) AS v(sign, cost_unit, cost_micros, unpriced)
     ),
     scoped AS (
       SELECT k.scope, k.scope_id, g.granularity,
              CASE g.granularity WHEN 'h' THEN date_trunc('hour', m.occurred_at, 'UTC') ELSE date_trunc('day', m.occurred_at, 'UTC') END AS bucket_start,
              m.sign, m.cost_unit, m.input_tokens, m.output_tokens, m.cost_micros, m.unpriced
         FROM moved m
        CROSS JOIN LATERAL (VALUES ('thread', m.thread_id), ('resource', m.resource_id), ('user', m.user_id),
                                   ('organization', m.organization_id), ('session', m.session_id)) AS k(scope, scope_id)
        CROSS JOIN (VALUES ('h'::"char"), ('d'::"char")) AS g(granularity)
        WHERE k.scope_id IS NOT NULL
       UNION ALL
       SELECT 'run', r.id, 'r'::"char", 'epoch'::timestamptz, m.sign, m.cost_unit, m.input_tokens, m.output_tokens, m.cost_micros, m.unpriced
         FROM moved m
        CROSS JOIN LATERAL (SELECT m.trace_id UNION SELECT m.run_id) AS r(id)
        WHERE r.id IS NOT NULL
     ),
     deltas AS (
       SELECT scope, scope_id, granularity, bucket_start, coalesce(cost_unit, '') AS cost_unit,
              sum(sign * input_tokens) AS input_tokens, sum(sign * output_tokens) AS output_tokens,
              sum(sign * coalesce(cost_micros, 0)) AS cost_micros, coalesce(sum(sign) FILTER (WHERE unpriced), 0) AS unpriced_events, sum(sign) AS events
         FROM scoped
        GROUP BY scope, scope_id, granularity, bucket_start, coalesce(cost_unit, '')
     ),
     counted AS (
       INSERT INTO usage_counters AS c (project_id, scope, scope_id, granularity, bucket_start, cost_unit,
                                        input_tokens, output_tokens, cost_micros, unpriced_events, events)
       SELECT $2, scope, scope_id, granularity, bucket_start, cost_unit, input_tokens, output_tokens, cost_micros, unpriced_events, events
         FROM deltas
        WHERE (input_tokens, output_tokens, cost_micros, unpriced_events, events) <> (0, 0, 0, 0, 0)
        ORDER BY scope, scope_id, granularity, bucket_start, cost_unit
       ON CONFLICT (project_id, scope, scope_id, granularity, bucket_start, cost_unit) DO UPDATE
          SET input_tokens = c.input_tokens + excluded.input_tokens,
              output_tokens = c.output_tokens + excluded.output_tokens,
              cost_micros = c.cost_micros + excluded.cost_micros,
              unpriced_events = c.unpriced_events + excluded.unpriced_events,
              events = c.events + excluded.events
       RETURNING 1
     )
     SELECT event_id, position::text AS position FROM stored`,
    JSON.stringify(corrections.map(toRecord)),
    projectId,
  );
  return new Map(rows.map((r) => [r.event_id, r.position]));
}

/** Serializes a project's reprices (transaction-level; the two-key form, apart from the guard's one-key scope locks). */
export async function lockProjectReprices(tx: Sql, projectId: string): Promise<void> {
  await tx.query(`SELECT pg_advisory_xact_lock(${REPRICE_LOCK_CLASS}, hashtext($1::text))`, projectId);
}

const REPRICE_LOCK_CLASS = 7_370_001;
