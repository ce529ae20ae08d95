import type { Scope, Window } from '@tollgate/contracts';
import type { Sql } from '@tollgate/database';
import { emptyUsage, usageKey, type UsageTotals } from './guard-decision';
import { planWindow } from './windows';

export interface UsageRequest {
  scope: Scope;
  scopeId: string;
  window: Window | null;
}

/** The events column that holds each windowed scope's id (the run scope reads its all-time counter). */
const SCOPE_COLUMN: Record<Exclude<Scope, 'run'>, string> = {
  thread: 'thread_id',
  resource: 'resource_id',
  user: 'user_id',
  organization: 'organization_id',
  session: 'session_id',
};

/**
 * Reads the usage of several (scope, window) pairs in ONE statement, so counters, the log's edge
 * events and open reservations come from one snapshot: a step event that settles a reservation
 * while we read is counted once — as the event or as the reservation — never zero times or twice.
 * The window has no upper edge: a committed step counts from its commit on, even when its
 * occurredAt (a client's clock running fast) is after now; it ages out by its own occurredAt.
 */
export async function readScopeUsage(db: Sql, projectId: string, requests: readonly UsageRequest[], now: Date): Promise<Map<string, UsageTotals>> {
  const params: unknown[] = [projectId, now];
  const p = (v: unknown) => `$${params.push(v)}`;
  const parts: string[] = [];
  requests.forEach((r, i) => {
    const key = `${r.scope}:${r.scopeId}`;
    // Placeholders are numbered as they are used: an unused one would have no type for PostgreSQL.
    let scopeParam: string | undefined;
    const scopeRef = () => (scopeParam ??= `${p(r.scope)}::text`);
    const idRef = `${p(r.scopeId)}::text`;
    if (r.scope === 'run' || r.window === null) {
      parts.push(`SELECT ${i} AS i, cost_unit, input_tokens, output_tokens, cost_micros, unpriced_events, 0::bigint AS r_cost, 0::bigint AS r_in, 0::bigint AS r_out
        FROM usage_counters WHERE project_id = $1 AND scope = ${scopeRef()} AND scope_id = ${idRef} AND granularity = 'r'`);
    } else {
      const plan = planWindow(r.window, now.getTime());
      const ts = (ms: number) => `${p(new Date(ms))}::timestamptz`;
      if (plan.days) {
        parts.push(`SELECT ${i}, cost_unit, input_tokens, output_tokens, cost_micros, unpriced_events, 0, 0, 0 FROM usage_counters
          WHERE project_id = $1 AND scope = ${scopeRef()} AND scope_id = ${idRef} AND granularity = 'd' AND bucket_start >= ${ts(plan.days.from)} AND bucket_start < ${ts(plan.days.to)}`);
      }
      for (const h of plan.hours) {
        parts.push(`SELECT ${i}, cost_unit, input_tokens, output_tokens, cost_micros, unpriced_events, 0, 0, 0 FROM usage_counters
          WHERE project_id = $1 AND scope = ${scopeRef()} AND scope_id = ${idRef} AND granularity = 'h' AND bucket_start >= ${ts(h.from)} AND bucket_start < ${ts(h.to)}`);
      }
      const column = SCOPE_COLUMN[r.scope];
      for (const edge of plan.raw) {
        const upper = Number.isFinite(edge.to) ? ` AND occurred_at < ${ts(edge.to)}` : '';
        parts.push(`SELECT ${i}, coalesce(cost_unit, ''), input_tokens, output_tokens, coalesce(cost_micros, 0), unpriced::int, 0, 0, 0 FROM events
          WHERE project_id = $1 AND ${column} = ${idRef} AND type = 'StepUsageRecorded' AND occurred_at >= ${ts(edge.from)}${upper}`);
      }
    }
    // An open reservation holds budget in every window of every scope it names, until it expires.
    parts.push(`SELECT ${i}, cost_unit, 0, 0, 0, 0, cost_micros, input_tokens, output_tokens FROM reservations
      WHERE project_id = $1 AND status = 'open' AND expires_at > $2 AND scope_keys @> ARRAY[${p(key)}]::text[]`);
  });
  if (!parts.length) return new Map();
  const rows = await db.query<{ i: number; cost_unit: string; input_tokens: bigint; output_tokens: bigint; cost_micros: bigint; unpriced_events: bigint; r_cost: bigint; r_in: bigint; r_out: bigint }>(
    `SELECT i, cost_unit, sum(input_tokens)::bigint AS input_tokens, sum(output_tokens)::bigint AS output_tokens, sum(cost_micros)::bigint AS cost_micros,
            sum(unpriced_events)::bigint AS unpriced_events, sum(r_cost)::bigint AS r_cost, sum(r_in)::bigint AS r_in, sum(r_out)::bigint AS r_out
       FROM (${parts.join("\n UNION ALL ")}) AS u(i, cost_unit, input_tokens, output_tokens, cost_micros, unpriced_events, r_cost, r_in, r_out)
      GROUP BY i, cost_unit`,
    ...params,
  );
  const result = new Map<string, UsageTotals>();
  requests.forEach((r) => result.set(usageKey(`${r.scope}:${r.scopeId}`, r.scope === 'run' ? null : r.window), emptyUsage()));
  for (const row of rows) {
    const r = requests[row.i];
    const t = result.get(usageKey(`${r.scope}:${r.scopeId}`, r.scope === 'run' ? null : r.window))!;
    const unit = row.cost_unit;
    t.inputTokens += Number(row.input_tokens);
    t.outputTokens += Number(row.output_tokens);
    t.unpricedEvents += Number(row.unpriced_events);
    t.reservedInputTokens += Number(row.r_in);
    t.reservedOutputTokens += Number(row.r_out);
    // Counters and the log keep unpriced usage under the unit ''.
    if (unit === '') {
      t.unpricedInputTokens += Number(row.input_tokens);
      t.unpricedOutputTokens += Number(row.output_tokens);
      continue;
    }
    if (Number(row.cost_micros) > 0) t.costByUnit[unit] = (t.costByUnit[unit] ?? 0) + Number(row.cost_micros);
    if (Number(row.r_cost) > 0) t.reservedCostByUnit[unit] = (t.reservedCostByUnit[unit] ?? 0) + Number(row.r_cost);
  }
  return result;
}
