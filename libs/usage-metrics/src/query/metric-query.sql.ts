import { onStepsByTime } from '@tollgate/database';
import { METRIC_BY_ID, METRIC_EVENT_TYPE } from '../metric-names';
import { REPRICED_EVENT_TYPE } from '../projection/rollup-batch';
import { ROLLUP_PROJECTION, scopeCellsSql, type SqlClient } from '../projection/rollup-store.sql';
import type { Cube, FieldRef, MetricQuery } from './metric-query';
import { coverRange, type Range, type RollupSegment } from './time-cover';

/** Beyond this many unprojected events, a query reads everything from the log instead. */
export const TAIL_LIMIT = 10_000;

/**
 * How far a streaming replica's replay is behind (0 on the primary, and on a replica that has
 * replayed all it received): the age of the last transaction it replayed. An answer read there
 * misses what it has not replayed, so the lag an answer reports (`ms`) is at least this.
 */
export const REPLAY_LAG_MS_SQL = `COALESCE(CASE WHEN pg_last_wal_receive_lsn() IS DISTINCT FROM pg_last_wal_replay_lsn()
  THEN extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp()) * 1000 END, 0)`;
/** The lag CTE over a `tail` of unprojected events: their count, and the larger of their age and the replica's replay lag. */
export const LAG_CTE_SQL = `lag AS (SELECT count(*)::int AS n, GREATEST(COALESCE(extract(epoch FROM clock_timestamp() - min(recorded_at)) * 1000, 0), ${REPLAY_LAG_MS_SQL})::float8 AS ms FROM tail)`;

/** One group of the answer: the measures of every matching record of the group. */
export interface AggregatedRow {
  /** Bucket start in epoch ms (series only). */
  ts?: number;
  /** Group values in the order of `query.groups` (metric names for the `name` field). */
  groups: (string | null)[];
  count: number;
  sum: number | null;
  min: number | null;
  max: number | null;
  distinct: number;
  last: number | null;
  costMicros: number | null;
  costUnits: string[];
  /** Steps without a price among those the group's records come from. */
  unpricedSteps: number;
  /** The token values of the group's records whose step has no price (durations are not tokens). */
  unpricedTokens: number;
}

export interface QueryAnswer<T> {
  rows: T[];
  lag: { events: number; ms: number };
}

class Params {
  readonly values: unknown[] = [];
  add(v: unknown): string {
    this.values.push(v);
    return `$${this.values.length}`;
  }
}

const iso = (ms: number) => new Date(ms).toISOString();

function rangeSql(col: string, r: Range, p: Params): string {
  const parts: string[] = [];
  if (r.from !== null) parts.push(`${col} >= ${p.add(iso(r.from))}::timestamptz`);
  if (r.to !== null) parts.push(`${col} < ${p.add(iso(r.to))}::timestamptz`);
  return parts.length ? `(${parts.join(' AND ')})` : 'TRUE';
}

const orSql = (parts: string[]) => (parts.length ? `(${parts.join(' OR ')})` : 'FALSE');

/** The metric records of events aliased `e`, priced as `c`: one row per produced metric, as `m(name_id, value, cost, always)`. */
function unpivot(metricIds: number[]): string {
  const rows = metricIds.map((id) => {
    const m = METRIC_BY_ID.get(id)!;
    return `(${id}, ${m.sql}, ${m.cost ? `c.${m.cost}` : 'NULL::bigint'}, ${m.always})`;
  });
  return `CROSS JOIN LATERAL (VALUES ${rows.join(', ')}) AS m(name_id, value, cost, always)`;
}

/**
 * The weighted costs of a log row aliased `e`, as `c(w, unit, input_cost_micros, output_cost_micros)`:
 * a step counts once at its cost; a correction (StepRepriced) takes its step out at its old cost
 * (−1) and puts it back at its new one (+1) — as the projector folds it into the rollups, so an
 * answer read from the log agrees with one read from the rollups, before and after they cover it.
 */
function weights(corrections: boolean): string {
  const step = 'SELECT 1 AS w, e.cost_unit AS unit, e.input_cost_micros, e.output_cost_micros';
  if (!corrections) return `CROSS JOIN LATERAL (${step}) AS c`;
  return `CROSS JOIN LATERAL (${step}
    UNION ALL
    SELECT -1, e.data -> 'old' ->> 'costUnit', (e.data -> 'old' ->> 'inputCostMicros')::bigint, (e.data -> 'old' ->> 'outputCostMicros')::bigint
     WHERE e.type = '${REPRICED_EVENT_TYPE}') AS c`;
}

/** SQL for a field's value as text, on a rollup row (r + dimensions d) or on a raw record (e + m). */
function fieldSql(ref: FieldRef, side: 'rollup' | 'raw', p: Params, joined = true): string {
  // Rows of the project cubes carry their cost unit: no join needed for it.
  if (side === 'rollup' && !joined && ref.column === 'cost_unit') return 'r.cost_unit';
  // A raw record's cost unit is its weighted cost's: a correction's retraction is in the old unit.
  if (side === 'raw' && ref.column === 'cost_unit') return 'c.unit';
  switch (ref.location) {
    case 'name':
      return side === 'rollup' ? 'r.name::text' : 'm.name_id::text';
    case 'low':
    case 'scope':
    case 'raw':
      return `${side === 'rollup' ? 'd' : 'e'}.${ref.column}`;
    case 'label':
      return `e.labels ->> ${p.add(ref.field)}::text`;
    case 'none':
      return 'NULL::text';
  }
}

function filterSql(q: MetricQuery, side: 'rollup' | 'raw', p: Params, joined = true): string[] {
  const where = q.equals.map((e) => `${fieldSql(e.ref, side, p, joined)} = ${p.add(e.value)}::text`);
  if (side === 'raw') {
    if (q.traceIds)
      where.push(`e.trace_id IN (SELECT jsonb_array_elements_text(${p.add(JSON.stringify(q.traceIds))}::jsonb))`);
    if (q.tags)
      where.push(`e.tags @> ARRAY(SELECT jsonb_array_elements_text(${p.add(JSON.stringify(q.tags))}::jsonb))`);
    if (q.labels) where.push(`e.labels @> ${p.add(JSON.stringify(q.labels))}::jsonb`);
  }
  if (q.matchesNothing) where.push('FALSE');
  return where;
}

function bucketSql(col: string, q: MetricQuery): string {
  return `(floor(extract(epoch FROM ${col}) * 1000 / ${q.bucketMs}) * ${q.bucketMs})::float8`;
}

/**
 * Columns every part yields, in order: [ts,] g0..gn, dv, cnt, sum, mn, mx, cost, cost_n, unit,
 * name_id, step[, occ, pos]. `step` is the event's position on raw rows and NULL on rollup rows.
 * A step without a price has no cost unit (libs/ledger prices a step whole or not at all), so a
 * NULL unit marks its records in the log and in every cube alike.
 */
function rollupPart(q: MetricQuery, cube: Cube, segments: RollupSegment[], p: Params): string {
  const table = cube === 'scope' ? scopeCellsSql(q.metricIds) : 'metric_rollups';
  const seg = segments.map((s) => {
    const g = cube === 'scope' ? '' : `r.granularity = '${s.granularity}${cube === 'unit' ? 'u' : ''}' AND `;
    return `(${g}${rangeSql('r.bucket_start', s, p)})`;
  });
  // The project cube carries cost_unit itself: without dimension filters or groups, no join.
  const refs = [...q.equals.map((e) => e.ref), ...q.groups, ...(q.distinct ? [q.distinct] : [])];
  const join =
    cube === 'scope' || refs.some((r) => (r.location === 'low' || r.location === 'scope') && r.column !== 'cost_unit');
  const cols = [
    ...(q.bucketMs ? [`${bucketSql('r.bucket_start', q)} AS ts`] : []),
    ...q.groups.map((g, i) => `${fieldSql(g, 'rollup', p, join)} AS g${i}`),
    `${q.distinct ? fieldSql(q.distinct, 'rollup', p, join) : 'NULL::text'} AS dv`,
    'r.count AS cnt',
    'r.sum AS sum',
    'r.min AS mn',
    'r.max AS mx',
    'r.cost_micros AS cost',
    'r.cost_count AS cost_n',
    `${join ? 'd' : 'r'}.cost_unit AS unit`,
    'r.name::int AS name_id',
    'NULL::bigint AS step',
  ];
  const project = p.add(q.projectId);
  return `SELECT ${cols.join(', ')}
    FROM ${table} r ${join ? `JOIN metric_dimensions d ON d.id = r.dims_id AND d.project_id = ${project}` : ''}
   WHERE r.project_id = ${project} AND r.name IN (${q.metricIds.join(', ')}) AND ${orSql(seg)}
     ${filterSql(q, 'rollup', p, join)
       .map((w) => `AND ${w}`)
       .join(' ')}`;
}

/**
 * The metric records of log rows. `step` identifies the step a row counts (a correction's is its
 * step's position), `cnt` is its weight; with `corrections`, StepRepriced rows move their step's
 * cost (see weights). Percentiles read steps only: a correction changes no token or duration.
 */
function rawPart(q: MetricQuery, source: string, timeSql: string, p: Params, corrections = true): string {
  const isStep = `e.type = '${METRIC_EVENT_TYPE}'`;
  const cols = [
    ...(q.bucketMs ? [`${bucketSql('e.occurred_at', q)} AS ts`] : []),
    ...q.groups.map((g, i) => `${fieldSql(g, 'raw', p)} AS g${i}`),
    `${q.distinct ? fieldSql(q.distinct, 'raw', p) : 'NULL::text'} AS dv`,
    'c.w::bigint AS cnt',
    'c.w * m.value AS sum',
    'm.value::float8 AS mn',
    'm.value::float8 AS mx',
    'c.w * COALESCE(m.cost, 0) AS cost',
    'c.w * (m.cost IS NOT NULL)::int::bigint AS cost_n',
    'c.unit AS unit',
    'm.name_id::int AS name_id',
    corrections
      ? `CASE WHEN ${isStep} THEN e.position ELSE (e.data ->> 'stepPosition')::bigint END AS step`
      : 'e.position AS step',
    // The latest record is a step's: a correction repeats its step's values.
    ...(q.last ? [`CASE WHEN ${isStep} THEN e.occurred_at END AS occ`, 'e.position AS pos'] : []),
  ];
  const types = corrections ? `e.type IN ('${METRIC_EVENT_TYPE}', '${REPRICED_EVENT_TYPE}')` : isStep;
  return `SELECT ${cols.join(', ')}
    FROM ${source} e ${weights(corrections)} ${unpivot(q.metricIds)}
   WHERE e.project_id = ${p.add(q.projectId)} AND ${types} AND ${onStepsByTime('e')}
     AND m.value IS NOT NULL AND (m.always OR m.value > 0) AND ${timeSql}
     ${filterSql(q, 'raw', p)
       .map((w) => `AND ${w}`)
       .join(' ')}`;
}

/**
 * One statement, so one snapshot: the checkpoint, the rollups (which hold exactly the events up
 * to it), the unprojected tail of the log inside the bucket ranges, and the raw edges. The tail is
 * the project's, read through the (project_id, tx, position) index, so it costs what the project's
 * lag is, not what the range is — and it touches one project's rows only (one shard, distributed).
 */
function statementSql(q: MetricQuery, plan: { cube: Cube; levels: ReturnType<typeof coverRange> }, p: Params): string {
  const parts: string[] = [];
  const { rollups, raw } = plan.levels;
  if (rollups.length) {
    parts.push(rollupPart(q, plan.cube, rollups, p));
    parts.push(rawPart(q, 'tail', orSql(rollups.map((s) => rangeSql('e.occurred_at', s, p))), p));
  }
  if (raw.length) parts.push(rawPart(q, 'events', orSql(raw.map((r) => rangeSql('e.occurred_at', r, p))), p));
  if (!parts.length) parts.push(rawPart(q, 'events', 'FALSE', p));

  const keys = [...(q.bucketMs ? ['ts'] : []), ...q.groups.map((_, i) => `g${i}`)];
  const measures = [
    'sum(cnt)::float8 AS cnt',
    'sum(sum)::float8 AS sum',
    'min(mn) AS mn',
    'max(mx) AS mx',
    'count(DISTINCT dv)::int AS distinct_n',
    '(CASE WHEN sum(cost_n) > 0 THEN sum(cost) END)::float8 AS cost',
    'array_remove(array_agg(DISTINCT unit) FILTER (WHERE unit_n > 0), NULL) AS units',
    ...(q.last
      ? ['(array_agg(sum ORDER BY occ DESC, pos DESC, name_id DESC) FILTER (WHERE occ IS NOT NULL))[1]::float8 AS last']
      : []),
    ...unpricedMeasures(q),
  ];
  return `WITH cp AS (SELECT tx, position FROM projection_checkpoints WHERE name = '${ROLLUP_PROJECTION}'),
  tail AS MATERIALIZED (
    SELECT * FROM events WHERE project_id = ${p.add(q.projectId)} AND (tx, position) > ((SELECT tx FROM cp), (SELECT position FROM cp))
     ORDER BY tx, position LIMIT ${TAIL_LIMIT + 1}
  ),
  ${LAG_CTE_SQL},
  parts AS (${parts.join('\n UNION ALL \n')}),
  -- What corrections leave of each cost unit in a group, and of each step's unpriced records.
  netted AS (
    SELECT *, sum(cost_n) OVER (PARTITION BY ${[...keys, 'unit'].join(', ')}) AS unit_n,
           sum(cnt) FILTER (WHERE unit IS NULL) OVER (PARTITION BY step, name_id) AS un_n
      FROM parts
  ),
  agg AS (SELECT ${[...keys, ...measures].join(', ')} FROM netted ${keys.length ? `GROUP BY ${keys.join(', ')}` : ''})
  SELECT (SELECT COALESCE(json_agg(agg), '[]'::json) FROM agg) AS rows, lag.n AS lag_events, lag.ms AS lag_ms FROM lag`;
}

const TOKEN_METRIC_IDS = [...METRIC_BY_ID.values()].filter((m) => m.name.endsWith('_tokens')).map((m) => m.id);

/**
 * Unpriced steps and tokens of a group; records are weighted (a correction retracts its step's old
 * records), so sums net out. Every step has one record of each metric it produces, so the most
 * unpriced records of any one metric is the number of unpriced steps when the group's metrics
 * include a token total (every step produces both) or are a single metric — the only queries
 * rollupLevels answers from rollups. The others are read from the log alone, whose rows name
 * their step: there, the steps whose unpriced records do not net out are counted distinct.
 */
function unpricedMeasures(q: MetricQuery): string[] {
  const tokenIds = q.metricIds.filter((id) => TOKEN_METRIC_IDS.includes(id));
  return [
    `COALESCE(sum(sum) FILTER (WHERE unit IS NULL AND name_id IN (${tokenIds.length ? tokenIds.join(', ') : 'NULL'})), 0)::float8 AS un_tokens`,
    'count(DISTINCT step) FILTER (WHERE unit IS NULL AND step IS NOT NULL AND un_n > 0)::int AS un_log_steps',
    ...q.metricIds.map(
      (id) => `COALESCE(sum(cnt) FILTER (WHERE unit IS NULL AND name_id = ${id}), 0)::float8 AS un_${id}`,
    ),
  ];
}

interface RawAgg {
  ts?: number;
  cnt: number | null;
  sum: number | null;
  mn: number | null;
  mx: number | null;
  distinct_n: number;
  cost: number | null;
  units: string[] | null;
  last?: number | null;
  un_tokens: number;
  un_log_steps: number;
  [g: `g${number}`]: string | null;
  [un: `un_${number}`]: number;
}

/**
 * Aggregates the matching metric records per group (and per bucket for series). Reads rollups
 * where the query allows, the log elsewhere; exact either way. When the projection is more than
 * TAIL_LIMIT events behind, everything comes from the log.
 */
export async function aggregateRecords(
  db: SqlClient,
  q: MetricQuery,
  rollupPlan: { cube: Cube; levels: ('d' | 'h' | 'm')[] },
): Promise<QueryAnswer<AggregatedRow>> {
  const run = async (levels: ('d' | 'h' | 'm')[]) => {
    const p = new Params();
    const cover = coverRange(q.range, levels);
    const sql = statementSql(q, { cube: rollupPlan.cube, levels: cover }, p);
    const [row] = await db.$queryRawUnsafe<{ rows: RawAgg[]; lag_events: number; lag_ms: number }[]>(sql, ...p.values);
    return { ...row, fromRollups: cover.rollups.length > 0 };
  };
  let result = await run(rollupPlan.levels);
  let lagEvents = result.lag_events;
  if (lagEvents > TAIL_LIMIT) {
    result = await run([]);
    lagEvents = await countUnprojected(db, q.projectId);
  }
  const rows = result.rows
    .filter((r) => (r.cnt ?? 0) > 0 || q.groups.length === 0)
    .map((r) => ({
      ts: r.ts,
      groups: q.groups.map((g, i) => {
        const v = r[`g${i}`];
        return g.location === 'name' && v !== null ? METRIC_BY_ID.get(Number(v))!.name : v;
      }),
      count: r.cnt ?? 0,
      sum: r.sum,
      min: r.mn,
      max: r.mx,
      distinct: r.distinct_n ?? 0,
      last: r.last ?? null,
      costMicros: r.cost,
      costUnits: r.units ?? [],
      unpricedSteps: result.fromRollups ? Math.max(0, ...q.metricIds.map((id) => r[`un_${id}`])) : r.un_log_steps,
      unpricedTokens: r.un_tokens,
    }));
  return { rows, lag: { events: lagEvents, ms: Math.max(0, Math.round(result.lag_ms)) } };
}

async function countUnprojected(db: SqlClient, projectId: string): Promise<number> {
  const [row] = await db.$queryRawUnsafe<{ n: number }[]>(
    `SELECT count(*)::int AS n FROM events, projection_checkpoints cp WHERE cp.name = '${ROLLUP_PROJECTION}' AND events.project_id = $1 AND (events.tx, events.position) > (cp.tx, cp.position)`,
    projectId,
  );
  return row.n;
}

/** Percentile values per bucket (from the log: rollups cannot hold distributions). */
export async function percentilesOf(
  db: SqlClient,
  q: MetricQuery,
  percentiles: number[],
): Promise<QueryAnswer<{ ts: number; values: number[] }>> {
  const p = new Params();
  const part = rawPart(
    { ...q, groups: [], distinct: undefined, last: false },
    'events',
    rangeSql('e.occurred_at', q.range, p),
    p,
    false,
  );
  const picks = percentiles.map(
    (pc, i) =>
      `(array_agg(sum ORDER BY sum))[least(floor(${p.add(pc)}::float8 * count(*))::int, count(*)::int - 1) + 1]::float8 AS p${i}`,
  );
  const sql = `WITH cp AS (SELECT tx, position FROM projection_checkpoints WHERE name = '${ROLLUP_PROJECTION}'),
  tail AS MATERIALIZED (
    SELECT recorded_at FROM events WHERE project_id = ${p.add(q.projectId)} AND (tx, position) > ((SELECT tx FROM cp), (SELECT position FROM cp))
     ORDER BY tx, position LIMIT ${TAIL_LIMIT + 1}
  ),
  ${LAG_CTE_SQL},
  parts AS (${part}),
  agg AS (SELECT ts, ${picks.join(', ')} FROM parts GROUP BY ts)
  SELECT (SELECT COALESCE(json_agg(agg ORDER BY ts), '[]'::json) FROM agg) AS rows, lag.n AS lag_events, lag.ms AS lag_ms FROM lag`;
  const [row] = await db.$queryRawUnsafe<{ rows: Record<string, number>[]; lag_events: number; lag_ms: number }[]>(
    sql,
    ...p.values,
  );
  const lagEvents = row.lag_events > TAIL_LIMIT ? await countUnprojected(db, q.projectId) : row.lag_events;
  return {
    rows: row.rows.map((r) => ({ ts: r.ts, values: percentiles.map((_, i) => r[`p${i}`]) })),
    lag: { events: lagEvents, ms: Math.max(0, Math.round(row.lag_ms)) },
  };
}
