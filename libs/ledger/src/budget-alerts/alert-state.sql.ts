import { sqlLiteral, type Sql, type TxSql } from '@tollgate/database';
import type { GuardFinding, LimitType, Window } from '@tollgate/contracts';
import {
  claimEventIdsSql,
  eventRecord,
  eventRecordsSql,
  logClaimedEventsSql,
} from '../system-events/append-system-events.sql';
import { scopeLockId } from '../scope-usage/scope-lock';
import type { BudgetExhausted, BudgetThresholdCrossed } from '../events';
import { alertEventPrefix, alertScopes, stateKey, type AlertKind, type AlertState } from './alert-decision';

/**
 * The alert lock of a scope: not the guard's scope lock (a commit must not wait for a guard
 * batch), but one every commit that alerts on the scope takes, so such commits are decided one
 * after the other and each reads the usage the ones before it committed.
 */
export const alertLockId = (projectId: string, scopeKey: string) => scopeLockId(projectId, `alert\u001f${scopeKey}`);

/**
 * Statements sent with BEGIN (one round trip): the scopes' alert locks, sorted, then the stored
 * alert states of every scope key the commit touches (its last statement, read once the locks
 * are held).
 */
export function alertOpeningStatements(
  projectId: string,
  lockKeys: readonly string[],
  scopeKeys: readonly string[],
): string[] {
  const ids = [...new Set(lockKeys.map((k) => alertLockId(projectId, k)))].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const keys = scopeKeys.length ? scopeKeys.map(sqlLiteral).join(', ') : 'NULL';
  return [
    ...(ids.length ? [`SELECT ${ids.map((id) => `pg_advisory_xact_lock(${id})`).join(', ')}`] : []),
    `SELECT scope_key, "window", source, limit_type, kind, threshold, limit_value::text AS limit_value, unit, hysteresis, fired, fired_count
       FROM budget_alert_states WHERE project_id = ${sqlLiteral(projectId)} AND scope_key IN (${keys})`,
  ];
}

/** The rows of {@link alertOpeningStatements}' last statement. */
export function statesOf(rows: readonly Record<string, unknown>[]): AlertState[] {
  return rows.map((r) => ({
    scopeKey: String(r.scope_key),
    window: r.window === '' ? null : (r.window as Window),
    source: String(r.source),
    limitType: r.limit_type as LimitType,
    kind: r.kind as AlertKind,
    threshold: Number(r.threshold),
    limit: Number(r.limit_value),
    unit: String(r.unit),
    hysteresis: Number(r.hysteresis),
    fired: Boolean(r.fired),
    firedCount: Number(r.fired_count),
  }));
}

/**
 * Stored states replace the defaults of the same alert. A policy's threshold that is no longer
 * among its alerts (changed, or the policy deleted) is left out: it must not fire again. An
 * exhausted budget's state stays until it re-arms.
 */
export function mergeStates(defaults: readonly AlertState[], stored: readonly AlertState[]): AlertState[] {
  const byKey = new Map(defaults.map((s) => [stateKey(s), s]));
  for (const s of stored) {
    const d = byKey.get(stateKey(s));
    if (!d && s.kind === 'threshold' && s.source.startsWith('policy:')) continue;
    // A policy's limit or hysteresis may have changed since: today's apply, the state is kept.
    byKey.set(stateKey(s), d ? { ...d, fired: s.fired, firedCount: s.firedCount } : s);
  }
  return [...byKey.values()];
}

const STATE_COLUMNS = `scope_key text, "window" text, source text, limit_type text, kind text, threshold float8, limit_value bigint, unit text,
  hysteresis float8, fired boolean, fired_count int`;

const stateRecord = (s: AlertState, now: Date) => ({
  scope_key: s.scopeKey,
  window: s.window ?? '',
  source: s.source,
  limit_type: s.limitType,
  kind: s.kind,
  threshold: s.threshold,
  limit_value: Math.round(s.limit),
  unit: s.unit,
  hysteresis: s.hysteresis,
  fired: s.fired,
  fired_count: s.firedCount,
  fired_at: s.fired ? now.toISOString() : null,
});

const ALERT_OUTCOME_SQL = `WITH sin AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(${STATE_COLUMNS}, fired_at timestamptz)),
     stored AS (
       INSERT INTO budget_alert_states AS s (project_id, scope_key, "window", source, limit_type, kind, threshold, limit_value, unit, hysteresis, fired, fired_count, fired_at)
       SELECT $2, scope_key, "window", source, limit_type, kind, threshold, limit_value, unit, hysteresis, fired, fired_count, fired_at
         FROM sin ORDER BY scope_key, "window", source, limit_type, kind, threshold
       ON CONFLICT (project_id, scope_key, "window", source, limit_type, kind, threshold) DO UPDATE
          SET fired = excluded.fired, fired_count = excluded.fired_count, fired_at = coalesce(excluded.fired_at, s.fired_at),
              limit_value = excluded.limit_value, unit = excluded.unit, hysteresis = excluded.hysteresis, updated_at = now()
       RETURNING 1
     ),
     ein AS (${eventRecordsSql('$3')}),
     claimed AS (${claimEventIdsSql('ein', '$2')})
     ${logClaimedEventsSql('ein', 'claimed', '$2')}
     RETURNING event_id`;

/**
 * Stores the states that changed and appends the alerts, sent with COMMIT (one round trip).
 * Returns the ids of the events written.
 */
export async function commitAlertOutcome(
  tx: TxSql,
  projectId: string,
  changed: readonly AlertState[],
  events: readonly BudgetThresholdCrossed[],
  now: Date,
): Promise<string[]> {
  const params = [
    JSON.stringify(changed.map((s) => stateRecord(s, now))),
    projectId,
    JSON.stringify(events.map(eventRecord)),
  ];
  const rows = await tx.commitWith<{ event_id: string }>({ text: ALERT_OUTCOME_SQL, params });
  return rows.map((r) => r.event_id);
}

/** {@link commitAlertOutcome} inside a transaction that goes on (a reprice's batch). */
export async function writeAlertOutcome(
  tx: Sql,
  projectId: string,
  changed: readonly AlertState[],
  events: readonly BudgetThresholdCrossed[],
  now: Date,
): Promise<string[]> {
  const rows = await tx.query<{ event_id: string }>(
    ALERT_OUTCOME_SQL,
    JSON.stringify(changed.map((s) => stateRecord(s, now))),
    projectId,
    JSON.stringify(events.map(eventRecord)),
  );
  return rows.map((r) => r.event_id);
}

/** A hard limit's denial, to alert once (see {@link fireExhausted}). */
export interface Exhaustion {
  finding: GuardFinding;
  hysteresis: number;
  stepId: string | null;
}

const exhaustedState = (f: GuardFinding, hysteresis: number): AlertState => ({
  scopeKey: f.scopeKey,
  window: f.window,
  source: f.source,
  limitType: f.limitType,
  kind: 'exhausted',
  threshold: 100,
  limit: f.limitType === 'cost' ? Math.round(f.limit * 1e6) : f.limit,
  unit: f.unit,
  hysteresis,
  fired: true,
  firedCount: 0,
});

/**
 * Appends one `BudgetExhausted` per budget a denial names whose state is not fired yet, and marks
 * it fired, in one statement: the conditional upsert (`WHERE NOT fired`) lets one of any number
 * of concurrent denials through — the others wait on its row and then find it fired. A fired
 * state re-arms once a commit finds the budget's usage back below 100 − hysteresis percent.
 */
export async function fireExhausted(
  db: Sql,
  projectId: string,
  exhaustions: readonly Exhaustion[],
  now: Date,
): Promise<string[]> {
  const seen = new Set<string>();
  const rows: Record<string, unknown>[] = [];
  for (const { finding: f, hysteresis, stepId } of exhaustions) {
    const s = exhaustedState(f, hysteresis);
    if (seen.has(stateKey(s))) continue;
    seen.add(stateKey(s));
    const event: BudgetExhausted = {
      type: 'BudgetExhausted',
      eventId: alertEventPrefix(s),
      occurredAt: now,
      scopes: alertScopes(f.scopeKey),
      data: {
        scope: f.scope,
        scopeKey: f.scopeKey,
        window: f.window,
        source: f.source,
        limitType: f.limitType,
        usage: f.usage,
        limit: f.limit,
        unit: f.unit,
        stepId,
        sequence: 0,
      },
    };
    rows.push({ ...stateRecord(s, now), event: eventRecord(event) });
  }
  if (!rows.length) return [];
  const written = await db.query<{ event_id: string }>(
    `WITH sin AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(${STATE_COLUMNS}, fired_at timestamptz, event jsonb)),
     fired AS (
       INSERT INTO budget_alert_states AS s (project_id, scope_key, "window", source, limit_type, kind, threshold, limit_value, unit, hysteresis, fired, fired_count, fired_at)
       SELECT $2, scope_key, "window", source, limit_type, kind, threshold, limit_value, unit, hysteresis, true, 1, fired_at
         FROM sin ORDER BY scope_key, "window", source, limit_type, kind, threshold
       ON CONFLICT (project_id, scope_key, "window", source, limit_type, kind, threshold) DO UPDATE
          SET fired = true, fired_count = s.fired_count + 1, fired_at = excluded.fired_at, limit_value = excluded.limit_value,
              unit = excluded.unit, hysteresis = excluded.hysteresis, updated_at = now()
        WHERE NOT s.fired
       RETURNING scope_key, "window", source, limit_type, kind, threshold, fired_count
     ),
     ein AS (
       SELECT (sin.event->>'event_id') || f.fired_count AS event_id, sin.event, f.fired_count
         FROM sin JOIN fired f USING (scope_key, "window", source, limit_type, kind, threshold)
     ),
     claimed AS (
       INSERT INTO event_ids (project_id, event_id, occurred_at)
       SELECT $2, event_id, (event->>'occurred_at')::timestamptz FROM ein ORDER BY event_id
       ON CONFLICT DO NOTHING
       RETURNING event_id
     )
     INSERT INTO events (project_id, event_id, type, occurred_at, trace_id, thread_id, resource_id, user_id, organization_id, session_id, data)
     SELECT $2, e.event_id, 'BudgetExhausted', (e.event->>'occurred_at')::timestamptz, e.event->>'trace_id', e.event->>'thread_id', e.event->>'resource_id',
            e.event->>'user_id', e.event->>'organization_id', e.event->>'session_id', (e.event->'data') || jsonb_build_object('sequence', e.fired_count)
       FROM ein e JOIN claimed USING (event_id)
     RETURNING event_id`,
    JSON.stringify(rows),
    projectId,
  );
  return written.map((r) => r.event_id);
}

/**
 * Registers the thresholds of a check's request limits as armed alert states (a commit knows no
 * request: it alerts on the states it finds). One state per scope, window, limit type and
 * threshold: the last request's limit and hysteresis apply. Returns how many rows changed.
 */
export async function registerRequestAlerts(
  db: Sql,
  projectId: string,
  states: readonly AlertState[],
): Promise<number> {
  if (!states.length) return 0;
  const rows = await db.query<{ n: number }>(
    `WITH sin AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(${STATE_COLUMNS}, fired_at timestamptz)),
     up AS (
       INSERT INTO budget_alert_states AS s (project_id, scope_key, "window", source, limit_type, kind, threshold, limit_value, unit, hysteresis, fired, fired_count)
       SELECT $2, scope_key, "window", source, limit_type, kind, threshold, limit_value, unit, hysteresis, false, 0
         FROM sin ORDER BY scope_key, "window", source, limit_type, kind, threshold
       ON CONFLICT (project_id, scope_key, "window", source, limit_type, kind, threshold) DO UPDATE
          SET limit_value = excluded.limit_value, unit = excluded.unit, hysteresis = excluded.hysteresis, updated_at = now()
        WHERE (s.limit_value, s.unit, s.hysteresis) IS DISTINCT FROM (excluded.limit_value, excluded.unit, excluded.hysteresis)
       RETURNING 1
     )
     SELECT count(*)::int AS n FROM up`,
    JSON.stringify(states.map((st) => stateRecord(st, new Date(0)))),
    projectId,
  );
  return rows[0]?.n ?? 0;
}
