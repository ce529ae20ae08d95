import type { Executable } from '@tollgate/database';
import type { SystemEvent } from '../../events';
import type { NewReservation, UsageTotals } from '../../budgets/guard-decision';
import type { UsageBound } from '../../budgets/usage-bounds';
import type { UsageReadStatement } from '../../scope-usage/read-scope-usage.sql';
import { outcomeCtes, outcomeStatementParams, type Reap } from './guard-batch.sql';

/** How many parameters the outcome's CTEs take ahead of the read's. */
const OUTCOME_PARAMS = 6;

const texts = new Map<string, string>();

/**
 * The read's usage, summed per request as `totalsOf` sums it (a row's cost counts only when
 * positive; unit '' is unpriced usage), and whether every bounded request is within its bound.
 */
const gateCtes = (read: string) => {
  const n = (k: number) => `$${OUTCOME_PARAMS + k}`;
  return `fresh AS (${read.replace(/\$(\d+)/g, (_, k: string) => n(Number(k)))}),
     own AS (SELECT * FROM unnest(${n(12)}::int[], ${n(13)}::int[]) AS o(seg, req)),
     lim AS (SELECT * FROM jsonb_to_recordset(${n(14)}::jsonb) AS b(req int, tin bigint, tout bigint, ev bigint, uin bigint, uout bigint, cost jsonb)),
     per AS (
       SELECT o.req, f.cost_unit, sum(f.input_tokens + f.r_in) AS tin, sum(f.output_tokens + f.r_out) AS tout, sum(f.unpriced_events) AS ev,
              coalesce(sum(f.input_tokens) FILTER (WHERE f.cost_unit = ''), 0) AS uin,
              coalesce(sum(f.output_tokens) FILTER (WHERE f.cost_unit = ''), 0) AS uout,
              sum(greatest(f.cost_micros, 0) + greatest(f.r_cost, 0)) FILTER (WHERE f.cost_unit <> '') AS cost
         FROM fresh f JOIN own o ON o.seg = f.i
        GROUP BY o.req, f.cost_unit
     ),
     gate AS (
       SELECT NOT EXISTS (
                SELECT 1 FROM lim b JOIN per p USING (req)
                 GROUP BY b.req, b.tin, b.tout, b.ev, b.uin, b.uout
                HAVING sum(p.tin) > b.tin OR sum(p.tout) > b.tout OR sum(p.ev) > b.ev OR sum(p.uin) > b.uin OR sum(p.uout) > b.uout)
          AND NOT EXISTS (
                SELECT 1 FROM lim b JOIN per p USING (req)
                 WHERE p.cost_unit <> '' AND p.cost > coalesce((b.cost ->> p.cost_unit)::bigint, 0)) AS ok
     )`;
};

function oneTripSql(read: string): string {
  let text = texts.get(read);
  if (text) return text;
  text = `WITH ${gateCtes(read)},
     ${outcomeCtes('(SELECT ok FROM gate)')}
     SELECT (SELECT ok FROM gate) AS ok, ARRAY(SELECT id FROM made) AS made,
            (SELECT coalesce(jsonb_agg(fresh), '[]'::jsonb) FROM fresh) AS usage`;
  texts.set(read, text);
  return text;
}

/** What {@link reserveInOneTripStatement} answered. */
export interface OneTripOutcome {
  /** The usage read under the locks was within every bound: the reservations and events were written (but for steps that had one). */
  ok: boolean;
  /** The ids of the reservations made. */
  made: Set<string>;
  /** The usage read under the locks, before this statement's writes. */
  usage: Map<string, UsageTotals>;
}

/**
 * Reserving checks decided on usage known from before, made exact in one statement: it reads
 * the usage of `read` under the locks already taken and writes `reservations` and `events` only if
 * every bounded request (by index into the read's requests) is within its bound — so the decision
 * made on the older usage is the one the usage now would give. Otherwise it writes nothing but
 * the reap, and the checks are decided again. A step that already has a reservation keeps it.
 */
export function reserveInOneTripStatement(
  projectId: string,
  reservations: readonly NewReservation[],
  events: readonly SystemEvent[],
  reap: Reap,
  read: UsageReadStatement,
  bounds: ReadonlyMap<number, UsageBound>,
): { statement: Executable; outcome: (rows: readonly Record<string, unknown>[]) => OneTripOutcome } {
  const seg: number[] = [];
  const req: number[] = [];
  read.owners.forEach((owners, i) => owners.forEach((o) => (seg.push(i), req.push(o))));
  const statement: Executable = {
    text: oneTripSql(read.statement.text),
    params: [
      ...outcomeStatementParams(projectId, reservations, events, reap),
      ...read.statement.params,
      seg,
      req,
      JSON.stringify([...bounds].map(([i, b]) => ({ req: i, ...b }))),
    ],
  };
  return {
    statement,
    outcome: ([row]) => ({
      ok: row.ok === true,
      made: new Set((row.made as string[]).map(String)),
      usage: read.usage(row.usage as Record<string, unknown>[]),
    }),
  };
}
