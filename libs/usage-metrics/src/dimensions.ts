import { RUN_ID, SCOPE_TABLE, type Scope } from '@tollgate/contracts';

/**
 * The dimensions of a metric record and where each lives. Low-cardinality dimensions are in both
 * rollup cubes; scope ids only in the scoped (hourly) cube; trace/run/span ids and labels only in
 * the raw log (a rollup keyed by them would be as large as the log itself).
 */
export const LOW_DIMENSIONS = {
  entityType: 'entity_type',
  entityName: 'entity_name',
  provider: 'provider',
  model: 'model',
  costUnit: 'cost_unit',
  environment: 'environment',
  serviceName: 'service_name',
} as const;

const dimension = <S extends Scope>(scope: S) => [SCOPE_TABLE[scope].field, SCOPE_TABLE[scope].column] as const;

// In the order of metric_dimensions' columns (and of its key): resource first.
export const SCOPE_DIMENSIONS = Object.fromEntries(
  (['resource', 'thread', 'user', 'organization', 'session'] as const).map(dimension),
);

export const RAW_DIMENSIONS = Object.fromEntries([
  dimension('run'),
  [RUN_ID.field, RUN_ID.column],
  ['spanId', 'span_id'],
]);

export type DimensionLocation = 'low' | 'scope' | 'raw';

// A Map, not an object: a field name comes from the request, and `constructor` or `__proto__`
// must be a label key like any other, not a prototype member taken for a column.
type Dimension = { location: DimensionLocation; column: string };
const located = (location: DimensionLocation, dims: Record<string, string>) =>
  Object.entries(dims).map(([field, column]): [string, Dimension] => [field, { location, column }]);
const DIMENSIONS: ReadonlyMap<string, Dimension> = new Map([
  ...located('low', LOW_DIMENSIONS),
  ...located('scope', SCOPE_DIMENSIONS),
  ...located('raw', RAW_DIMENSIONS),
]);

/** Where a field's values live, and its column when it is a record dimension; any other name is a label key. */
export function dimensionOf(field: string): { location: DimensionLocation | 'name' | 'label'; column?: string } {
  if (field === 'name') return { location: 'name' };
  return DIMENSIONS.get(field) ?? { location: 'label' };
}

export const LOW_COLUMNS = Object.values(LOW_DIMENSIONS);
export const SCOPE_COLUMNS = Object.values(SCOPE_DIMENSIONS);
/** Column order of metric_dimensions (and of its key). */
export const DIMENSION_TABLE_COLUMNS = [...LOW_COLUMNS, ...SCOPE_COLUMNS];

const SEPARATOR = '\u001f';

export interface DimensionTuple {
  key: string;
  values: (string | null)[];
}

/**
 * The dimension tuple of an event row for one cube: every dimension (scoped cube), the
 * low-cardinality ones (project cube), or the cost unit alone (unit cube); the others null. The
 * key is unambiguous because ids and names never contain control characters and are never empty
 * (see the step event contract); null is the empty string.
 */
export function dimensionsOf(row: Record<string, unknown>, cube: 'scope' | 'low' | 'unit'): DimensionTuple {
  const values = DIMENSION_TABLE_COLUMNS.map((col, i) => {
    if (cube === 'low' && i >= LOW_COLUMNS.length) return null;
    if (cube === 'unit' && col !== 'cost_unit') return null;
    const v = row[col];
    return v === null || v === undefined ? null : String(v);
  });
  return { key: values.map((v) => v ?? '').join(SEPARATOR), values };
}
