import { timestampText, type Sql } from '@tollgate/database';
import { heldColumns, holdTotalsSql } from './hold-totals.sql';

export interface ClosedReservation {
  id: string;
  status: 'open' | 'settled' | 'released' | 'lapsed';
  closedAt: string | null;
}

/**
 * Closes open reservations (`released` by a caller, `lapsed` at expiry) and logs one
 * `ReservationReleased` event each, in one statement. Closing twice changes nothing. Expired
 * ones are those of `expiredBefore`, after `expiredAfter` when given (where a sweep stopped).
 */
export async function closeReservations(
  db: Sql,
  where: { projectId: string; id: string } | { expiredBefore: Date; expiredAfter?: Date },
  status: 'released' | 'lapsed',
): Promise<{ id: string; project_id: string }[]> {
  const filter = 'id' in where ? 'project_id = $2 AND id = $3' : 'expires_at <= $2 AND expires_at > $3';
  // A sweep skips the reservations another transaction holds (a settlement, a release closing
  // them, whose own holds it takes out) rather than waiting on them in expiry order while holding
  // others: every writer takes reservations in id order. A release by hand waits for its one row.
  const skip = 'id' in where ? '' : 'SKIP LOCKED';
  const params =
    'id' in where
      ? [where.projectId, where.id]
      : [where.expiredBefore, timestampText(where.expiredAfter?.getTime() ?? -Infinity)];
  return db.query<{ id: string; project_id: string }>(
    `WITH closing AS (
       SELECT ctid AS tid FROM reservations WHERE status = 'open' AND ${filter}
        ORDER BY project_id, id FOR UPDATE ${skip}
     ),
     closed AS (
       UPDATE reservations r SET status = $1, closed_at = now()
         FROM closing c
        WHERE r.ctid = c.tid AND r.status = 'open'
       RETURNING r.id, r.project_id, r.scope_keys, r.expires_at, r.cost_micros, r.input_tokens, r.output_tokens
     ),
     unheld AS (
       DELETE FROM reservation_holds h USING (SELECT project_id, id, expires_at, unnest(scope_keys) AS scope_key FROM closed) x
        WHERE h.project_id = x.project_id AND h.scope_key = x.scope_key AND h.expires_at = x.expires_at AND h.reservation_id = x.id
       RETURNING ${heldColumns('h')}
     ),
     unheld_totals AS (${holdTotalsSql([['unheld', -1]])}),
     -- A reservation is closed once (the UPDATE takes open ones only), so its event's id, in the
     -- system's own namespace, is new: claimed, and logged without joining the claims (a join of
     -- two CTEs, estimated at one row each, ran as a nested loop: quadratic in a sweep of 30,000).
     claimed AS (
       INSERT INTO event_ids (project_id, event_id, occurred_at)
       SELECT project_id, 'tg:reservation:' || id || ':released', now() FROM closed ORDER BY project_id, id
       ON CONFLICT DO NOTHING
     ),
     logged AS (
       INSERT INTO events (project_id, event_id, type, occurred_at, reservation_id, data)
       SELECT c.project_id, 'tg:reservation:' || c.id || ':released', 'ReservationReleased', now(), c.id,
              jsonb_build_object('reason', $1::text, 'costMicros', c.cost_micros, 'inputTokens', c.input_tokens, 'outputTokens', c.output_tokens)
         FROM closed c
       RETURNING 1
     )
     SELECT id, project_id FROM closed`,
    status,
    ...params,
  );
}

export async function readReservation(db: Sql, projectId: string, id: string): Promise<ClosedReservation | null> {
  const [row] = await db.query<{
    id: string;
    status: ClosedReservation['status'];
    closed_at: Date | null;
    expires_at: Date;
  }>('SELECT id, status, closed_at, expires_at FROM reservations WHERE project_id = $1 AND id = $2', projectId, id);
  if (!row) return null;
  // An open reservation past its expiry no longer holds budget, whether or not the sweeper ran.
  const status = row.status === 'open' && row.expires_at.getTime() <= Date.now() ? 'lapsed' : row.status;
  return { id: row.id, status, closedAt: row.closed_at?.toISOString() ?? null };
}

/** The scope ids each named reservation was made for (a settling step event must carry them). */
export async function readReservationContexts(
  db: Sql,
  projectId: string,
  ids: readonly string[],
): Promise<Map<string, string[]>> {
  if (!ids.length) return new Map();
  const rows = await db.query<{ id: string; context_keys: string[] }>(
    'SELECT id, context_keys FROM reservations WHERE project_id = $1 AND id = ANY($2::text[])',
    projectId,
    ids,
  );
  return new Map(rows.map((r) => [r.id, r.context_keys]));
}
