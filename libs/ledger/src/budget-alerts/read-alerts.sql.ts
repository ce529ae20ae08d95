import type { Sql } from '@tollgate/database';

/** A budget alert as the API shows it. */
export interface BudgetAlertView {
  eventId: string;
  kind: 'BudgetThresholdCrossed' | 'BudgetExhausted';
  occurredAt: string;
  scope: string;
  scopeKey: string;
  window: string | null;
  source: string;
  limitType: string;
  /** Percent of the limit; 100 for BudgetExhausted. */
  threshold: number;
  usage: number;
  limit: number;
  unit: string;
  /** The step whose commit crossed the threshold (BudgetThresholdCrossed). */
  stepEventId?: string | null;
  /** The denied check's stepId (BudgetExhausted). */
  stepId?: string | null;
}

/** The newest budget alerts of a project, optionally of one scope, newest first. */
export async function readAlerts(
  db: Sql,
  projectId: string,
  scopeKey: string | undefined,
  limit: number,
): Promise<BudgetAlertView[]> {
  const rows = await db.query<{ event_id: string; type: BudgetAlertView['kind']; occurred_at: Date; data: any }>(
    `SELECT event_id, type, occurred_at, data FROM events
      WHERE project_id = $1 AND type IN ('BudgetThresholdCrossed', 'BudgetExhausted') AND ($2::text IS NULL OR data->>'scopeKey' = $2::text)
      ORDER BY occurred_at DESC, position DESC LIMIT $3`,
    projectId,
    scopeKey ?? null,
    limit,
  );
  return rows.map(({ event_id, type, occurred_at, data: d }) => ({
    eventId: event_id,
    kind: type,
    occurredAt: occurred_at.toISOString(),
    scope: d.scope,
    scopeKey: d.scopeKey,
    window: d.window ?? null,
    source: d.source,
    limitType: d.limitType,
    threshold: type === 'BudgetExhausted' ? 100 : Number(d.threshold),
    usage: Number(d.usage),
    limit: Number(d.limit),
    unit: d.unit,
    ...(type === 'BudgetThresholdCrossed' ? { stepEventId: d.stepEventId ?? null } : { stepId: d.stepId ?? null }),
  }));
}
