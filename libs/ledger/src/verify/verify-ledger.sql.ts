import { RUN_ID, SCOPE_TABLE, WINDOWED_SCOPES } from '@tollgate/contracts';
import type { Sql } from '@tollgate/database';
import { LATEST_COST_SQL } from '../reprice/step-costs.sql';

/** Where the guard's derived state and what the log (and the rows it derives from) give part ways. */
export interface LedgerDifference {
  project: string;
  table: 'usage_counters' | 'reservation_hold_totals' | 'reservation_holds' | 'reservations' | 'events';
  key: Record<string, string | number>;
  /** null: no such row (or no such events). */
  stored: Record<string, unknown> | null;
  /** null: there should be no such row. */
  expected: Record<string, unknown> | null;
  issue: string;
}

/** `$1` is the project, or null for every project. */
const ofProject = (alias: string) => `($1::text IS NULL OR ${alias}.project_id = $1::text)`;

/** A timestamp as JavaScript's toISOString writes it, whatever the session's time zone. */
const iso = (col: string) => `to_char(${col} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/**
 * The first instant the log still holds. Retention drops whole months of it, and with them the
 * hour and day counters before that month (retention.ts); a month being detached is unreadable
 * already, so it does not count.
 */
const HORIZON = `horizon AS (
  SELECT coalesce(min(make_timestamptz(m[1]::int, m[2]::int, 1, 0, 0, 0, 'UTC')), '-infinity'::timestamptz) AS at
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
   CROSS JOIN LATERAL regexp_match(c.relname, '^events_([0-9]{4})_([0-9]{2})$') AS m
   WHERE i.inhparent = 'events'::regclass AND NOT i.inhdetachpending
)`;

const WINDOWED_IDS = WINDOWED_SCOPES.map((s) => `('${s}', s.${SCOPE_TABLE[s].column})`).join(', ');

/**
 * Every step at its latest cost (its own, or its last StepRepriced's): ingest counted it at its
 * own cost and each reprice moved it by new − old, which adds up to counting it once at the
 * latest. Filed in the same buckets as ingest files it: hour and day per windowed scope, and the
 * run's total under the trace id and the run id (once when they are equal).
 */
const EXPECTED_COUNTERS = `steps AS (
  SELECT s.project_id, s.occurred_at, ${WINDOWED_SCOPES.map((sc) => `s.${SCOPE_TABLE[sc].column}`).join(', ')},
         s.${SCOPE_TABLE.run.column}, s.${RUN_ID.column}, s.input_tokens, s.output_tokens,
         coalesce(l.cost_unit, '') AS cost_unit, l.cost_micros, l.unpriced
    FROM events s ${LATEST_COST_SQL}
   WHERE s.type = 'StepUsageRecorded' AND ${ofProject('s')}
),
filed AS (
  SELECT s.project_id, k.scope, k.scope_id, g.granularity,
         date_trunc(CASE g.granularity WHEN 'h' THEN 'hour' ELSE 'day' END, s.occurred_at, 'UTC') AS bucket_start,
         s.cost_unit, s.input_tokens, s.output_tokens, s.cost_micros, s.unpriced, s.occurred_at
    FROM steps s
   CROSS JOIN LATERAL (VALUES ${WINDOWED_IDS}) AS k(scope, scope_id)
   CROSS JOIN (VALUES ('h'::"char"), ('d'::"char")) AS g(granularity)
   WHERE k.scope_id IS NOT NULL
  UNION ALL
  SELECT s.project_id, 'run', r.id, 'r'::"char", 'epoch'::timestamptz,
         s.cost_unit, s.input_tokens, s.output_tokens, s.cost_micros, s.unpriced, s.occurred_at
    FROM steps s
   CROSS JOIN LATERAL (SELECT s.${SCOPE_TABLE.run.column} UNION SELECT s.${RUN_ID.column}) AS r(id)
   WHERE r.id IS NOT NULL
),
expected_counters AS (
  SELECT project_id, scope, scope_id, granularity, bucket_start, cost_unit,
         sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens, coalesce(sum(cost_micros), 0) AS cost_micros,
         count(*) FILTER (WHERE unpriced) AS unpriced_events, count(*) AS events, min(occurred_at) AS first_step
    FROM filed
   GROUP BY project_id, scope, scope_id, granularity, bucket_start, cost_unit
)`;

const counterValues = (a: string) =>
  `json_build_object('inputTokens', ${a}.input_tokens, 'outputTokens', ${a}.output_tokens, 'costMicros', ${a}.cost_micros,
                      'unpricedEvents', ${a}.unpriced_events, 'events', ${a}.events)`;
const counterTuple = (a: string) =>
  ['input_tokens', 'output_tokens', 'cost_micros', 'unpriced_events', 'events']
    .map((c) => `coalesce(${a}.${c}, 0)`)
    .join(', ');

/**
 * A run's total outlives retention (a run's budget counts all of it), so in a project older than
 * the log's horizon a run whose first step left in the log is in the horizon's month, or that has
 * none left, may have lost earlier steps: its total is not compared. Hour and day buckets are
 * compared from the horizon on, as retention keeps them.
 */
const COUNTER_DIFFS = `counter_diffs AS (
  SELECT x.project_id, 'usage_counters' AS tbl,
         json_build_object('scope', x.scope, 'scopeId', x.scope_id, 'granularity', x.granularity::text,
                            'bucketStart', ${iso('x.bucket_start')}, 'costUnit', x.cost_unit) AS key,
         CASE WHEN x.stored THEN ${counterValues('(x.c)')} END AS stored,
         CASE WHEN x.expected THEN ${counterValues('(x.e)')} END AS expected,
         CASE WHEN NOT x.stored THEN 'counter missing' WHEN NOT x.expected THEN 'counter without steps in the log'
              ELSE 'counter differs from the log' END AS issue
    FROM (SELECT project_id, scope, scope_id, granularity, bucket_start, cost_unit, c, e,
                 c.project_id IS NOT NULL AS stored, e.project_id IS NOT NULL AS expected
            FROM (SELECT * FROM usage_counters c WHERE ${ofProject('c')}) c
            FULL JOIN expected_counters e USING (project_id, scope, scope_id, granularity, bucket_start, cost_unit)) x
    LEFT JOIN projects p ON p.id = x.project_id
   WHERE (${counterTuple('(x.c)')}) IS DISTINCT FROM (${counterTuple('(x.e)')})
     AND CASE WHEN x.granularity = 'r'
              THEN coalesce(p.created_at >= (SELECT at FROM horizon), true)
                   OR (x.e).first_step >= (SELECT at FROM horizon) + interval '1 month'
              ELSE x.bucket_start >= (SELECT at FROM horizon) END
)`;

const holdValues = (a: string, holds: string) =>
  `json_build_object('holds', ${holds}, 'costMicros', ${a}.cost_micros, 'inputTokens', ${a}.input_tokens, 'outputTokens', ${a}.output_tokens)`;

/** Every statement that adds or takes holds moves the totals by the same rows (hold-totals.sql.ts). */
const HOLD_TOTAL_DIFFS = `expected_totals AS (
  SELECT project_id, scope_key, cost_unit, count(*) AS holds, sum(cost_micros) AS cost_micros,
         sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens
    FROM reservation_holds h WHERE ${ofProject('h')}
   GROUP BY project_id, scope_key, cost_unit
),
total_diffs AS (
  SELECT project_id, 'reservation_hold_totals' AS tbl, json_build_object('scopeKey', scope_key, 'costUnit', cost_unit) AS key,
         CASE WHEN t.project_id IS NOT NULL THEN ${holdValues('t', 't.holds')} END AS stored,
         CASE WHEN e.project_id IS NOT NULL THEN ${holdValues('e', 'e.holds')} END AS expected,
         CASE WHEN t.project_id IS NULL THEN 'hold total missing' ELSE 'hold total differs from its holds' END AS issue
    FROM (SELECT * FROM reservation_hold_totals t WHERE ${ofProject('t')}) t
    FULL JOIN expected_totals e USING (project_id, scope_key, cost_unit)
   WHERE (coalesce(t.holds, 0), coalesce(t.cost_micros, 0), coalesce(t.input_tokens, 0), coalesce(t.output_tokens, 0))
         IS DISTINCT FROM (coalesce(e.holds, 0), coalesce(e.cost_micros, 0), coalesce(e.input_tokens, 0), coalesce(e.output_tokens, 0))
)`;

const heldValues = (a: string, holds: string, expires: string) =>
  `json_build_object('holds', ${holds}, 'expiresAt', ${iso(expires)}, 'costMicros', ${a}.cost_micros, 'costUnit', ${a}.cost_unit,
                      'inputTokens', ${a}.input_tokens, 'outputTokens', ${a}.output_tokens)`;

/**
 * One hold per scope key of each open reservation, with its expiry and amounts. The guard takes
 * out the holds of a scope once they expired (guard-batch.sql.ts) before the sweeper lapses their
 * reservation, so an open reservation past its expiry may have lost some or all of them.
 */
const HOLD_DIFFS = `wanted AS (
  SELECT DISTINCT r.project_id, r.id AS reservation_id, k.scope_key, r.expires_at, r.cost_micros, r.cost_unit, r.input_tokens, r.output_tokens
    FROM reservations r CROSS JOIN LATERAL unnest(r.scope_keys) AS k(scope_key)
   WHERE r.status = 'open' AND ${ofProject('r')}
),
held AS (
  SELECT project_id, reservation_id, scope_key, count(*) AS holds, min(expires_at) AS expires_at, max(expires_at) AS last_expiry,
         sum(cost_micros) AS cost_micros, min(cost_unit) AS cost_unit, max(cost_unit) AS last_unit,
         sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens
    FROM reservation_holds h WHERE ${ofProject('h')}
   GROUP BY project_id, reservation_id, scope_key
),
hold_diffs AS (
  SELECT x.project_id, 'reservation_holds' AS tbl, json_build_object('reservationId', x.reservation_id, 'scopeKey', x.scope_key) AS key,
         CASE WHEN (x.h).holds IS NOT NULL THEN ${heldValues('(x.h)', '(x.h).holds', '(x.h).expires_at')} END AS stored,
         CASE WHEN (x.w).reservation_id IS NOT NULL THEN ${heldValues('(x.w)', '1', '(x.w).expires_at')} END AS expected,
         CASE WHEN (x.w).reservation_id IS NULL THEN
                CASE WHEN r.status IS NULL THEN 'hold of a reservation that does not exist'
                     WHEN r.status = 'open' THEN 'hold on a scope its reservation does not name'
                     ELSE 'hold of a ' || r.status || ' reservation' END
              WHEN (x.h).holds IS NULL THEN 'open reservation without its hold'
              ELSE 'hold differs from its reservation' END AS issue
    FROM (SELECT project_id, reservation_id, scope_key, w, h FROM wanted w FULL JOIN held h USING (project_id, reservation_id, scope_key)) x
    LEFT JOIN reservations r ON r.project_id = x.project_id AND r.id = x.reservation_id
   WHERE CASE WHEN (x.w).reservation_id IS NULL THEN true
              WHEN (x.h).holds IS NULL THEN (x.w).expires_at > now()
              ELSE ((x.h).holds, (x.h).expires_at, (x.h).last_expiry, (x.h).cost_micros, (x.h).cost_unit, (x.h).last_unit,
                    (x.h).input_tokens, (x.h).output_tokens)
                   IS DISTINCT FROM (1, (x.w).expires_at, (x.w).expires_at, (x.w).cost_micros, (x.w).cost_unit, (x.w).cost_unit,
                    (x.w).input_tokens, (x.w).output_tokens) END
)`;

/**
 * Each reservation has its BudgetReserved event (the guard writes it with the reservation, in
 * the same statement) and at most one closing event, which says its status: ReservationSettled
 * ('settled') or ReservationReleased (its reason: 'released' or 'lapsed'); none while open. Events
 * older than the log's horizon are gone, so the reservations of those months are not asked for them.
 */
const RESERVATION_DIFFS = `logged AS (
  SELECT project_id, reservation_id AS id, count(*) FILTER (WHERE type = 'BudgetReserved') AS reserved,
         coalesce(array_agg(CASE type WHEN 'ReservationSettled' THEN 'settled' ELSE coalesce(data ->> 'reason', '?') END ORDER BY position)
                    FILTER (WHERE type <> 'BudgetReserved'), '{}') AS closings
    FROM events e
   WHERE type IN ('BudgetReserved', 'ReservationSettled', 'ReservationReleased') AND reservation_id IS NOT NULL AND ${ofProject('e')}
   GROUP BY project_id, reservation_id
),
lives AS (
  SELECT project_id, id, r.status, r.created_at >= (SELECT at FROM horizon) AS reserved_in_log,
         coalesce(r.closed_at >= (SELECT at FROM horizon), true) AS closed_in_log,
         coalesce(l.reserved, 0) AS reserved, coalesce(l.closings, '{}') AS closings
    FROM (SELECT * FROM reservations r WHERE ${ofProject('r')}) r FULL JOIN logged l USING (project_id, id)
),
reservation_diffs AS (
  SELECT project_id, 'events' AS tbl, json_build_object('reservationId', id, 'type', 'BudgetReserved') AS key,
         json_build_object('events', reserved) AS stored, json_build_object('events', 1) AS expected,
         CASE reserved WHEN 0 THEN 'reservation without its BudgetReserved event' ELSE 'BudgetReserved logged more than once' END AS issue
    FROM lives WHERE status IS NOT NULL AND reserved_in_log AND reserved <> 1
  UNION ALL
  SELECT project_id, 'events', json_build_object('reservationId', id, 'type', 'ReservationSettled|ReservationReleased'),
         json_build_object('events', cardinality(closings), 'closedAs', to_json(closings)),
         json_build_object('events', CASE WHEN status = 'open' THEN 0 ELSE 1 END), 'reservation closed more than once in the log'
    FROM lives WHERE cardinality(closings) > 1
  UNION ALL
  SELECT project_id, 'reservations', json_build_object('id', id),
         CASE WHEN status IS NOT NULL THEN json_build_object('status', status) END,
         json_build_object('status', coalesce(closings[1], 'open')),
         CASE WHEN status IS NULL THEN 'the log names a reservation that does not exist' ELSE 'status disagrees with the log' END
    FROM lives
   WHERE cardinality(closings) <= 1 AND status IS DISTINCT FROM coalesce(closings[1], 'open')
     AND (cardinality(closings) = 1 OR closed_in_log)
)`;

const VERIFY_SQL = `WITH ${HORIZON}, ${EXPECTED_COUNTERS}, ${COUNTER_DIFFS}, ${HOLD_TOTAL_DIFFS}, ${HOLD_DIFFS}, ${RESERVATION_DIFFS}
SELECT project_id AS project, tbl AS "table", key, stored, expected, issue
  FROM (SELECT * FROM counter_diffs UNION ALL SELECT * FROM total_diffs UNION ALL SELECT * FROM hold_diffs
        UNION ALL SELECT * FROM reservation_diffs) d
 ORDER BY project_id, tbl, key::text`;

/**
 * Recomputes, in one statement (so from one snapshot, while ingest and the guard go on), what the
 * guard's derived state must be — the usage counters from the step events and their corrections,
 * the hold totals from the holds, the holds from the open reservations, each reservation's status
 * from its events — and returns every difference from what is stored, for one project or all.
 */
export async function verifyLedger(db: Sql, projectId?: string): Promise<LedgerDifference[]> {
  return db.query<LedgerDifference>(VERIFY_SQL, projectId ?? null);
}
