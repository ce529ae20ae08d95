/**
 * The budget scopes, and for each the step context field that carries its id and the `events`
 * column that stores it: the one table every layer reads (guard, ingest, metrics, processors).
 *
 * The run is the trace: its id is `traceId` (column `trace_id`), and `runId` (column `run_id`)
 * stands in when a step has no trace id; a step's events count under both.
 *
 * Imports nothing: @tollgate/processors compiles this file in and loads it without zod
 * (libs/processors/scripts/build.mjs fails a build whose processors load zod).
 */
export const SCOPES = ['run', 'thread', 'resource', 'user', 'organization', 'session'] as const;
export type Scope = (typeof SCOPES)[number];

export const SCOPE_TABLE = {
  run: { field: 'traceId', column: 'trace_id' },
  thread: { field: 'threadId', column: 'thread_id' },
  resource: { field: 'resourceId', column: 'resource_id' },
  user: { field: 'userId', column: 'user_id' },
  organization: { field: 'organizationId', column: 'organization_id' },
  session: { field: 'sessionId', column: 'session_id' },
} as const satisfies Record<Scope, { field: string; column: string }>;

/** The run's second id: a step's events count under its trace and under its run id. */
export const RUN_ID = { field: 'runId', column: 'run_id' } as const;

/** The scopes budgeted in rolling windows (hour and day counters); a run is bounded by itself. */
export const WINDOWED_SCOPES = SCOPES.filter((s): s is Exclude<Scope, 'run'> => s !== 'run');

/** A context field that carries a scope id. */
export type ScopeField = (typeof SCOPE_TABLE)[Scope]['field'] | typeof RUN_ID.field;

/** The id of a scope in a step's ids, or undefined when the step does not carry it (the run: the trace, else the run id). */
export function scopeIdIn(ids: { readonly [F in ScopeField]?: string }, scope: Scope): string | undefined {
  return scope === 'run' ? (ids.traceId ?? ids.runId) : ids[SCOPE_TABLE[scope].field];
}
