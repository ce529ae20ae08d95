import type { HttpTransport } from './http';

// The shapes of Mastra's observability API (getMetricAggregate & co.), which the service serves
// under the same routes so that Mastra's client and processors work against it unchanged.

/** How values are combined. */
export type AggregationType = 'sum' | 'avg' | 'min' | 'max' | 'count' | 'count_distinct' | 'last';
/** Bucket width of a time series. */
export type AggregationInterval = '1m' | '5m' | '15m' | '1h' | '1d';
/** Period an aggregate is compared with. */
export type ComparePeriod = 'previous_period' | 'previous_day' | 'previous_week';

/** The columns `count_distinct` counts (the service refuses any other with 400). */
export type DistinctColumn =
  | 'entityType'
  | 'entityName'
  | 'parentEntityType'
  | 'parentEntityName'
  | 'rootEntityType'
  | 'rootEntityName'
  | 'name'
  | 'provider'
  | 'model'
  | 'environment'
  | 'executionSource'
  | 'serviceName'
  | 'threadId'
  | 'resourceId';

/** Filters shared by every metric query; a timestamp may be a Date or an ISO string. */
export interface MetricsFilter {
  timestamp?: { start?: Date | string; end?: Date | string; startExclusive?: boolean; endExclusive?: boolean };
  traceId?: string;
  spanId?: string;
  traceIds?: string[];
  entityType?: string;
  entityName?: string;
  entityVersionId?: string;
  parentEntityType?: string;
  parentEntityName?: string;
  parentEntityVersionId?: string;
  rootEntityType?: string;
  rootEntityName?: string;
  rootEntityVersionId?: string;
  userId?: string;
  organizationId?: string;
  resourceId?: string;
  runId?: string;
  sessionId?: string;
  threadId?: string;
  requestId?: string;
  experimentId?: string;
  executionSource?: string;
  serviceName?: string;
  environment?: string;
  tags?: string[];
  name?: string[];
  source?: string;
  provider?: string;
  model?: string;
  costUnit?: string;
  labels?: Record<string, string>;
}

/** `metrics.aggregate` request: one number over the filtered observations. */
export interface MetricAggregateRequest {
  /** Metric names, e.g. `['mastra_model_total_input_tokens', 'mastra_model_total_output_tokens']`. */
  name: string[];
  aggregation: AggregationType;
  /** Column counted by `count_distinct`. */
  distinctColumn?: DistinctColumn;
  filters?: MetricsFilter;
  comparePeriod?: ComparePeriod;
}

/** `metrics.aggregate` answer; `estimatedCost` is in `costUnit` (e.g. USD). */
export interface MetricAggregateResponse {
  value: number | null;
  previousValue?: number | null;
  changePercent?: number | null;
  estimatedCost?: number | null;
  /** Steps in the answer that have no price (their cost is not in `estimatedCost`), and their tokens. */
  unpricedSteps?: number;
  unpricedTokens?: number;
  costUnit?: string | null;
  previousEstimatedCost?: number | null;
  costChangePercent?: number | null;
  [extra: string]: unknown;
}

/** `metrics.breakdown` request: one value per group. */
export interface MetricBreakdownRequest {
  name: string[];
  /** Dimensions, e.g. `['provider', 'model']`. */
  groupBy: string[];
  aggregation: AggregationType;
  distinctColumn?: DistinctColumn;
  filters?: MetricsFilter;
  limit?: number;
  orderDirection?: 'ASC' | 'DESC';
}

/** `metrics.breakdown` answer. */
export interface MetricBreakdownResponse {
  groups: {
    dimensions: Record<string, string | null>;
    value: number;
    estimatedCost?: number | null;
    costUnit?: string | null;
    unpricedSteps?: number;
    unpricedTokens?: number;
  }[];
  [extra: string]: unknown;
}

/** `metrics.timeSeries` request. */
export interface MetricTimeSeriesRequest {
  name: string[];
  interval: AggregationInterval;
  aggregation: AggregationType;
  distinctColumn?: DistinctColumn;
  filters?: MetricsFilter;
  groupBy?: string[];
}

/** `metrics.timeSeries` answer; point timestamps are Dates. */
export interface MetricTimeSeriesResponse {
  series: {
    name: string;
    costUnit?: string | null;
    points: {
      timestamp: Date;
      value: number;
      estimatedCost?: number | null;
      unpricedSteps?: number;
      unpricedTokens?: number;
    }[];
  }[];
  [extra: string]: unknown;
}

/** `metrics.percentiles` request. */
export interface MetricPercentilesRequest {
  name: string;
  /** Between 0 and 1, e.g. `[0.5, 0.95]`. */
  percentiles: number[];
  interval: AggregationInterval;
  filters?: MetricsFilter;
}

/** `metrics.percentiles` answer; point timestamps are Dates. */
export interface MetricPercentilesResponse {
  series: { percentile: number; points: { timestamp: Date; value: number }[] }[];
  [extra: string]: unknown;
}

const reviveSeries = <T extends { series?: { points?: { timestamp: unknown }[] }[] }>(res: T): T => {
  for (const s of res?.series ?? [])
    for (const p of s.points ?? []) if (typeof p.timestamp === 'string') p.timestamp = new Date(p.timestamp);
  return res;
};

/** The discovery calls: which names and values exist, for pickers and filters. */
export class DiscoveryApi {
  constructor(private readonly transport: HttpTransport) {}

  private get<T>(what: string, query: Record<string, string | number | undefined> = {}): Promise<T> {
    return this.transport.request<T>({ method: 'GET', path: `/api/observability/discovery/${what}`, query });
  }

  /** Metric names, optionally by prefix. */
  metricNames(args: { prefix?: string; limit?: number } = {}): Promise<{ names: string[] }> {
    return this.get('metric-names', args);
  }
  /** Label keys seen on a metric. */
  metricLabelKeys(args: { metricName: string }): Promise<{ keys: string[] }> {
    return this.get('metric-label-keys', args);
  }
  /** Values seen for one label of a metric. */
  metricLabelValues(args: {
    metricName: string;
    labelKey: string;
    prefix?: string;
    limit?: number;
  }): Promise<{ values: string[] }> {
    return this.get('metric-label-values', args);
  }
  /** Entity types (agent, workflow_step, tool, …). */
  entityTypes(): Promise<{ entityTypes: string[] }> {
    return this.get('entity-types');
  }
  /** Entity names, optionally of one type. */
  entityNames(args: { entityType?: string } = {}): Promise<{ names: string[] }> {
    return this.get('entity-names', args);
  }
  /** Service names. */
  serviceNames(): Promise<{ serviceNames: string[] }> {
    return this.get('service-names');
  }
  /** Environments. */
  environments(): Promise<{ environments: string[] }> {
    return this.get('environments');
  }
  /** Tags, optionally of one entity type. */
  tags(args: { entityType?: string } = {}): Promise<{ tags: string[] }> {
    return this.get('tags', args);
  }

  // The same calls under the names of Mastra's observability client and store, so that code
  // written against Mastra's API runs unchanged.

  /** Mastra's name for {@link metricNames}. */
  getMetricNames(args: { prefix?: string; limit?: number } = {}): Promise<{ names: string[] }> {
    return this.metricNames(args);
  }
  /** Mastra's name for {@link metricLabelKeys}. */
  getMetricLabelKeys(args: { metricName: string }): Promise<{ keys: string[] }> {
    return this.metricLabelKeys(args);
  }
  /** Mastra's name for {@link metricLabelValues}. */
  getMetricLabelValues(args: {
    metricName: string;
    labelKey: string;
    prefix?: string;
    limit?: number;
  }): Promise<{ values: string[] }> {
    return this.metricLabelValues(args);
  }
  /** Mastra's name for {@link entityTypes} (Mastra's store passes `{}`, its client nothing). */
  getEntityTypes(_args?: object): Promise<{ entityTypes: string[] }> {
    return this.entityTypes();
  }
  /** Mastra's name for {@link entityNames}. */
  getEntityNames(args: { entityType?: string } = {}): Promise<{ names: string[] }> {
    return this.entityNames(args);
  }
  /** Mastra's name for {@link serviceNames}. */
  getServiceNames(_args?: object): Promise<{ serviceNames: string[] }> {
    return this.serviceNames();
  }
  /** Mastra's name for {@link environments}. */
  getEnvironments(_args?: object): Promise<{ environments: string[] }> {
    return this.environments();
  }
  /** Mastra's name for {@link tags}. */
  getTags(args: { entityType?: string } = {}): Promise<{ tags: string[] }> {
    return this.tags(args);
  }
}

/** `client.metrics`: usage queries over time windows, in the shapes of Mastra's observability API. */
export class MetricsApi {
  /** Discovery of names and values. */
  readonly discovery: DiscoveryApi;

  constructor(private readonly transport: HttpTransport) {
    this.discovery = new DiscoveryApi(transport);
  }

  private post<T>(what: string, body: unknown): Promise<T> {
    return this.transport.request<T>({ method: 'POST', path: `/api/observability/metrics/${what}`, body });
  }

  /** `POST /api/observability/metrics/aggregate`. */
  aggregate(request: MetricAggregateRequest): Promise<MetricAggregateResponse> {
    return this.post('aggregate', request);
  }
  /** `POST /api/observability/metrics/breakdown`. */
  breakdown(request: MetricBreakdownRequest): Promise<MetricBreakdownResponse> {
    return this.post('breakdown', request);
  }
  /** `POST /api/observability/metrics/timeseries`. */
  async timeSeries(request: MetricTimeSeriesRequest): Promise<MetricTimeSeriesResponse> {
    return reviveSeries(await this.post<MetricTimeSeriesResponse>('timeseries', request));
  }
  /** `POST /api/observability/metrics/percentiles`. */
  async percentiles(request: MetricPercentilesRequest): Promise<MetricPercentilesResponse> {
    return reviveSeries(await this.post<MetricPercentilesResponse>('percentiles', request));
  }

  // Mastra's names (its observability client and store), beside the short ones above.

  /** Mastra's name for {@link aggregate}. */
  getMetricAggregate(request: MetricAggregateRequest): Promise<MetricAggregateResponse> {
    return this.aggregate(request);
  }
  /** Mastra's name for {@link breakdown}. */
  getMetricBreakdown(request: MetricBreakdownRequest): Promise<MetricBreakdownResponse> {
    return this.breakdown(request);
  }
  /** Mastra's name for {@link timeSeries}. */
  getMetricTimeSeries(request: MetricTimeSeriesRequest): Promise<MetricTimeSeriesResponse> {
    return this.timeSeries(request);
  }
  /** Mastra's name for {@link percentiles}. */
  getMetricPercentiles(request: MetricPercentilesRequest): Promise<MetricPercentilesResponse> {
    return this.percentiles(request);
  }
  /** Mastra's discovery names, on `metrics` as on Mastra's client (also on `metrics.discovery`). */
  getMetricNames(args: { prefix?: string; limit?: number } = {}): Promise<{ names: string[] }> {
    return this.discovery.metricNames(args);
  }
  getMetricLabelKeys(args: { metricName: string }): Promise<{ keys: string[] }> {
    return this.discovery.metricLabelKeys(args);
  }
  getMetricLabelValues(args: {
    metricName: string;
    labelKey: string;
    prefix?: string;
    limit?: number;
  }): Promise<{ values: string[] }> {
    return this.discovery.metricLabelValues(args);
  }
  getEntityTypes(_args?: object): Promise<{ entityTypes: string[] }> {
    return this.discovery.entityTypes();
  }
  getEntityNames(args: { entityType?: string } = {}): Promise<{ names: string[] }> {
    return this.discovery.entityNames(args);
  }
  getServiceNames(_args?: object): Promise<{ serviceNames: string[] }> {
    return this.discovery.serviceNames();
  }
  getEnvironments(_args?: object): Promise<{ environments: string[] }> {
    return this.discovery.environments();
  }
  getTags(args: { entityType?: string } = {}): Promise<{ tags: string[] }> {
    return this.discovery.tags(args);
  }
}
