import type { Sql } from '@tollgate/database';
import { scopeKeysOf } from '../budgets/effective-limits';
import type { StepContribution } from '../budget-alerts/alert-decision';
import type { CorrectionRow } from './append-repriced-steps.sql';

/**
 * What each correction moves: the step's cost leaves its old unit and lands on its new one, under
 * every scope of the step (read from the step's own row, by its occurredAt and position).
 */
export async function repricedContributions(
  db: Sql,
  projectId: string,
  corrections: readonly CorrectionRow[],
): Promise<StepContribution[]> {
  if (!corrections.length) return [];
  const rows = await db.query<{
    position: string;
    trace_id: string | null;
    run_id: string | null;
    thread_id: string | null;
    resource_id: string | null;
    user_id: string | null;
    organization_id: string | null;
    session_id: string | null;
  }>(
    `SELECT e.position::text AS position, e.trace_id, e.run_id, e.thread_id, e.resource_id, e.user_id, e.organization_id, e.session_id
       FROM unnest($2::timestamptz[], $3::bigint[]) AS s(occurred_at, position)
       JOIN events e ON e.project_id = $1 AND e.occurred_at = s.occurred_at AND e.position = s.position AND e.type = 'StepUsageRecorded'`,
    projectId,
    corrections.map((c) => c.occurredAt.toISOString()),
    corrections.map((c) => c.stepPosition),
  );
  const scopes = new Map(rows.map((r) => [r.position, r]));
  return corrections.flatMap((c) => {
    const r = scopes.get(c.stepPosition);
    if (!r) return [];
    const costByUnit: Record<string, number> = {};
    if (c.old.costMicros !== null && c.old.costUnit) costByUnit[c.old.costUnit] = -c.old.costMicros;
    if (c.new.costMicros !== null && c.new.costUnit)
      costByUnit[c.new.costUnit] = (costByUnit[c.new.costUnit] ?? 0) + c.new.costMicros;
    const n = (v: string | null) => v ?? undefined;
    const keys = scopeKeysOf({
      traceId: n(r.trace_id),
      runId: n(r.run_id),
      threadId: n(r.thread_id),
      resourceId: n(r.resource_id),
      userId: n(r.user_id),
      organizationId: n(r.organization_id),
      sessionId: n(r.session_id),
    });
    return [
      {
        eventId: c.stepEventId,
        correctionId: c.eventId,
        occurredAt: c.occurredAt,
        scopeKeys: keys,
        inputTokens: 0,
        outputTokens: 0,
        costByUnit,
      },
    ];
  });
}
