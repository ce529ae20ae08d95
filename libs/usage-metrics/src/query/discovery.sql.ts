import { METRICS, METRIC_EVENT_TYPE } from '../metric-names';
import { ROLLUP_PROJECTION, type SqlClient } from '../projection/rollup-store.sql';
import { LAG_CTE_SQL, type QueryAnswer } from './metric-query.sql';

/**
 * The project's events the projector has not reached (all of them when it never ran): discovery
 * must list every value, so unlike the metric queries there is no cap on this tail. Scoped to the
 * project by the (project_id, tx, position) index. Every caller passes the project id as $1.
 */
const LAG_CTES = `cp AS (SELECT tx, position FROM projection_checkpoints WHERE name = '${ROLLUP_PROJECTION}'),
  tail AS MATERIALIZED (
    SELECT * FROM events
     WHERE project_id = $1
       AND (tx, position) > (COALESCE((SELECT tx FROM cp), '0'::xid8), COALESCE((SELECT position FROM cp), 0))
  ),
  ${LAG_CTE_SQL}`;

const produced = (ids: number[]) => {
  const rows = ids.map((id) => {
    const m = METRICS[id - 1];
    return `(${id}, ${m.sql}, ${m.always})`;
  });
  return `CROSS JOIN LATERAL (VALUES ${rows.join(', ')}) AS m(name_id, value, always)`;
};
const producedWhere = `m.value IS NOT NULL AND (m.always OR m.value > 0)`;

async function distinctValues(db: SqlClient, valuesSql: string, params: unknown[]): Promise<QueryAnswer<string>> {
  const [row] = await db.$queryRawUnsafe<{ rows: string[] | null; lag_events: number; lag_ms: number }[]>(
    `WITH ${LAG_CTES}, vals AS (${valuesSql})
     SELECT (SELECT json_agg(DISTINCT v) FROM vals WHERE v IS NOT NULL) AS rows, lag.n AS lag_events, lag.ms AS lag_ms FROM lag`,
    ...params,
  );
  return {
    rows: (row.rows ?? []).map(String).sort(),
    lag: { events: row.lag_events, ms: Math.max(0, Math.round(row.lag_ms)) },
  };
}

/** Names of the metrics a project has: from the daily rollups, plus the unprojected tail. */
export function metricNamesOf(db: SqlClient, projectId: string): Promise<QueryAnswer<string>> {
  const all = METRICS.map((m) => m.id);
  return distinctValues(
    db,
    `SELECT r.name::text AS v FROM metric_rollups r WHERE r.project_id = $1 AND r.granularity = 'd'
     UNION SELECT m.name_id::text FROM tail e ${produced(all)} WHERE e.project_id = $1 AND e.type = '${METRIC_EVENT_TYPE}' AND ${producedWhere}`,
    [projectId],
  ).then((a) => ({ ...a, rows: a.rows.map((id) => METRICS[Number(id) - 1].name).sort() }));
}

/**
 * Distinct values of a low-cardinality dimension (entity type or name, service, environment):
 * from the project's dimension tuples (written by the projector), plus the unprojected tail.
 */
export function dimensionValuesOf(
  db: SqlClient,
  projectId: string,
  column: 'entity_type' | 'entity_name' | 'service_name' | 'environment',
  entityType?: string,
): Promise<QueryAnswer<string>> {
  const et = entityType === undefined ? '' : ' AND entity_type = $2';
  return distinctValues(
    db,
    `SELECT ${column} AS v FROM metric_dimensions WHERE project_id = $1${et}
     UNION SELECT ${column} FROM tail WHERE project_id = $1 AND type = '${METRIC_EVENT_TYPE}'${et}`,
    entityType === undefined ? [projectId] : [projectId, entityType],
  );
}

/** Tags of the project's step events (from the log: tags are not rollup dimensions). */
export function tagsOf(db: SqlClient, projectId: string, entityType?: string): Promise<QueryAnswer<string>> {
  return distinctValues(
    db,
    `SELECT DISTINCT unnest(tags) AS v FROM events WHERE project_id = $1 AND type = '${METRIC_EVENT_TYPE}'${entityType === undefined ? '' : ' AND entity_type = $2'}`,
    entityType === undefined ? [projectId] : [projectId, entityType],
  );
}

/** Label keys of the events that produced a metric (from the log). */
export function labelKeysOf(db: SqlClient, projectId: string, metricId: number): Promise<QueryAnswer<string>> {
  return distinctValues(
    db,
    `SELECT DISTINCT jsonb_object_keys(e.labels) AS v FROM events e ${produced([metricId])}
      WHERE e.project_id = $1 AND e.type = '${METRIC_EVENT_TYPE}' AND e.labels IS NOT NULL AND ${producedWhere}`,
    [projectId],
  );
}

/** Values of one label on the events that produced a metric (from the log). */
export function labelValuesOf(
  db: SqlClient,
  projectId: string,
  metricId: number,
  key: string,
  prefix?: string,
): Promise<QueryAnswer<string>> {
  return distinctValues(
    db,
    `SELECT DISTINCT e.labels ->> $2::text AS v FROM events e ${produced([metricId])}
      WHERE e.project_id = $1 AND e.type = '${METRIC_EVENT_TYPE}' AND e.labels ? $2::text AND ${producedWhere}
        ${prefix ? `AND starts_with(e.labels ->> $2::text, $3::text)` : ''}`,
    prefix ? [projectId, key, prefix] : [projectId, key],
  );
}
