import type { Sql } from '@tollgate/database';
import type { SystemEvent } from '../events';

/** A system event as a row of the log. */
export function eventRecord(e: SystemEvent) {
  return {
    event_id: e.eventId,
    type: e.type,
    occurred_at: e.occurredAt.toISOString(),
    trace_id: e.scopes?.traceId ?? null,
    run_id: e.scopes?.runId ?? null,
    thread_id: e.scopes?.threadId ?? null,
    resource_id: e.scopes?.resourceId ?? null,
    user_id: e.scopes?.userId ?? null,
    organization_id: e.scopes?.organizationId ?? null,
    session_id: e.scopes?.sessionId ?? null,
    entity_type: e.scopes?.entityType ?? null,
    entity_name: e.scopes?.entityName ?? null,
    reservation_id: e.reservationId ?? null,
    data: e.data,
  };
}

/**
 * Appends service events with the same idempotency claim as step events: an event id already in
 * the log is skipped, so settling or releasing twice writes one event. Returns the ids written.
 */
export async function appendSystemEvents(
  db: Sql,
  projectId: string,
  events: readonly SystemEvent[],
): Promise<Set<string>> {
  if (!events.length) return new Set();
  const records = events.map(eventRecord);
  const rows = await db.query<{ event_id: string }>(
    `WITH input AS (
       SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(event_id text, type text, occurred_at timestamptz, trace_id text, run_id text,
         thread_id text, resource_id text, user_id text, organization_id text, session_id text, entity_type text, entity_name text,
         reservation_id text, data jsonb)
     ),
     claimed AS (
       INSERT INTO event_ids (project_id, event_id, occurred_at)
       SELECT $2, event_id, occurred_at FROM input ORDER BY event_id
       ON CONFLICT DO NOTHING
       RETURNING event_id
     )
     INSERT INTO events (project_id, event_id, type, occurred_at, trace_id, run_id, thread_id, resource_id, user_id, organization_id,
                         session_id, entity_type, entity_name, reservation_id, data)
     SELECT $2, i.event_id, i.type, i.occurred_at, i.trace_id, i.run_id, i.thread_id, i.resource_id, i.user_id, i.organization_id,
            i.session_id, i.entity_type, i.entity_name, i.reservation_id, i.data
       FROM input i JOIN claimed USING (event_id)
     RETURNING event_id`,
    JSON.stringify(records),
    projectId,
  );
  return new Set(rows.map((r) => r.event_id));
}
