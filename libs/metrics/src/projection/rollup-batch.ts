import { dimensionsOf } from '../dimensions';
import { metricRecordsOf, type EventRow } from '../metric-names';
import { GRANULARITY_MS, type Granularity } from '../query/time-cover';
import { DecimalSum } from './decimal-sum';

export interface RollupCell {
  projectId: string;
  /** 'm' | 'h' | 'd' for the project-wide cube, 'scope' for the scoped (hourly) cube. */
  cube: Granularity | 'scope';
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
export function foldRollups(rows: readonly EventRow[]): Map<string, RollupCell> {
  const cells = new Map<string, RollupCell>();
  const add = (projectId: string, cube: RollupCell['cube'], bucketStart: number, name: number, dims: { key: string; values: (string | null)[] }, value: number, cost: bigint | null) => {
    const id = `${projectId}\u001e${cube}\u001e${bucketStart}\u001e${name}\u001e${dims.key}`;
    let cell = cells.get(id);
    if (!cell) {
      cell = { projectId, cube, name, bucketStart, dimsKey: dims.key, dimsValues: dims.values, count: 0, sum: new DecimalSum(), min: value, max: value, costMicros: 0n, costCount: 0 };
      cells.set(id, cell);
    }
    cell.count += 1;
    cell.sum.add(value);
    if (value < cell.min) cell.min = value;
    if (value > cell.max) cell.max = value;
    if (cost !== null) {
      cell.costMicros += cost;
      cell.costCount += 1;
    }
  };
  for (const row of rows) {
    const records = metricRecordsOf(row);
    if (records.length === 0) continue;
    const projectId = row.project_id as string;
    const at = (row.occurred_at as Date).getTime();
    const low = dimensionsOf(row, false);
    const scoped = dimensionsOf(row, true);
    const hour = Math.floor(at / GRANULARITY_MS.h) * GRANULARITY_MS.h;
    for (const r of records) {
      for (const g of PROJECT_CUBES) add(projectId, g, Math.floor(at / GRANULARITY_MS[g]) * GRANULARITY_MS[g], r.metric.id, low, r.value, r.costMicros);
      add(projectId, 'scope', hour, r.metric.id, scoped, r.value, r.costMicros);
    }
  }
  return cells;
}
