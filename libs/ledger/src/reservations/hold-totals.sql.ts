/**
 * The CTE body that keeps `reservation_hold_totals` equal to the sum of `reservation_holds`: every
 * statement that inserts holds (sign 1) or deletes them (sign -1) passes the CTEs of the rows it
 * changed — their RETURNING {@link heldColumns} — and the totals of their (project, scope, unit)
 * move by exactly those rows, in the same statement (one upsert for all of them: a statement may
 * not update a row twice). Upserted in key order, so two statements never wait on each other's
 * rows crosswise.
 */
export function holdTotalsSql(changed: readonly (readonly [cte: string, sign: 1 | -1])[]): string {
  const rows = changed
    .map(([cte, sign]) => {
      const s = sign === 1 ? '' : '-';
      return `SELECT project_id, scope_key, cost_unit, ${s}1 AS holds, ${s}cost_micros AS cost_micros, ${s}input_tokens AS input_tokens, ${s}output_tokens AS output_tokens FROM ${cte}`;
    })
    .join(' UNION ALL ');
  return `INSERT INTO reservation_hold_totals AS t (project_id, scope_key, cost_unit, holds, cost_micros, input_tokens, output_tokens)
       SELECT project_id, scope_key, cost_unit, sum(holds), sum(cost_micros), sum(input_tokens), sum(output_tokens)
         FROM (${rows}) AS changed
        GROUP BY project_id, scope_key, cost_unit
        ORDER BY project_id, scope_key, cost_unit
       ON CONFLICT (project_id, scope_key, cost_unit) DO UPDATE
          SET holds = t.holds + excluded.holds,
              cost_micros = t.cost_micros + excluded.cost_micros,
              input_tokens = t.input_tokens + excluded.input_tokens,
              output_tokens = t.output_tokens + excluded.output_tokens
       RETURNING 1`;
}

/** What a hold-changing CTE returns for {@link holdTotalsSql}, for a holds table aliased `alias`. */
export const heldColumns = (alias: string) =>
  ['project_id', 'scope_key', 'cost_unit', 'cost_micros', 'input_tokens', 'output_tokens']
    .map((c) => `${alias}.${c}`)
    .join(', ');
