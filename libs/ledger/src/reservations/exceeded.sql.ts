import type { Sql } from '@tollgate/database';

/** One settlement whose actual usage passed its reservation, as the API shows it. */
export interface ExceededReservation {
  reservationId: string;
  stepEventId: string;
  occurredAt: string;
  scopeKeys: string[];
  reserved: { cost: number; costUnit: string | null; inputTokens: number; outputTokens: number };
  actual: { cost: number | null; costUnit: string | null; inputTokens: number; outputTokens: number };
}

/** The newest `ReservationExceeded` events of a project, optionally of one scope. */
export async function readExceededReservations(
  db: Sql,
  projectId: string,
  scopeKey: string | undefined,
  limit: number,
): Promise<ExceededReservation[]> {
  const rows = await db.query<{ reservation_id: string; occurred_at: Date; data: any }>(
    `SELECT reservation_id, occurred_at, data FROM events
      WHERE project_id = $1 AND type = 'ReservationExceeded' AND ($2::text IS NULL OR data->'scopeKeys' ? $2::text)
      ORDER BY occurred_at DESC, position DESC LIMIT $3`,
    projectId,
    scopeKey ?? null,
    limit,
  );
  const money = (micros: unknown) => (micros === null || micros === undefined ? null : Number(micros) / 1e6);
  return rows.map((r) => ({
    reservationId: r.reservation_id,
    stepEventId: r.data.stepEventId,
    occurredAt: r.occurred_at.toISOString(),
    scopeKeys: r.data.scopeKeys,
    reserved: {
      cost: money(r.data.reserved.costMicros) ?? 0,
      costUnit: r.data.reserved.costUnit,
      inputTokens: Number(r.data.reserved.inputTokens),
      outputTokens: Number(r.data.reserved.outputTokens),
    },
    actual: {
      cost: money(r.data.actual.costMicros),
      costUnit: r.data.actual.costUnit,
      inputTokens: Number(r.data.actual.inputTokens),
      outputTokens: Number(r.data.actual.outputTokens),
    },
  }));
}
