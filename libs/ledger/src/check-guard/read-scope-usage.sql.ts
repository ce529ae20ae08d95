import { SCOPE_TABLE, WINDOWED_SCOPES, type Scope, type Window } from '@tollgate/contracts';
import type { Sql } from '@tollgate/database';
import { emptyUsage, usageKey, type UsageTotals } from './guard-decision';
import { planWindow } from './windows';

export interface UsageRequest {
  scope: Scope;
  scopeId: string;
  window: Window | null;
  /** Count the scope's open reservations too (the default); the forecast's last hour reads committed usage only. */
  holds?: boolean;
}

/**
 * The raw log's partial indexes, one per windowed scope; each needs its own branch to be used. A
 * step repriced since (StepRepriced, carrying the step's scope ids and occurredAt) counts at its
 * new cost: the correction adds the step at the new cost and takes it out at the old one.
 */
const RAW_BRANCHES = WINDOWED_SCOPES.map(
  (
    scope,
  ) => `SELECT s.i, coalesce(x.cost_unit, ''), x.input_tokens, x.output_tokens, coalesce(x.cost_micros, 0), x.unpriced, 0, 0, 0
       FROM s CROSS JOIN LATERAL (
         SELECT type, cost_unit, input_tokens, output_tokens, cost_micros, unpriced, data FROM events e
          WHERE e.project_id = $1 AND e.${SCOPE_TABLE[scope].column} = s.scope_id AND e.type IN ('StepUsageRecorded', 'StepRepriced') AND e.occurred_at >= s.t0 AND e.occurred_at < s.t1
         OFFSET 0) e
       CROSS JOIN LATERAL (
         SELECT e.cost_unit, e.input_tokens, e.output_tokens, e.cost_micros, e.unpriced::int::bigint
         UNION ALL
         SELECT e.data->'old'->>'costUnit', -e.input_tokens, -e.output_tokens, -(e.data->'old'->>'costMicros')::bigint, -((e.data->'old'->>'costMicros') IS NULL)::int::bigint
          WHERE e.type = 'StepRepriced'
       ) AS x(cost_unit, input_tokens, output_tokens, cost_micros, unpriced)
      WHERE s.kind = 'e' AND s.scope = '${scope}'`,
).join('\n      UNION ALL\n      ');

/**
 * One text for any number of (scope, window) pairs, so PostgreSQL plans it once per connection:
 * the pairs arrive as arrays of segments (a counter range, a raw edge of the log, the open
 * reservations), and each segment is a parameterised index scan (OFFSET 0 keeps each lateral
 * subquery a nested loop, so the log's monthly partitions are pruned at run time per segment).
 */
const USAGE_SQL = `WITH s AS (
    SELECT * FROM unnest($2::int[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::timestamptz[]) AS s(i, kind, scope, scope_id, t0, t1)
  )
  SELECT i, cost_unit, sum(input_tokens)::bigint AS input_tokens, sum(output_tokens)::bigint AS output_tokens, sum(cost_micros)::bigint AS cost_micros,
         sum(unpriced_events)::bigint AS unpriced_events, sum(r_cost)::bigint AS r_cost, sum(r_in)::bigint AS r_in, sum(r_out)::bigint AS r_out
    FROM (
      SELECT s.i, c.cost_unit, c.input_tokens, c.output_tokens, c.cost_micros, c.unpriced_events, 0::bigint AS r_cost, 0::bigint AS r_in, 0::bigint AS r_out
        FROM s CROSS JOIN LATERAL (
          SELECT cost_unit, input_tokens, output_tokens, cost_micros, unpriced_events FROM usage_counters c
           WHERE c.project_id = $1 AND c.scope = s.scope AND c.scope_id = s.scope_id AND c.granularity = s.kind::"char" AND c.bucket_start >= s.t0 AND c.bucket_start < s.t1
          OFFSET 0) c
       WHERE s.kind IN ('r', 'h', 'd')
      UNION ALL
      ${RAW_BRANCHES}
      UNION ALL
      SELECT s.i, x.cost_unit, 0, 0, 0, 0, x.cost_micros, x.input_tokens, x.output_tokens
        FROM s CROSS JOIN LATERAL (
          SELECT cost_unit, cost_micros, input_tokens, output_tokens FROM reservation_holds h
           WHERE h.project_id = $1 AND h.scope_key = s.scope || ':' || s.scope_id AND h.expires_at > $8
          OFFSET 0) x
       WHERE s.kind = 'x'
    ) AS u
   GROUP BY i, cost_unit`;

const iso = (ms: number) =>
  ms === Infinity ? 'infinity' : ms === -Infinity ? '-infinity' : new Date(ms).toISOString();

/**
 * Reads the usage of several (scope, window) pairs in ONE statement, so counters, the log's edge
 * events and open reservations come from one snapshot: a step event that settles a reservation
 * while we read is counted once — as the event or as the reservation — never zero times or twice.
 * The window has no upper edge: a committed step counts from its commit on, even when its
 * occurredAt (a client's clock running fast) is after now; it ages out by its own occurredAt.
 */
export async function readScopeUsage(
  db: Sql,
  projectId: string,
  requests: readonly UsageRequest[],
  now: Date,
): Promise<Map<string, UsageTotals>> {
  const seg = {
    i: [] as number[],
    kind: [] as string[],
    scope: [] as string[],
    id: [] as string[],
    t0: [] as string[],
    t1: [] as string[],
  };
  const push = (i: number, kind: string, r: UsageRequest, from: number, to: number) => {
    seg.i.push(i);
    seg.kind.push(kind);
    seg.scope.push(r.scope);
    seg.id.push(r.scopeId);
    seg.t0.push(iso(from));
    seg.t1.push(iso(to));
  };
  // A scope's open reservations are read once, by its first request, whatever its windows.
  const holdsReader = new Map<string, number>();
  requests.forEach((r, i) => {
    if (r.scope === 'run' || r.window === null) {
      push(i, 'r', r, -Infinity, Infinity);
    } else {
      const plan = planWindow(r.window, now.getTime());
      if (plan.days) push(i, 'd', r, plan.days.from, plan.days.to);
      for (const h of plan.hours) push(i, 'h', r, h.from, h.to);
      for (const edge of plan.raw) push(i, 'e', r, edge.from, edge.to);
    }
    // An open reservation holds budget in every window of every scope it names, until it expires.
    const key = `${r.scope}:${r.scopeId}`;
    if (r.holds !== false && !holdsReader.has(key)) {
      holdsReader.set(key, i);
      push(i, 'x', r, -Infinity, Infinity);
    }
  });
  if (!requests.length) return new Map();
  const rows = await db.query<{
    i: number;
    cost_unit: string;
    input_tokens: bigint;
    output_tokens: bigint;
    cost_micros: bigint;
    unpriced_events: bigint;
    r_cost: bigint;
    r_in: bigint;
    r_out: bigint;
  }>(USAGE_SQL, projectId, seg.i, seg.kind, seg.scope, seg.id, seg.t0, seg.t1, now);
  const result = new Map<string, UsageTotals>();
  const keyOf = (r: UsageRequest) => usageKey(`${r.scope}:${r.scopeId}`, r.scope === 'run' ? null : r.window);
  requests.forEach((r) => result.set(keyOf(r), emptyUsage()));
  for (const row of rows) {
    const r = requests[row.i];
    const t = result.get(keyOf(r))!;
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
  // The other windows of a scope hold what its first request read.
  requests.forEach((r) => {
    const reader = holdsReader.get(`${r.scope}:${r.scopeId}`);
    if (r.holds === false || reader === undefined || keyOf(requests[reader]) === keyOf(r)) return;
    const from = result.get(keyOf(requests[reader]))!;
    const t = result.get(keyOf(r))!;
    t.reservedInputTokens = from.reservedInputTokens;
    t.reservedOutputTokens = from.reservedOutputTokens;
    t.reservedCostByUnit = { ...from.reservedCostByUnit };
  });
  return result;
}
