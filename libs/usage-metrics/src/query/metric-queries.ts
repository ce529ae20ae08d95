import { Injectable } from '@nestjs/common';
import { AppError } from '@tollgate/platform';
import {
  INTERVALS,
  previousRange,
  type AggregateArgs,
  type AggregateResponse,
  type BreakdownArgs,
  type BreakdownResponse,
  type PercentilesArgs,
  type PercentilesResponse,
  type ProjectionLag,
  type TimeSeriesArgs,
  type TimeSeriesResponse,
} from '../mastra-contract';
import { METRIC_BY_NAME } from '../metric-names';
import type { SqlClient } from '../projection/rollup-store.sql';
import { dimensionValuesOf, labelKeysOf, labelValuesOf, metricNamesOf, tagsOf } from './discovery.sql';
import { buildQuery, rollupLevels } from './metric-query';
import { aggregateRecords, percentilesOf, type AggregatedRow, type QueryAnswer } from './metric-query.sql';
import { MetricsReadDb } from './metrics-read-db';

export type WithLag<T> = T & { lag: ProjectionLag };

function valueOf(row: AggregatedRow | undefined, aggregation: AggregateArgs['aggregation']): number | null {
  const count = row?.count ?? 0;
  switch (aggregation) {
    case 'count':
      return count;
    case 'count_distinct':
      return row?.distinct ?? 0;
    case 'sum':
      return count ? row!.sum : null;
    case 'avg':
      return count ? row!.sum! / count : null;
    case 'min':
      return count ? row!.min : null;
    case 'max':
      return count ? row!.max : null;
    case 'last':
      return count ? row!.last : null;
  }
}

const costOf = (row: AggregatedRow | undefined) => (row && row.costMicros !== null ? row.costMicros / 1e6 : null);
const unpricedOf = (row: AggregatedRow | undefined) => ({
  unpricedSteps: row?.unpricedSteps ?? 0,
  unpricedTokens: row?.unpricedTokens ?? 0,
});
const unitOf = (units: Iterable<string>) => {
  const set = new Set(units);
  return set.size === 1 ? [...set][0] : null;
};
const change = (now: number | null, before: number | null) =>
  before === null || before === 0 || now === null ? null : ((now - before) / Math.abs(before)) * 100;
const worstLag = (a: ProjectionLag, b: ProjectionLag): ProjectionLag => ({
  events: Math.max(a.events, b.events),
  ms: Math.max(a.ms, b.ms),
});

/**
 * Mastra's metric queries over Tollgate's projections (shapes: see mastra-contract.ts). Every
 * answer is exact; the lag says how much of it came from the log rather than the rollups.
 */
@Injectable()
export class MetricQueries {
  private readonly db: SqlClient;

  constructor(read: MetricsReadDb) {
    this.db = read.db;
  }

  async aggregate(projectId: string, args: AggregateArgs): Promise<WithLag<AggregateResponse>> {
    const run = (filters: AggregateArgs['filters']) => {
      const q = buildQuery(projectId, args.name, filters, {
        distinct: args.distinctColumn,
        last: args.aggregation === 'last',
      });
      return aggregateRecords(this.db, q, rollupLevels(q));
    };
    const now = await run(args.filters);
    const response: WithLag<AggregateResponse> = {
      value: valueOf(now.rows[0], args.aggregation),
      estimatedCost: costOf(now.rows[0]),
      costUnit: unitOf(now.rows[0]?.costUnits ?? []),
      ...unpricedOf(now.rows[0]),
      lag: now.lag,
    };
    const ts = args.filters?.timestamp;
    if (args.comparePeriod && ts?.start && ts.end) {
      const before = await run({
        ...args.filters,
        timestamp: { ...ts, ...previousRange({ start: ts.start, end: ts.end }, args.comparePeriod) },
      });
      response.previousValue = valueOf(before.rows[0], args.aggregation);
      response.previousEstimatedCost = costOf(before.rows[0]);
      response.changePercent = change(response.value, response.previousValue);
      response.costChangePercent = change(response.estimatedCost, response.previousEstimatedCost);
      response.lag = worstLag(now.lag, before.lag);
    }
    return response;
  }

  async breakdown(projectId: string, args: BreakdownArgs): Promise<WithLag<BreakdownResponse>> {
    const q = buildQuery(projectId, args.name, args.filters, {
      groups: args.groupBy,
      distinct: args.distinctColumn,
      last: args.aggregation === 'last',
    });
    const { rows, lag } = await aggregateRecords(this.db, q, rollupLevels(q));
    const direction = args.orderDirection === 'ASC' ? 1 : -1;
    const groups = rows
      .map((r) => ({
        dimensions: Object.fromEntries(args.groupBy.map((g, i) => [g, r.groups[i]])),
        value: valueOf(r, args.aggregation) ?? 0,
        estimatedCost: costOf(r),
        costUnit: unitOf(r.costUnits),
        ...unpricedOf(r),
      }))
      .sort(
        (a, b) =>
          (a.value - b.value) * direction || compare(JSON.stringify(a.dimensions), JSON.stringify(b.dimensions)),
      );
    return { groups: args.limit ? groups.slice(0, args.limit) : groups, lag };
  }

  async timeSeries(projectId: string, args: TimeSeriesArgs): Promise<WithLag<TimeSeriesResponse>> {
    const q = buildQuery(projectId, args.name, args.filters, {
      groups: args.groupBy,
      distinct: args.distinctColumn,
      bucketMs: INTERVALS[args.interval],
      last: args.aggregation === 'last',
    });
    const { rows, lag } = await aggregateRecords(this.db, q, rollupLevels(q));
    const series = new Map<
      string,
      {
        name: string;
        units: Set<string>;
        points: (TimeSeriesResponse['series'][number]['points'][number] & { ts: number })[];
      }
    >();
    if (!args.groupBy) series.set('', { name: args.name.join(','), units: new Set(), points: [] });
    for (const r of rows) {
      const name = args.groupBy ? r.groups.map((v) => v ?? '').join('|') : args.name.join(',');
      const key = args.groupBy ? JSON.stringify(r.groups) : '';
      let s = series.get(key);
      if (!s) series.set(key, (s = { name, units: new Set(), points: [] }));
      r.costUnits.forEach((u) => s!.units.add(u));
      s.points.push({
        ts: r.ts!,
        timestamp: new Date(r.ts!).toISOString(),
        value: valueOf(r, args.aggregation) ?? 0,
        estimatedCost: costOf(r),
        ...unpricedOf(r),
      });
    }
    return {
      series: [...series.values()]
        .sort((a, b) => compare(a.name, b.name))
        .map((s) => ({
          name: s.name,
          costUnit: unitOf(s.units),
          points: s.points.sort((a, b) => a.ts - b.ts).map(({ ts: _, ...p }) => p),
        })),
      lag,
    };
  }

  async percentiles(projectId: string, args: PercentilesArgs): Promise<WithLag<PercentilesResponse>> {
    const q = buildQuery(projectId, [args.name], args.filters, { bucketMs: INTERVALS[args.interval] });
    const { rows, lag } = await percentilesOf(this.db, q, args.percentiles);
    return {
      series: args.percentiles.map((percentile, i) => ({
        percentile,
        points: rows.map((r) => ({ timestamp: new Date(r.ts).toISOString(), value: r.values[i] })),
      })),
      lag,
    };
  }

  metricNames(projectId: string, prefix?: string, limit?: number) {
    return metricNamesOf(this.db, projectId).then((a) => listed(a, 'names', prefix, limit));
  }

  labelKeys(projectId: string, metricName: string) {
    return labelKeysOf(this.db, projectId, metricId(metricName, 'metricName')).then((a) => listed(a, 'keys'));
  }

  labelValues(projectId: string, metricName: string, labelKey: string, prefix?: string, limit?: number) {
    return labelValuesOf(this.db, projectId, metricId(metricName, 'metricName'), labelKey, prefix).then((a) =>
      listed(a, 'values', prefix, limit),
    );
  }

  entityTypes(projectId: string) {
    return dimensionValuesOf(this.db, projectId, 'entity_type').then((a) => listed(a, 'entityTypes'));
  }

  entityNames(projectId: string, entityType?: string) {
    return dimensionValuesOf(this.db, projectId, 'entity_name', entityType).then((a) => listed(a, 'names'));
  }

  serviceNames(projectId: string) {
    return dimensionValuesOf(this.db, projectId, 'service_name').then((a) => listed(a, 'serviceNames'));
  }

  environments(projectId: string) {
    return dimensionValuesOf(this.db, projectId, 'environment').then((a) => listed(a, 'environments'));
  }

  tags(projectId: string, entityType?: string) {
    return tagsOf(this.db, projectId, entityType).then((a) => listed(a, 'tags'));
  }
}

/** Code-unit order, as Mastra's `Array.prototype.sort()` (not the database collation). */
const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

function listed<K extends string>(
  answer: QueryAnswer<string>,
  key: K,
  prefix?: string,
  limit?: number,
): WithLag<Record<K, string[]>> {
  let values = answer.rows.filter((v) => !prefix || v.startsWith(prefix)).sort(compare);
  if (limit) values = values.slice(0, limit);
  return { [key]: values, lag: answer.lag } as WithLag<Record<K, string[]>>;
}

function metricId(name: string, field: string): number {
  const m = METRIC_BY_NAME.get(name);
  if (!m)
    throw AppError.validation(field, `is not a known metric name (known: ${[...METRIC_BY_NAME.keys()].join(', ')})`);
  return m.id;
}
