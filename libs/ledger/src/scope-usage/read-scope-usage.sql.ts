import { SCOPE_TABLE, WINDOWED_SCOPES, type Scope, type Window } from '@tollgate/contracts';
import { timestampText, withIndexPlans, type Executable, type PrismaService, type Sql } from '@tollgate/database';
import { emptyUsage, usageKey, type UsageTotals } from '../budgets/guard-decision';
import { planWindow } from '../budgets/windows';

export interface UsageRequest {
  scope: Scope;
  scopeId: string;
  window: Window | null;
  /** Count the scope's open reservations too (the default); the forecast's last hour reads committed usage only. */
  holds?: boolean;
}

/**
 * How many raw-edge branches a windowed scope may have: the partial first hours of up to this
 * many windows each read only their own partition; more share the last branch, whose bounds span
 * them. (The hours from the current one on come from the counters: see planWindow.)
 */
export const START_EDGE_BRANCHES = 3;

/**
 * One branch of the log's raw edges, for one scope (each needs its own branch to use its scope's
 * partial index). Its bounds are scalar parameters ($9[b], $10[b]), so the log's monthly
 * partitions outside them are pruned when the plan starts, not per loop. A step repriced since
 * (StepRepriced, carrying the step's scope ids and occurredAt) counts at its new cost: the
 * correction adds the step at the new cost and takes it out at the old one.
 */
const rawBranch = ({ scope, table }: RawBranch, b: number) =>
  `SELECT s.i, coalesce(x.cost_unit, ''), x.input_tokens, x.output_tokens, coalesce(x.cost_micros, 0), x.unpriced, 0, 0, 0
       FROM s CROSS JOIN LATERAL (
         SELECT type, cost_unit, input_tokens, output_tokens, cost_micros, unpriced, data FROM ${table} e
          WHERE e.project_id = $1 AND e.${SCOPE_TABLE[scope].column} = s.scope_id AND e.type IN ('StepUsageRecorded', 'StepRepriced')
            AND e.occurred_at >= ($9::timestamptz[])[${b}] AND e.occurred_at < ($10::timestamptz[])[${b}] AND e.occurred_at >= s.t0 AND e.occurred_at < s.t1
         OFFSET 0) e
       CROSS JOIN LATERAL (
         SELECT e.cost_unit, e.input_tokens, e.output_tokens, e.cost_micros, e.unpriced::int::bigint
         UNION ALL
         SELECT e.data->'old'->>'costUnit', -e.input_tokens, -e.output_tokens, -(e.data->'old'->>'costMicros')::bigint, -((e.data->'old'->>'costMicros') IS NULL)::int::bigint
          WHERE e.type = 'StepRepriced'
       ) AS x(cost_unit, input_tokens, output_tokens, cost_micros, unpriced)
      WHERE s.branch = ${b}`;

/**
 * A raw branch: the scope it reads, and the table — the log (`events`), or the one monthly
 * partition that holds all of the branch's range when it is known to exist (see
 * {@link PartitionOf}).
 */
interface RawBranch {
  scope: Exclude<Scope, 'run'>;
  table: string;
}

/**
 * The monthly partition of the log that holds every event that occurred in [from, to), when it
 * is known to exist (EventPartitions.partitionOf), else undefined. A branch that names it is
 * planned for that partition alone instead of every month of the log (see
 * EventPartitions.partitionOf for what planning over the parent costs).
 */
export type PartitionOf = (from: number, to: number) => string | undefined;

const texts = new Map<string, string>();

/**
 * The read's text for its raw branches (their scopes, in order): the counters, the raw edges and
 * the open reservations of any number of (scope, window) pairs, which arrive as arrays of segments.
 * Each segment is a parameterised index scan (OFFSET 0 keeps each lateral subquery a nested loop).
 * A scope's open reservations are its hold totals less the holds that expired and are not swept
 * yet: a few rows, however many reservations are open. Those expired holds are looked for after
 * the segment's t0 only: where the scope's last reap stopped (see ReapedUntil), so the entries of
 * holds already taken out, which stay until VACUUM, are not walked on every read.
 * The text depends only on which scopes are read and how many window starts each has, so a
 * connection plans each shape once; a plan holding only the branches it uses costs less to start
 * on every execution (PostgreSQL checks and locks every relation of a cached plan each time).
 */
function usageSql(branches: readonly RawBranch[]): string {
  const shape = branches.map((b) => `${b.scope}@${b.table}`).join(',');
  let text = texts.get(shape);
  if (text) return text;
  const raw = branches.map((branch, k) => `UNION ALL\n      ${rawBranch(branch, k + 1)}`).join('\n      ');
  // The bounds are typed even when no raw branch reads them (an unused CTE is dropped by the planner).
  text = `WITH s AS (
    SELECT * FROM unnest($2::int[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::timestamptz[], $11::int[]) AS s(i, kind, scope, scope_id, t0, t1, branch)
  ), bounds AS (SELECT $9::timestamptz[] AS lower, $10::timestamptz[] AS upper)
  SELECT i, cost_unit, sum(input_tokens)::bigint AS input_tokens, sum(output_tokens)::bigint AS output_tokens, sum(cost_micros)::bigint AS cost_micros,
         sum(unpriced_events)::bigint AS unpriced_events, sum(r_cost)::bigint AS r_cost, sum(r_in)::bigint AS r_in, sum(r_out)::bigint AS r_out
    FROM (
      SELECT s.i, c.cost_unit, c.input_tokens, c.output_tokens, c.cost_micros, c.unpriced_events, 0::bigint AS r_cost, 0::bigint AS r_in, 0::bigint AS r_out
        FROM s CROSS JOIN LATERAL (
          SELECT cost_unit, input_tokens, output_tokens, cost_micros, unpriced_events FROM usage_counters c
           WHERE c.project_id = $1 AND c.scope = s.scope AND c.scope_id = s.scope_id AND c.granularity = s.kind::"char" AND c.bucket_start >= s.t0 AND c.bucket_start < s.t1
          OFFSET 0) c
       WHERE s.kind IN ('r', 'h', 'd')
      ${raw}
      UNION ALL
      SELECT s.i, x.cost_unit, 0, 0, 0, 0, x.cost_micros, x.input_tokens, x.output_tokens
        FROM s CROSS JOIN LATERAL (
          SELECT cost_unit, cost_micros, input_tokens, output_tokens FROM reservation_hold_totals t
           WHERE t.project_id = $1 AND t.scope_key = s.scope || ':' || s.scope_id
          UNION ALL
          SELECT cost_unit, -cost_micros, -input_tokens, -output_tokens FROM reservation_holds h
           WHERE h.project_id = $1 AND h.scope_key = s.scope || ':' || s.scope_id AND h.expires_at > s.t0 AND h.expires_at <= $8
          OFFSET 0) x
       WHERE s.kind = 'x'
    ) AS u
   GROUP BY i, cost_unit`;
  texts.set(shape, text);
  return text;
}

/**
 * Reads the usage of several (scope, window) pairs in ONE statement, so counters, the log's edge
 * events and open reservations come from one snapshot: a step event that settles a reservation
 * while we read is counted once — as the event or as the reservation — never zero times or twice.
 * The window has no upper edge: a committed step counts from its commit on, even when its
 * occurredAt (a client's clock running fast) is after now; it ages out by its own occurredAt.
 * What every window of a scope shares — the hours from the current one on, the open reservations
 * — is read once and counted in each. Only a window's partial first hour is read from the log, so
 * a read costs the same however many steps the scope makes an hour.
 */
export async function readScopeUsage(
  db: Sql,
  projectId: string,
  requests: readonly UsageRequest[],
  now: Date,
  partitionOf?: PartitionOf,
): Promise<Map<string, UsageTotals>> {
  if (!requests.length) return new Map();
  const { statement, usage } = usageRead(projectId, requests, now, undefined, partitionOf);
  return usage(await db.query(statement.text, ...statement.params));
}

interface UsageRow {
  i: number;
  cost_unit: string;
  input_tokens: bigint;
  output_tokens: bigint;
  cost_micros: bigint;
  unpriced_events: bigint;
  r_cost: bigint;
  r_in: bigint;
  r_out: bigint;
}

/** A usage read to send, and what makes the usage of its rows. */
export interface UsageReadStatement {
  /** Its rows are (i, cost_unit, input_tokens, output_tokens, cost_micros, unpriced_events, r_cost, r_in, r_out). */
  statement: Executable;
  /** Per segment (a row's `i`), the requests (indexes into the read's requests) it counts in. */
  owners: readonly (readonly number[])[];
  usage: (rows: readonly Record<string, unknown>[]) => Map<string, UsageTotals>;
}

/**
 * {@link readScopeUsage} as a statement to send (with others, in one round trip) and what makes
 * the usage of its rows.
 */
export function usageRead(
  projectId: string,
  requests: readonly UsageRequest[],
  now: Date,
  reapedUntil: (scopeKey: string) => number = () => -Infinity,
  partitionOf: PartitionOf = () => undefined,
): UsageReadStatement {
  const seg = {
    kind: [] as string[],
    scope: [] as string[],
    id: [] as string[],
    t0: [] as string[],
    t1: [] as string[],
    branch: [] as number[],
  };
  /** The requests each segment counts in. */
  const owners: number[][] = [];
  const shared = new Map<string, number>();
  const push = (owner: number, kind: string, r: UsageRequest, from: number, to: number, branch = 0, share?: string) => {
    const known = share === undefined ? undefined : shared.get(share);
    if (known !== undefined) return void owners[known].push(owner);
    if (share !== undefined) shared.set(share, owners.length);
    owners.push([owner]);
    seg.kind.push(kind);
    seg.scope.push(r.scope);
    seg.id.push(r.scopeId);
    seg.t0.push(timestampText(from));
    seg.t1.push(timestampText(to));
    seg.branch.push(branch);
  };
  const edges: { owner: number; r: UsageRequest; from: number; to: number }[] = [];
  requests.forEach((r, owner) => {
    if (r.scope === 'run' || r.window === null) {
      push(owner, 'r', r, -Infinity, Infinity);
    } else {
      const plan = planWindow(r.window, now.getTime());
      if (plan.days) push(owner, 'd', r, plan.days.from, plan.days.to);
      // The hours from the current one on are the same in every window of the scope.
      for (const h of plan.hours)
        push(owner, 'h', r, h.from, h.to, 0, h.to === Infinity ? `now\u001f${r.scope}:${r.scopeId}` : undefined);
      for (const edge of plan.raw) edges.push({ owner, r, ...edge });
    }
    // An open reservation holds budget in every window of every scope it names, until it expires.
    const scopeKey = `${r.scope}:${r.scopeId}`;
    if (r.holds !== false) push(owner, 'x', r, reapedUntil(scopeKey), Infinity, 0, `x\u001f${scopeKey}`);
  });
  // The raw branches, per scope in a fixed order: the window starts, oldest first, one branch
  // each until the last branch takes the rest.
  const branches: RawBranch[] = [];
  const lower: number[] = [];
  const upper: number[] = [];
  for (const scope of WINDOWED_SCOPES) {
    const mine = edges.filter((e) => e.r.scope === scope);
    if (!mine.length) continue;
    const starts = [...new Set(mine.map((e) => e.from))].sort((a, b) => a - b);
    const first = branches.length + 1;
    for (let k = 0; k < Math.min(starts.length, START_EDGE_BRANCHES); k++) {
      branches.push({ scope, table: 'events' });
      lower.push(Infinity);
      upper.push(-Infinity);
    }
    for (const e of mine) {
      const b = first + Math.min(starts.indexOf(e.from), START_EDGE_BRANCHES - 1);
      lower[b - 1] = Math.min(lower[b - 1], e.from);
      upper[b - 1] = Math.max(upper[b - 1], e.to);
      push(e.owner, 'e', e.r, e.from, e.to, b);
    }
  }
  // A branch whose range lies in one month reads that month's partition by name, when it exists.
  branches.forEach((branch, k) => (branch.table = partitionOf(lower[k], upper[k]) ?? 'events'));
  const statement: Executable = {
    text: usageSql(branches),
    params: [
      projectId,
      owners.map((_, i) => i),
      seg.kind,
      seg.scope,
      seg.id,
      seg.t0,
      seg.t1,
      now,
      lower.map(timestampText),
      upper.map(timestampText),
      seg.branch,
    ],
  };
  return { statement, owners, usage: (rows) => totalsOf(requests, owners, rows as unknown as UsageRow[]) };
}

function totalsOf(
  requests: readonly UsageRequest[],
  owners: readonly number[][],
  rows: readonly UsageRow[],
): Map<string, UsageTotals> {
  const totals = requests.map(() => emptyUsage());
  for (const row of rows) {
    for (const owner of owners[row.i]) {
      const t = totals[owner];
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
  }
  const keyOf = (r: UsageRequest) => usageKey(`${r.scope}:${r.scopeId}`, r.scope === 'run' ? null : r.window);
  return new Map(requests.map((r, i) => [keyOf(r), totals[i]]));
}

/**
 * The guard's read outside a reserving check's transaction: one transaction in one round trip,
 * planned with its indexes whatever the tables held when the connection first planned it.
 */
export async function guardRead(
  prisma: PrismaService,
  projectId: string,
  requests: readonly UsageRequest[],
  now: Date,
  timeoutMs?: number,
  reapedUntil?: (scopeKey: string) => number,
  partitionOf?: PartitionOf,
): Promise<Map<string, UsageTotals>> {
  if (!requests.length) return new Map();
  const read = usageRead(projectId, requests, now, reapedUntil, partitionOf);
  const [, rows] = await prisma.oneTrip(withIndexPlans([read.statement]), timeoutMs);
  return read.usage(rows);
}
