/**
 * The CTE body that keeps `reservation_hold_totals` equal to the sum of `reservation_holds`: every
 * statement that inserts holds (sign 1) or deletes them (sign -1) passes the rows it changed —
 * its RETURNING project_id, scope_key, cost_unit, cost_micros, input_tokens, output_tokens — and
 * the totals of their (project, scope, unit) move by exactly those rows, in the same statement.
 * Upserted in key order, so two statements never wait on each other's rows crosswise.
 */
export function holdTotalsSql(changedCte: string, sign: 1 | -1): string {
  const s = sign === 1 ? '' : '-';
  return `INSERT INTO reservation_hold_totals AS t (project_id, scope_key, cost_unit, holds, cost_micros, input_tokens, output_tokens)
       SELECT project_id, scope_key, cost_unit, ${s}count(*), ${s}sum(cost_micros), ${s}sum(input_tokens), ${s}sum(output_tokens)
         FROM ${changedCte}
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
