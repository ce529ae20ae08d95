import type { Client } from 'pg';
import type { Inputs, Violation } from './invariants';
import { budgetInstances, SCOPE_FIELD, type Budget } from './world';

const scopeColumn = (b: Budget) => SCOPE_FIELD[b.scope].column;

export interface BudgetSpend {
  label: string;
  scopeKey: string;
  limitType: 'cost' | 'inputTokens' | 'outputTokens' | 'totalTokens';
  /** Micro-units for cost, else tokens. */
  limit: number;
  spend: number;
  /** What the scope's ReservationExceeded events say settlements passed their reservations by. */
  excess: number;
  steps: number;
}

const INTERVAL = { '1h': '1 hour', '24h': '24 hours', '7d': '7 days' } as const;

/**
 * The steps that settled a reservation on the scope (the log's ReservationSettled names each
 * one), in the budget's window, and what the scope's ReservationExceeded events record past
 * their reservations (per amount, never below 0).
 */
async function scopeSpend(sql: Client, projectId: string, b: Budget, scopeId: string, scopeKey: string) {
  const { rows } = await sql.query<Record<string, number>>(
    `WITH settled AS (
       SELECT e.cost_micros, e.input_tokens, e.output_tokens
         FROM events s
         JOIN events e ON e.project_id = s.project_id AND e.event_id = s.data->>'stepEventId' AND e.type = 'StepUsageRecorded'
        WHERE s.project_id = $1 AND s.type = 'ReservationSettled' AND e.${scopeColumn(b)} = $2
          AND ($3::interval IS NULL OR e.occurred_at >= now() - $3::interval)
     ),
     exceeded AS (
       SELECT coalesce((data->'actual'->>'costMicros')::bigint - (data->'reserved'->>'costMicros')::bigint, 0) AS cost,
              (data->'actual'->>'inputTokens')::bigint - (data->'reserved'->>'inputTokens')::bigint AS input,
              (data->'actual'->>'outputTokens')::bigint - (data->'reserved'->>'outputTokens')::bigint AS output
         FROM events WHERE project_id = $1 AND type = 'ReservationExceeded' AND data->'scopeKeys' ? $4
     )
     SELECT (SELECT count(*) FROM settled)::float8 AS steps,
            (SELECT coalesce(sum(cost_micros), 0) FROM settled)::float8 AS cost,
            (SELECT coalesce(sum(input_tokens), 0) FROM settled)::float8 AS input,
            (SELECT coalesce(sum(output_tokens), 0) FROM settled)::float8 AS output,
            (SELECT coalesce(sum(greatest(0, cost)), 0) FROM exceeded)::float8 AS x_cost,
            (SELECT coalesce(sum(greatest(0, input)), 0) FROM exceeded)::float8 AS x_input,
            (SELECT coalesce(sum(greatest(0, output)), 0) FROM exceeded)::float8 AS x_output,
            (SELECT coalesce(sum(greatest(0, input + output)), 0) FROM exceeded)::float8 AS x_total`,
    [projectId, scopeId, b.scope === 'run' ? null : INTERVAL[b.window], scopeKey],
  );
  return rows[0];
}

function spendsOf(b: Budget, scopeKey: string, s: Record<string, number>): BudgetSpend[] {
  const label = `${b.source === 'policy' ? `policy ${b.name}` : 'request limit'} on ${scopeKey}${b.scope === 'run' ? '' : `@${b.window}`}`;
  const out: BudgetSpend[] = [];
  const add = (limitType: BudgetSpend['limitType'], limit: number | undefined, spend: number, excess: number) => {
    if (limit !== undefined) out.push({ label, scopeKey, limitType, limit, spend, excess, steps: s.steps });
  };
  add('cost', b.maxCost === undefined ? undefined : Math.round(b.maxCost * 1e6), s.cost, s.x_cost);
  add('inputTokens', b.maxInputTokens, s.input, s.x_input);
  add('outputTokens', b.maxOutputTokens, s.output, s.x_output);
  add('totalTokens', b.maxTotalTokens, s.input + s.output, s.x_total);
  return out;
}

/** The last settlements on a scope, with when their reservations expired and closed. */
async function lastSettlements(
  sql: Client,
  projectId: string,
  b: Budget,
  scopeId: string,
): Promise<{ lines: string[]; keys: string[] }> {
  const { rows } = await sql.query<Record<string, string>>(
    `SELECT e.event_id, e.reservation_id, e.cost_micros::text, e.input_tokens::text, e.output_tokens::text,
            r.cost_micros::text AS held_cost, r.input_tokens::text AS held_in, r.output_tokens::text AS held_out,
            to_char(r.created_at, 'HH24:MI:SS.MS') AS made, to_char(r.expires_at, 'HH24:MI:SS.MS') AS expires,
            to_char(r.closed_at, 'HH24:MI:SS.MS') AS closed, (r.closed_at > r.expires_at)::text AS after_expiry
       FROM events s
       JOIN events e ON e.project_id = s.project_id AND e.event_id = s.data->>'stepEventId' AND e.type = 'StepUsageRecorded'
       JOIN reservations r ON r.project_id = e.project_id AND r.id = s.reservation_id
      WHERE s.project_id = $1 AND s.type = 'ReservationSettled' AND e.${scopeColumn(b)} = $2
      ORDER BY r.closed_at DESC LIMIT 12`,
    [projectId, scopeId],
  );
  const { rows: late } = await sql.query<{ n: number; micros: string }>(
    `SELECT count(*)::int AS n, coalesce(sum(e.cost_micros), 0)::text AS micros
       FROM reservations r JOIN events e ON e.project_id = r.project_id AND e.reservation_id = r.id AND e.type = 'StepUsageRecorded'
      WHERE r.project_id = $1 AND r.status = 'settled' AND r.closed_at > r.expires_at AND e.${scopeColumn(b)} = $2`,
    [projectId, scopeId],
  );
  const lines = [
    `settled after their reservation expired, on this scope: ${late[0].n} (cost ${late[0].micros} µ)`,
    'last settlements (step, reservation, actual cost/in/out, held cost/in/out, made, expires, closed):',
    ...rows.map(
      (r) =>
        `  ${r.event_id} ${r.reservation_id} ${r.cost_micros}/${r.input_tokens}/${r.output_tokens} held ${r.held_cost}/${r.held_in}/${r.held_out}` +
        ` ${r.made} ${r.expires} ${r.closed}${r.after_expiry === 'true' ? ' AFTER EXPIRY' : ''}`,
    ),
  ];
  return { lines, keys: rows.slice(0, 6).flatMap((r) => [r.event_id, r.reservation_id]) };
}

/**
 * For every budget: spend ≤ limit when no settlement passed its reservation, and otherwise the
 * spend past the limit is at most what the scope's ReservationExceeded events record.
 */
export async function budgetsHold({
  sql,
  projectId,
  world,
}: Inputs): Promise<{ violations: Violation[]; spends: BudgetSpend[] }> {
  const spends: BudgetSpend[] = [];
  const violations: Violation[] = [];
  for (const { budget, scopeId, scopeKey } of budgetInstances(world)) {
    const s = await scopeSpend(sql, projectId, budget, scopeId, scopeKey);
    for (const x of spendsOf(budget, scopeKey, s)) {
      spends.push(x);
      if (x.spend <= x.limit + x.excess || violations.length) continue;
      const last = await lastSettlements(sql, projectId, budget, scopeId);
      violations.push({
        invariant: 'every budget: spend ≤ limit + what ReservationExceeded records',
        details: [
          `${x.label}, ${x.limitType}: spend ${x.spend} over ${x.steps} settled steps, limit ${x.limit}, recorded excess ${x.excess}` +
            ` (over by ${x.spend - x.limit - x.excess}${x.limitType === 'cost' ? ' µ' : ' tokens'})`,
          ...last.lines,
        ],
        keys: last.keys,
      });
    }
  }
  return { violations, spends };
}
