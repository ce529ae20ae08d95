import { timestampText, type Sql } from '@tollgate/database';
import { emptyUsage, usageKey, type UsageTotals } from '../budgets/guard-decision';
import type { UsageRequest } from '../scope-usage/read-scope-usage.sql';
import { planWindow } from '../budgets/windows';

const HOUR = 3600_000;

/** Committed usage of a window known to within its first, partial hour. */
export interface UsageBounds {
  /** The whole hours and days inside the window, and the current hour: all of it in the window. */
  lower: Map<string, UsageTotals>;
  /** And the hour bucket the window starts inside of: more than the window holds. */
  upper: Map<string, UsageTotals>;
}

/**
 * Bounds of each (scope, window)'s committed usage from the usage counters alone (no read of the
 * log's edges): enough to know that a commit changes no alert state, which is what most commits
 * learn. Only when the bounds disagree is the exact usage read (readScopeUsage).
 */
export async function readCounterBounds(
  db: Sql,
  projectId: string,
  requests: readonly UsageRequest[],
  now: Date,
): Promise<UsageBounds> {
  const seg = {
    i: [] as number[],
    gran: [] as string[],
    scope: [] as string[],
    id: [] as string[],
    t0: [] as string[],
    t1: [] as string[],
    edge: [] as boolean[],
  };
  const push = (i: number, gran: string, r: UsageRequest, from: number, to: number, edge = false) => {
    seg.i.push(i);
    seg.gran.push(gran);
    seg.scope.push(r.scope);
    seg.id.push(r.scopeId);
    seg.t0.push(timestampText(from));
    seg.t1.push(timestampText(to));
    seg.edge.push(edge);
  };
  requests.forEach((r, i) => {
    if (r.scope === 'run' || r.window === null) return push(i, 'r', r, -Infinity, Infinity);
    const plan = planWindow(r.window, now.getTime());
    if (plan.days) push(i, 'd', r, plan.days.from, plan.days.to);
    for (const h of plan.hours) push(i, 'h', r, h.from, h.to);
    if (plan.raw.length) push(i, 'h', r, plan.raw[0].to - HOUR, plan.raw[0].to, true);
  });
  const lower = new Map<string, UsageTotals>();
  const upper = new Map<string, UsageTotals>();
  const keyOf = (r: UsageRequest) => usageKey(`${r.scope}:${r.scopeId}`, r.scope === 'run' ? null : r.window);
  for (const r of requests) {
    lower.set(keyOf(r), emptyUsage());
    upper.set(keyOf(r), emptyUsage());
  }
  if (!requests.length) return { lower, upper };
  const rows = await db.query<{
    i: number;
    edge: boolean;
    cost_unit: string;
    input_tokens: string;
    output_tokens: string;
    cost_micros: string;
  }>(
    `SELECT s.i, s.edge, c.cost_unit, sum(c.input_tokens)::text AS input_tokens, sum(c.output_tokens)::text AS output_tokens, sum(c.cost_micros)::text AS cost_micros
       FROM unnest($2::int[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::timestamptz[], $8::boolean[]) AS s(i, gran, scope, scope_id, t0, t1, edge)
      CROSS JOIN LATERAL (
        SELECT cost_unit, input_tokens, output_tokens, cost_micros FROM usage_counters c
         WHERE c.project_id = $1 AND c.scope = s.scope AND c.scope_id = s.scope_id AND c.granularity = s.gran::"char" AND c.bucket_start >= s.t0 AND c.bucket_start < s.t1
        OFFSET 0) c
      GROUP BY s.i, s.edge, c.cost_unit`,
    projectId,
    seg.i,
    seg.gran,
    seg.scope,
    seg.id,
    seg.t0,
    seg.t1,
    seg.edge,
  );
  for (const row of rows) {
    const key = keyOf(requests[row.i]);
    for (const t of row.edge ? [upper.get(key)!] : [lower.get(key)!, upper.get(key)!]) {
      t.inputTokens += Number(row.input_tokens);
      t.outputTokens += Number(row.output_tokens);
      // Counters keep unpriced usage under the unit ''.
      if (row.cost_unit !== '' && Number(row.cost_micros) !== 0)
        t.costByUnit[row.cost_unit] = (t.costByUnit[row.cost_unit] ?? 0) + Number(row.cost_micros);
    }
  }
  return { lower, upper };
}
