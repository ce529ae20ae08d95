import {
  inlined,
  timestampText,
  withIndexPlans,
  type Executable,
  type PrismaService,
  type Sql,
  type Statement,
} from '@tollgate/database';
import {
  claimEventIdsSql,
  eventRecord,
  eventRecordsSql,
  logClaimedEventsSql,
} from '../../system-events/append-system-events.sql';
import type { SystemEvent } from '../../events';
import { heldColumns, holdTotalsSql } from '../../reservations/hold-totals.sql';
import { scopeLockId } from '../../scope-usage/scope-lock';
import type { NewReservation } from '../../budgets/guard-decision';

/** An open reservation a retried check gets back (or the state that makes the retry a conflict). */
export interface ExistingReservation {
  id: string;
  step_id: string;
  status: string;
  cost_micros: string;
  cost_unit: string;
  input_tokens: string;
  output_tokens: string;
  expires_at: string;
}

/**
 * The reservations some steps already have (a retried check's). Planned with its values each
 * time, not prepared: a plan made while the table is nearly empty costs every index the same, and
 * a generic one kept from then looked the steps up through the primary key's project column,
 * reading every reservation of the project on every check.
 */
export const stepReservationsStatement = (projectId: string, stepIds: readonly string[]) =>
  stepIds.length === 1
    ? inlined({ text: ONE_EXISTING_SQL, params: [projectId, stepIds[0]] })
    : inlined({ text: EXISTING_SQL, params: [projectId, [...stepIds]] });

/** Takes the advisory locks of its array, in the array's order. */
const LOCKS_SQL = 'SELECT count(pg_advisory_xact_lock(id)) FROM unnest($1::bigint[]) AS l(id)';

/**
 * One index probe per step: equality on both columns of the (project, step) key, whatever the
 * statistics say. As `step_id = ANY(...)` the planner, told the project is small (statistics
 * taken before it grew), kept the step ids as a filter over the project's whole range of the
 * index, so every check read every reservation of its project.
 */
const EXISTING_SQL = `SELECT r.id, r.step_id, r.status, r.cost_micros::text, r.cost_unit, r.input_tokens::text, r.output_tokens::text, r.expires_at
  FROM unnest($2::text[]) AS s(step_id) CROSS JOIN LATERAL (
    SELECT * FROM reservations r WHERE r.project_id = $1 AND r.step_id = s.step_id OFFSET 0) r`;

/** {@link EXISTING_SQL} for one step (one agent's check): half the planning. */
const ONE_EXISTING_SQL = `SELECT id, step_id, status, cost_micros::text, cost_unit, input_tokens::text, output_tokens::text, expires_at
  FROM reservations WHERE project_id = $1 AND step_id = $2`;

/**
 * Statements sent with BEGIN, in the same round trip: take the scopes' advisory locks (sorted, so
 * two transactions never wait on each other crosswise; held to the end of the transaction, so they
 * hold across API replicas). Each statement of a simple query has its own snapshot: what is read
 * after them sees whatever committed before the locks were ours. They run on a plan the
 * connection keeps (see withIndexPlans).
 */
export function lockScopesStatements(projectId: string, scopeKeys: readonly string[]): Statement[] {
  const ids = [...new Set(scopeKeys.map((k) => scopeLockId(projectId, k)))].sort((a, b) =>
    a < b ? -1 : a > b ? 1 : 0,
  );
  return ids.length ? [{ text: LOCKS_SQL, params: [ids.map(String)] }] : [];
}

/** The rows of {@link stepReservationsStatement}, by step id. */
export function existingByStep(rows: readonly Record<string, unknown>[]): Map<string, ExistingReservation> {
  return new Map(
    rows.map((r) => [
      String(r.step_id),
      { ...(r as unknown as ExistingReservation), expires_at: new Date(r.expires_at as Date).toISOString() },
    ]),
  );
}

/** The reservations some steps hold (rare: a retried step, or one reserved by another replica meanwhile). */
export async function readExistingReservations(
  prisma: PrismaService,
  projectId: string,
  stepIds: readonly string[],
): Promise<Map<string, ExistingReservation>> {
  const [, rows] = await prisma.oneTrip(withIndexPlans([stepReservationsStatement(projectId, stepIds)]));
  return existingByStep(rows);
}

/**
 * What a group commit decided, as one statement: the reservations and what each holds per scope
 * (a step that already has one keeps it: the insert skips it, and so its holds and its
 * BudgetReserved event), then the events, each claimed in `event_ids` like every event of the
 * log. Its rows are the ids of the reservations made (see {@link madeReservations}); null when
 * there is nothing to write.
 */
export function guardOutcomeStatement(
  projectId: string,
  reservations: readonly NewReservation[],
  events: readonly SystemEvent[],
  reap: Reap = NO_REAP,
): Executable | null {
  if (!reservations.length && !events.length) return null;
  return {
    text: OUTCOME_SQL,
    params: outcomeStatementParams(projectId, reservations, events, reap),
  };
}

/** The six parameters of {@link outcomeCtes}. */
export function outcomeStatementParams(
  projectId: string,
  reservations: readonly NewReservation[],
  events: readonly SystemEvent[],
  reap: Reap = NO_REAP,
): [string, string, string, string[], string, string[]] {
  return [
    ...outcomeParams(projectId, reservations, events),
    [...reap.scopeKeys],
    reap.expiredBy.toISOString(),
    reap.scopeKeys.map((_, i) => timestampText(reap.after?.[i] ?? -Infinity)),
  ];
}

/**
 * The scopes (their locks held) whose holds expired by `expiredBy` an outcome takes out; `after`,
 * per scope, the time up to which they were taken out already (see ReapedUntil; none: all).
 */
export interface Reap {
  scopeKeys: readonly string[];
  expiredBy: Date;
  after?: readonly number[];
}

const NO_REAP: Reap = { scopeKeys: [], expiredBy: new Date(0) };

/** The ids of the reservations an outcome statement made. */
export const madeReservations = (rows: readonly Record<string, unknown>[]) => new Set(rows.map((r) => String(r.id)));

/** {@link guardOutcomeStatement}, run now on `db`. */
export async function writeGuardOutcome(
  db: Sql,
  projectId: string,
  reservations: readonly NewReservation[],
  events: readonly SystemEvent[],
  reap?: Reap,
): Promise<Set<string>> {
  const statement = guardOutcomeStatement(projectId, reservations, events, reap);
  return statement ? madeReservations(await db.query(statement.text, ...statement.params)) : new Set();
}

/**
 * The common table expressions of an outcome statement ($1 the reservations, $2 the project, $3
 * the events, $4–$6 the reap). With a `gate` (a boolean SQL expression over CTEs defined before
 * them), the reservations and events are written only when it holds; the reap runs always.
 */
export function outcomeCtes(gate = 'true'): string {
  return `rin AS (
       SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(id text, step_id text, scope_keys text[], context_keys text[], cost_micros bigint, cost_unit text,
         input_tokens bigint, output_tokens bigint, estimated_input_tokens bigint, provider text, model text, created_at timestamptz, expires_at timestamptz)
     ),
     made AS (
       INSERT INTO reservations (id, project_id, step_id, scope_keys, context_keys, cost_micros, cost_unit, input_tokens, output_tokens,
                                 estimated_input_tokens, provider, model, created_at, expires_at)
       SELECT id, $2, step_id, scope_keys, context_keys, cost_micros, cost_unit, input_tokens, output_tokens, estimated_input_tokens, provider, model, created_at, expires_at
         FROM rin WHERE ${gate} ORDER BY step_id
       ON CONFLICT (project_id, step_id) DO NOTHING
       RETURNING id
     ),
     held AS (
       INSERT INTO reservation_holds (project_id, scope_key, expires_at, reservation_id, cost_micros, cost_unit, input_tokens, output_tokens)
       SELECT $2, k.scope_key, rin.expires_at, rin.id, rin.cost_micros, rin.cost_unit, rin.input_tokens, rin.output_tokens
         FROM rin JOIN made USING (id) CROSS JOIN LATERAL unnest(rin.scope_keys) AS k(scope_key)
       RETURNING ${heldColumns('reservation_holds')}
     ),
     -- The batch's scopes' holds past their expiry, which hold nothing any more: taken out here, so
     -- that the reads of these scopes never walk them, whether or not the sweeper runs. Found one
     -- scope at a time, by the leading columns of the key (as scope_key = ANY(...) the planner may
     -- bound the scan by the project alone and walk every hold of it), from where the scope's last
     -- reap stopped (the entries of holds taken out before stay until VACUUM), and deleted by row
     -- address. A hold another transaction has locked is being taken out by it (a settlement, a
     -- release, a sweep: each locks its reservation, then its holds, then their totals) and is
     -- skipped, so the guard never waits on a hold while it holds its scopes' rows; should that
     -- transaction roll back, the hold counts until the sweeper lapses it (stricter, never looser).
     reaped AS (
       DELETE FROM reservation_holds h
        WHERE h.ctid = ANY(ARRAY(
          SELECT e.ctid FROM unnest($4::text[], $6::timestamptz[]) AS k(scope_key, after) CROSS JOIN LATERAL (
            SELECT ctid FROM reservation_holds e
             WHERE e.project_id = $2 AND e.scope_key = k.scope_key AND e.expires_at > k.after AND e.expires_at <= $5::timestamptz
            OFFSET 0 FOR UPDATE SKIP LOCKED) e))
       RETURNING ${heldColumns('h')}
     ),
     held_totals AS (${holdTotalsSql([
       ['held', 1],
       ['reaped', -1],
     ])}),
     ein AS (${eventRecordsSql('$3')}),
     kept AS (SELECT * FROM ein WHERE (${gate}) AND (type <> 'BudgetReserved' OR reservation_id IN (SELECT id FROM made))),
     claimed AS (${claimEventIdsSql('kept', '$2')}),
     logged AS (${logClaimedEventsSql('kept', 'claimed', '$2')} RETURNING 1)`;
}

const OUTCOME_SQL = `WITH ${outcomeCtes()}
     SELECT id FROM made`;

function outcomeParams(
  projectId: string,
  reservations: readonly NewReservation[],
  events: readonly SystemEvent[],
): [string, string, string] {
  return [
    JSON.stringify(
      reservations.map((r) => ({
        id: r.id,
        step_id: r.stepId,
        scope_keys: r.scopeKeys,
        context_keys: r.contextKeys,
        cost_micros: r.costMicros,
        cost_unit: r.costUnit,
        input_tokens: r.inputTokens,
        output_tokens: r.outputTokens,
        estimated_input_tokens: r.rawInputTokens,
        provider: r.provider,
        model: r.model,
        created_at: r.createdAt.toISOString(),
        expires_at: r.expiresAt.toISOString(),
      })),
    ),
    projectId,
    JSON.stringify(events.map(eventRecord)),
  ];
}
