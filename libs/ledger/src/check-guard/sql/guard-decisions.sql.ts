import { SCOPE_TABLE, SCOPES, type GuardFinding, type Scope } from '@tollgate/contracts';
import type { Sql } from '@tollgate/database';

/** A denial or a warning (a `GuardDecided` event) as the API shows it. */
export interface GuardDecisionView {
  eventId: string;
  occurredAt: string;
  decision: 'allow' | 'deny';
  violations: GuardFinding[];
  warnings: GuardFinding[];
  /** The step's scope ids and entity name, those it had. */
  context: Record<string, string>;
}

const CONTEXT_COLUMNS = [...SCOPES.map((s) => SCOPE_TABLE[s].column), 'entity_name'];
const CONTEXT_FIELDS = [...SCOPES.map((s) => SCOPE_TABLE[s].field), 'entityName'];

/** The newest `GuardDecided` events of a project, optionally of one scope (the run: its trace id). */
export async function readGuardDecisions(
  db: Sql,
  projectId: string,
  scope: { scope: Scope; id: string } | undefined,
  limit: number,
): Promise<GuardDecisionView[]> {
  const params: unknown[] = [projectId, limit];
  let filter = '';
  if (scope) {
    params.push(scope.id);
    filter = `AND ${SCOPE_TABLE[scope.scope].column} = $3`;
  }
  const rows = await db.query<{ event_id: string; occurred_at: Date; data: any } & Record<string, unknown>>(
    `SELECT event_id, occurred_at, data, ${CONTEXT_COLUMNS.join(', ')} FROM events WHERE project_id = $1 AND type = 'GuardDecided' ${filter} ORDER BY occurred_at DESC, position DESC LIMIT $2`,
    ...params,
  );
  return rows.map((r) => ({
    eventId: r.event_id,
    occurredAt: r.occurred_at.toISOString(),
    decision: r.data.decision,
    violations: r.data.violations,
    warnings: r.data.warnings,
    context: Object.fromEntries(CONTEXT_FIELDS.map((f, i) => [f, r[CONTEXT_COLUMNS[i]]]).filter(([, v]) => v !== null)),
  }));
}
