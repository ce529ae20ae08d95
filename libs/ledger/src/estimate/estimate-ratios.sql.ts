import type { Sql } from '@tollgate/database';

/**
 * Histogram of actual ÷ estimated input tokens for one provider and model, as settlements
 * recorded it (see estimate-margins.ts).
 */
export async function readEstimateRatios(
  db: Sql,
  projectId: string,
  provider: string,
  model: string,
): Promise<Map<number, number>> {
  const rows = await db.query<{ bin: number; n: string }>(
    'SELECT bin, n::text AS n FROM estimate_ratio_bins WHERE project_id = $1 AND provider = $2 AND model = $3',
    projectId,
    provider,
    model,
  );
  return new Map(rows.map((r) => [Number(r.bin), Number(r.n)]));
}
