import { DIMENSION_TABLE_COLUMNS } from '../dimensions';
import { METRICS } from '../metric-names';
import type { RollupCell } from './rollup-batch';

/** What runs SQL: the PrismaService or an interactive transaction of it. */
export interface SqlClient {
  $queryRawUnsafe<T = unknown>(query: string, ...values: unknown[]): Promise<T>;
  $executeRawUnsafe(query: string, ...values: unknown[]): Promise<number>;
}

export const ROLLUP_PROJECTION = 'metric_rollups';

export interface StoredCheckpoint {
  tx: string;
  position: bigint;
}

/**
 * Locks the projection's checkpoint row for this transaction and returns it. The row lock is the
 * projection's mutex: with `skipLocked`, a second worker gets null and leaves the batch to the
 * one that holds it (so two worker processes never project the same events).
 */
export async function lockCheckpoint(
  db: SqlClient,
  name: string,
  skipLocked: boolean,
): Promise<StoredCheckpoint | null> {
  const rows = await db.$queryRawUnsafe<{ tx: string; position: string }[]>(
    `SELECT tx::text AS tx, position::text AS position FROM projection_checkpoints WHERE name = $1 FOR UPDATE${skipLocked ? ' SKIP LOCKED' : ''}`,
    name,
  );
  return rows[0] ? { tx: rows[0].tx, position: BigInt(rows[0].position) } : null;
}

export async function saveCheckpoint(
  db: SqlClient,
  name: string,
  cp: StoredCheckpoint,
  eventsRead: number,
): Promise<void> {
  await db.$executeRawUnsafe(
    `UPDATE projection_checkpoints SET tx = $2::xid8, position = $3::bigint, events_projected = events_projected + $4, updated_at = now() WHERE name = $1`,
    name,
    cp.tx,
    cp.position.toString(),
    eventsRead,
  );
}

/**
 * The ids of dimension tuples, inserting the missing ones. One statement: the insert's RETURNING
 * gives the new ids, the join gives the ones that existed.
 */
export async function resolveDimensionIds(
  db: SqlClient,
  tuples: { projectId: string; key: string; values: (string | null)[] }[],
): Promise<Map<string, bigint>> {
  if (tuples.length === 0) return new Map();
  const cols = DIMENSION_TABLE_COLUMNS;
  const input = tuples.map((t) => ({
    project_id: t.projectId,
    key: t.key,
    ...Object.fromEntries(cols.map((c, i) => [c, t.values[i]])),
  }));
  const rows = await db.$queryRawUnsafe<{ id: string; project_id: string; key: string }[]>(
    `WITH input AS (SELECT * FROM json_to_recordset($1::json) AS x(project_id text, key text, ${cols.map((c) => `${c} text`).join(', ')})),
     ins AS (
       INSERT INTO metric_dimensions (project_id, key, ${cols.join(', ')})
       SELECT project_id, key, ${cols.join(', ')} FROM input
       ON CONFLICT (project_id, key) DO NOTHING
       RETURNING id, project_id, key
     )
     SELECT id::text AS id, project_id, key FROM ins
     UNION ALL
     SELECT d.id::text, d.project_id, d.key FROM metric_dimensions d JOIN input i ON d.project_id = i.project_id AND d.key = i.key`,
    JSON.stringify(input),
  );
  return new Map(rows.map((r) => [`${r.project_id}\u001e${r.key}`, BigInt(r.id)]));
}

const COST_UNIT_INDEX = DIMENSION_TABLE_COLUMNS.indexOf('cost_unit');

const toRecord = (c: RollupCell, dimsId: bigint) => ({
  project_id: c.projectId,
  granularity: c.cube,
  name: c.name,
  bucket_start: new Date(c.bucketStart).toISOString(),
  dims_id: dimsId.toString(),
  cost_unit: c.dimsValues[COST_UNIT_INDEX],
  count: c.count,
  sum: c.sum.toString(),
  min: c.min,
  max: c.max,
  cost_micros: c.costMicros.toString(),
  cost_count: c.costCount,
});

const MEASURES = 'count bigint, sum numeric, min float8, max float8, cost_micros bigint, cost_count bigint';
const MERGE = (
  t: string,
) => `count = ${t}.count + excluded.count, sum = ${t}.sum + excluded.sum, min = least(${t}.min, excluded.min),
  max = greatest(${t}.max, excluded.max), cost_micros = ${t}.cost_micros + excluded.cost_micros, cost_count = ${t}.cost_count + excluded.cost_count`;

/** Adds cells to the project-wide cube (one upsert; cells are unique by key within a batch). */
export async function upsertProjectRollups(
  db: SqlClient,
  cells: { cell: RollupCell; dimsId: bigint }[],
): Promise<void> {
  if (cells.length === 0) return;
  await db.$executeRawUnsafe(
    `INSERT INTO metric_rollups (project_id, granularity, name, bucket_start, dims_id, cost_unit, count, sum, min, max, cost_micros, cost_count)
     SELECT project_id, granularity, name, bucket_start, dims_id, cost_unit, count, sum, min, max, cost_micros, cost_count
       FROM json_to_recordset($1::json) AS x(project_id text, granularity text, name smallint, bucket_start timestamptz, dims_id bigint, cost_unit text, ${MEASURES})
      ORDER BY project_id, granularity, name, bucket_start, dims_id
     ON CONFLICT (project_id, granularity, name, bucket_start, dims_id) DO UPDATE SET ${MERGE('metric_rollups')}`,
    JSON.stringify(cells.map(({ cell, dimsId }) => toRecord(cell, dimsId))),
  );
}

type Measure = 'count' | 'sum' | 'min' | 'max' | 'costMicros' | 'costCount';

/** Each measure's value in a cell, as the scoped cube's input takes it. */
const MEASURE_OF: Record<Measure, (c: RollupCell) => string | number> = {
  count: (c) => c.count,
  sum: (c) => c.sum.toString(),
  min: (c) => c.min,
  max: (c) => c.max,
  costMicros: (c) => c.costMicros.toString(),
  costCount: (c) => c.costCount,
};

/**
 * The scoped cube's columns (prisma/migrations/20261201170000_scope_rollups_one_row_per_hour): one
 * row per (dimension tuple, hour), each metric's measures in columns suffixed with its id; only
 * the metrics that carry a cost have cost columns. The read side sees the rows one per metric,
 * through the metric_scope_rollups view.
 */
export const SCOPE_HOUR_COLUMNS: readonly { metric: number; column: string; type: string; measure: Measure }[] =
  METRICS.flatMap((m) =>
    (
      [
        ['count', 'count', 'bigint'],
        ['sum', 'sum', 'numeric'],
        ['min', 'min', 'float8'],
        ['max', 'max', 'float8'],
        ...(m.cost === null
          ? []
          : [
              ['cost_micros', 'costMicros', 'bigint'],
              ['cost_count', 'costCount', 'bigint'],
            ]),
      ] as [string, Measure, string][]
    ).map(([name, measure, type]) => ({ metric: m.id, column: `${name}_${m.id}`, type, measure })),
  );

/** A metric's columns of the scoped cube, by measure. */
const SCOPE_COLUMNS_OF = new Map(
  METRICS.map((m) => [
    m.id,
    new Map(SCOPE_HOUR_COLUMNS.filter((c) => c.metric === m.id).map((c) => [c.measure, c.column])),
  ]),
);

/**
 * The scoped cube as rows of one metric each, for the metrics asked for only (the
 * metric_scope_rollups view unfolds every metric of a row, then filters): a FROM item with the
 * old table's columns.
 */
export function scopeCellsSql(metricIds: readonly number[]): string {
  const values = metricIds.map((id) => {
    const cols = SCOPE_COLUMNS_OF.get(id)!;
    const col = (m: Measure) => (cols.has(m) ? `h.${cols.get(m)}` : '0::bigint');
    return `(${id}::smallint, ${(['count', 'sum', 'min', 'max', 'costMicros', 'costCount'] as const).map(col).join(', ')})`;
  });
  return `(SELECT h.project_id, h.dims_id, h.bucket_start, m.name, m.count, m.sum, m.min, m.max, m.cost_micros, m.cost_count
      FROM metric_scope_hours h CROSS JOIN LATERAL (VALUES ${values.join(', ')}) AS m(name, count, sum, min, max, cost_micros, cost_count)
     WHERE m.count <> 0)`;
}

/**
 * How a batch's value merges into a stored one. Sums add (a metric absent on one side keeps the
 * other's, NULL when absent on both); min and max widen, except over a metric a correction left
 * with no record (count 0), whose old extremes are no longer anyone's.
 */
function mergeScopeColumn(c: (typeof SCOPE_HOUR_COLUMNS)[number]): string {
  const [t, x] = [`metric_scope_hours.${c.column}`, `excluded.${c.column}`];
  if (c.measure === 'min' || c.measure === 'max') {
    const count = `metric_scope_hours.${SCOPE_COLUMNS_OF.get(c.metric)!.get('count')}`;
    const widen = c.measure === 'min' ? 'least' : 'greatest';
    return `${c.column} = CASE WHEN coalesce(${count}, 0) = 0 THEN ${x} ELSE ${widen}(${t}, ${x}) END`;
  }
  return `${c.column} = coalesce(${t} + ${x}, ${t}, ${x})`;
}

const SCOPE_UPSERT = `INSERT INTO metric_scope_hours (project_id, dims_id, bucket_start, ${SCOPE_HOUR_COLUMNS.map((c) => c.column).join(', ')})
     SELECT project_id, dims_id, bucket_start, ${SCOPE_HOUR_COLUMNS.map((c) => c.column).join(', ')}
       FROM json_to_recordset($1::json) AS x(project_id text, dims_id bigint, bucket_start timestamptz, ${SCOPE_HOUR_COLUMNS.map((c) => `${c.column} ${c.type}`).join(', ')})
      ORDER BY project_id, dims_id, bucket_start
     ON CONFLICT (project_id, dims_id, bucket_start) DO UPDATE SET ${SCOPE_HOUR_COLUMNS.map(mergeScopeColumn).join(', ')}`;

/** Adds cells to the scoped (hourly) cube: the cells of one tuple and hour become one row. */
export async function upsertScopeRollups(db: SqlClient, cells: { cell: RollupCell; dimsId: bigint }[]): Promise<void> {
  if (cells.length === 0) return;
  const rows = new Map<string, Record<string, unknown>>();
  for (const { cell, dimsId } of cells) {
    const key = `${cell.projectId}\u001e${dimsId}\u001e${cell.bucketStart}`;
    let row = rows.get(key);
    if (!row) {
      row = {
        project_id: cell.projectId,
        dims_id: dimsId.toString(),
        bucket_start: new Date(cell.bucketStart).toISOString(),
      };
      rows.set(key, row);
    }
    for (const [measure, column] of SCOPE_COLUMNS_OF.get(cell.name)!) row[column] = MEASURE_OF[measure](cell);
  }
  await db.$executeRawUnsafe(SCOPE_UPSERT, JSON.stringify([...rows.values()]));
}

/**
 * Deletes the cells that corrections emptied (a step repriced into another cost unit leaves its
 * old unit's cell; with no record left, that cell's min and max would still show it). Only the
 * retracted cells of the batch are looked at, after the batch was added.
 */
export async function deleteEmptyRollups(db: SqlClient, cells: { cell: RollupCell; dimsId: bigint }[]): Promise<void> {
  const retracted = cells.filter((c) => c.cell.retracted);
  if (retracted.length === 0) return;
  const keys = JSON.stringify(
    retracted.map(({ cell, dimsId }) => ({
      project_id: cell.projectId,
      granularity: cell.cube === 'scope' ? null : cell.cube,
      name: cell.name,
      bucket_start: new Date(cell.bucketStart).toISOString(),
      dims_id: dimsId.toString(),
    })),
  );
  const input = `json_to_recordset($1::json) AS x(project_id text, granularity text, name smallint, bucket_start timestamptz, dims_id bigint)`;
  await db.$executeRawUnsafe(
    `DELETE FROM metric_rollups r USING ${input}
      WHERE x.granularity IS NOT NULL AND r.project_id = x.project_id AND r.granularity = x.granularity AND r.name = x.name
        AND r.bucket_start = x.bucket_start AND r.dims_id = x.dims_id AND r.count = 0`,
    keys,
  );
  // A scoped row goes once no metric of it has a record left (the view hides an emptied metric).
  const empty = SCOPE_HOUR_COLUMNS.filter((c) => c.measure === 'count')
    .map((c) => `coalesce(r.${c.column}, 0) = 0`)
    .join(' AND ');
  await db.$executeRawUnsafe(
    `DELETE FROM metric_scope_hours r USING ${input}
      WHERE x.granularity IS NULL AND r.project_id = x.project_id AND r.dims_id = x.dims_id
        AND r.bucket_start = x.bucket_start AND ${empty}`,
    keys,
  );
}

/** Empties the rollups and rewinds the checkpoint, in the caller's transaction (replay). */
export async function resetRollups(db: SqlClient, name: string): Promise<void> {
  await db.$executeRawUnsafe('TRUNCATE metric_rollups, metric_scope_hours');
  await db.$executeRawUnsafe(
    `UPDATE projection_checkpoints SET tx = '0'::xid8, position = 0, events_projected = 0, updated_at = now() WHERE name = $1`,
    name,
  );
}
