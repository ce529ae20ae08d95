import { dimensionsOf } from '../dimensions';
import { metricRecordsOf, type EventRow } from '../metric-names';
import { GRANULARITY_MS, type Granularity } from '../query/time-cover';
import { DecimalSum } from './decimal-sum';

export interface RollupCell {
  projectId: string;
  /**
   * 'm' | 'h' | 'd': the project cube over low-cardinality dimensions; 'mu' | 'hu' | 'du': the
   * cost-unit-only cube; 'scope': the hourly cube with scope ids.
   */
  cube: Granularity | `${Granularity}u` | 'scope';
  name: number;
  bucketStart: number;
  dimsKey: string;
  dimsValues: (string | null)[];
  count: number;
  sum: DecimalSum;
  min: number;
  max: number;
  costMicros: bigint;
  costCount: number;
}

const PROJECT_CUBES: Granularity[] = ['m', 'h', 'd'];

/**
 * Folds a batch of log rows into rollup cells (pure: the projection's `evolve` over a batch).
 * Rows of other event types contribute nothing.
 */
export function foldRollups(rows: readonly EventRow[]): RollupCell[] {
  // Keyed by (project, cube, bucket, dimensions) once per event and cube, then by metric id:
  // hashing the long dimension key once per event instead of once per record is most of the speed.
  const groups = new Map<string, (RollupCell | undefined)[]>();
  const cells: RollupCell[] = [];
  for (const row of rows) {
    const records = metricRecordsOf(row);
    if (records.length === 0) continue;
    const projectId = row.project_id as string;
    const at = (row.occurred_at as Date).getTime();
    const low = dimensionsOf(row, 'low');
    const unit = dimensionsOf(row, 'unit');
    const scoped = dimensionsOf(row, 'scope');
    const targets: { cube: RollupCell['cube']; bucket: number; dims: { key: string; values: (string | null)[] } }[] = [
      ...PROJECT_CUBES.map((g) => ({ cube: g, bucket: Math.floor(at / GRANULARITY_MS[g]) * GRANULARITY_MS[g], dims: low })),
      ...PROJECT_CUBES.map((g) => ({ cube: `${g}u` as const, bucket: Math.floor(at / GRANULARITY_MS[g]) * GRANULARITY_MS[g], dims: unit })),
      { cube: 'scope', bucket: Math.floor(at / GRANULARITY_MS.h) * GRANULARITY_MS.h, dims: scoped },
    ];
    for (const t of targets) {
      const groupKey = `${projectId}\u001e${t.cube}\u001e${t.bucket}\u001e${t.dims.key}`;
      let group = groups.get(groupKey);
      if (!group) groups.set(groupKey, (group = []));
      for (const r of records) {
        const value = r.value;
        let cell = group[r.metric.id];
        if (!cell) {
          cell = { projectId, cube: t.cube, name: r.metric.id, bucketStart: t.bucket, dimsKey: t.dims.key, dimsValues: t.dims.values, count: 0, sum: new DecimalSum(), min: value, max: value, costMicros: 0n, costCount: 0 };
          group[r.metric.id] = cell;
          cells.push(cell);
        }
        cell.count += 1;
        cell.sum.add(value);
        if (value < cell.min) cell.min = value;
        if (value > cell.max) cell.max = value;
        if (r.costMicros !== null) {
          cell.costMicros += r.costMicros;
          cell.costCount += 1;
        }
      }
    }
  }
  return cells;
}
