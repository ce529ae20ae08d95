import { DIMENSION_TABLE_COLUMNS, dimensionsOf } from '../dimensions';
import { GRANULARITY_MS, type Granularity } from '../granularity';
import { METRIC_EVENT_TYPE, metricRecordsOf, type EventRow } from '../metric-names';
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
  /** A correction took records out of this cell: it may be left empty (see deleteEmptyRollups). */
  retracted?: boolean;
}

/** The correction of a step's cost (libs/ledger events.ts): the step's row with its new cost, and its old cost in data. */
export const REPRICED_EVENT_TYPE = 'StepRepriced';

interface OldCost {
  costUnit: string | null;
  inputCostMicros: number | null;
  outputCostMicros: number | null;
}

/**
 * The rows an event contributes, each with a weight: a step counts once; a correction takes its
 * step out as it was priced before (−1, in the old cost unit's cells) and puts it back priced
 * anew (+1, in the new unit's) — so the rollups become what ingesting the step at its new price
 * would have made. (A cell's min and max cannot be retracted: a record moved out of a cell that
 * keeps others leaves them as they were. A cell left with no record is deleted.)
 */
function weightedRows(row: EventRow): [EventRow, 1 | -1][] {
  if (row.type === METRIC_EVENT_TYPE) return [[row, 1]];
  if (row.type !== REPRICED_EVENT_TYPE) return [];
  const old = (row.data as { old?: OldCost } | null)?.old;
  if (!old) return [];
  return [
    [
      {
        ...row,
        type: METRIC_EVENT_TYPE,
        cost_unit: old.costUnit,
        input_cost_micros: old.inputCostMicros,
        output_cost_micros: old.outputCostMicros,
      },
      -1,
    ],
    [{ ...row, type: METRIC_EVENT_TYPE }, 1],
  ];
}

const PROJECT_CUBES: Granularity[] = ['m', 'h', 'd'];

/** Every cell an event adds to: the project cubes over the low dimensions, the unit cubes, the hourly scoped cube. */
const TARGETS: { cube: RollupCell['cube']; ms: number; dims: 'low' | 'unit' | 'scope'; index: number }[] = [
  ...PROJECT_CUBES.map((g) => ({ cube: g, ms: GRANULARITY_MS[g], dims: 'low' as const })),
  ...PROJECT_CUBES.map((g) => ({ cube: `${g}u` as const, ms: GRANULARITY_MS[g], dims: 'unit' as const })),
  { cube: 'scope' as const, ms: GRANULARITY_MS.h, dims: 'scope' as const },
].map((t, index) => ({ ...t, index }));

/**
 * The log columns foldRollups reads, as the projector selects them (`tx` and `position` for its
 * checkpoint): a third of the log's, so that decoding the batch costs a third. `data` only
 * matters for a correction (its old cost); a step's is left unread.
 */
export const ROLLUP_SELECT = [
  'tx::text AS tx',
  'position',
  'project_id',
  'type',
  'occurred_at',
  ...DIMENSION_TABLE_COLUMNS,
  'input_tokens',
  'output_tokens',
  'cache_read_tokens',
  'cache_write_tokens',
  'reasoning_tokens',
  'audio_input_tokens',
  'image_input_tokens',
  'duration_ms',
  'input_cost_micros',
  'output_cost_micros',
  `CASE WHEN type = '${REPRICED_EVENT_TYPE}' THEN data END AS data`,
].join(', ');

/**
 * Folds a batch of log rows into rollup cells (pure: the projection's `evolve` over a batch).
 * Step events add their records; corrections (StepRepriced) move their step's records from the
 * old cost to the new one; rows of other event types contribute nothing.
 */
export function foldRollups(rows: readonly EventRow[]): RollupCell[] {
  // Keyed by project, then by dimension tuple, then by (bucket, cube) as one number, then by
  // metric id: each event hashes its three tuple keys once (a string caches its hash) instead of
  // building and hashing a long key per cube, which was most of the fold's time.
  const groups = new Map<string, Map<string, Map<number, (RollupCell | undefined)[]>>>();
  const cells: RollupCell[] = [];
  for (const [row, weight] of rows.flatMap(weightedRows)) {
    const records = metricRecordsOf(row);
    if (records.length === 0) continue;
    const projectId = row.project_id as string;
    const at = (row.occurred_at as Date).getTime();
    const tuples = {
      low: dimensionsOf(row, 'low'),
      unit: dimensionsOf(row, 'unit'),
      scope: dimensionsOf(row, 'scope'),
    };
    let byTuple = groups.get(projectId);
    if (!byTuple) groups.set(projectId, (byTuple = new Map()));
    for (const t of TARGETS) {
      const dims = tuples[t.dims];
      const bucket = Math.floor(at / t.ms) * t.ms;
      let byBucket = byTuple.get(dims.key);
      if (!byBucket) byTuple.set(dims.key, (byBucket = new Map()));
      // Buckets are whole minutes (multiples of 60,000 ms), so bucket·8 + index is unique and exact.
      const slot = bucket * 8 + t.index;
      let group = byBucket.get(slot);
      if (!group) byBucket.set(slot, (group = []));
      for (const r of records) {
        const value = r.value;
        let cell = group[r.metric.id];
        if (!cell) {
          cell = {
            projectId,
            cube: t.cube,
            name: r.metric.id,
            bucketStart: bucket,
            dimsKey: dims.key,
            dimsValues: dims.values,
            count: 0,
            sum: new DecimalSum(),
            min: value,
            max: value,
            costMicros: 0n,
            costCount: 0,
          };
          group[r.metric.id] = cell;
          cells.push(cell);
        }
        cell.count += weight;
        cell.sum.add(weight * value);
        // A retracted value was in the cell already (its step put it there): widening by it changes nothing.
        if (value < cell.min) cell.min = value;
        if (value > cell.max) cell.max = value;
        if (weight < 0) cell.retracted = true;
        if (r.costMicros !== null) {
          cell.costMicros += weight > 0 ? r.costMicros : -r.costMicros;
          cell.costCount += weight;
        }
      }
    }
  }
  return cells;
}
