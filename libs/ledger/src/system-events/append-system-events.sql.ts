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

/** A system event's record (see {@link eventRecord}) as `jsonb_to_recordset` reads it. */
const EVENT_RECORD_COLUMNS = `event_id text, type text, occurred_at timestamptz, trace_id text, run_id text, thread_id text,
         resource_id text, user_id text, organization_id text, session_id text, entity_type text, entity_name text,
         reservation_id text, data jsonb`;

/** The event records in the jsonb parameter `param`, as rows. */
export const eventRecordsSql = (param: string) =>
  `SELECT * FROM jsonb_to_recordset(${param}::jsonb) AS x(${EVENT_RECORD_COLUMNS})`;

/** Claims the ids of the event records of `source` in `event_ids` (project `project`); returns the ids claimed. */
export const claimEventIdsSql = (
  source: string,
  project: string,
) => `INSERT INTO event_ids (project_id, event_id, occurred_at)
       SELECT ${project}, event_id, occurred_at FROM ${source} ORDER BY event_id
       ON CONFLICT DO NOTHING
       RETURNING event_id`;

/** Appends to the log the event records of `source` whose ids `claimed` holds (an id already in the log is skipped). */
export const logClaimedEventsSql = (
  source: string,
  claimed: string,
  project: string,
) => `INSERT INTO events (project_id, event_id, type, occurred_at, trace_id, run_id, thread_id, resource_id, user_id, organization_id,
                         session_id, entity_type, entity_name, reservation_id, data)
     SELECT ${project}, k.event_id, k.type, k.occurred_at, k.trace_id, k.run_id, k.thread_id, k.resource_id, k.user_id, k.organization_id,
            k.session_id, k.entity_type, k.entity_name, k.reservation_id, k.data
       FROM ${source} k JOIN ${claimed} USING (event_id)`;

const APPEND_SQL = `WITH input AS (${eventRecordsSql('$1')}),
     claimed AS (${claimEventIdsSql('input', '$2')})
     ${logClaimedEventsSql('input', 'claimed', '$2')}
     RETURNING event_id`;

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
  const rows = await db.query<{ event_id: string }>(APPEND_SQL, JSON.stringify(events.map(eventRecord)), projectId);
  return new Set(rows.map((r) => r.event_id));
}
