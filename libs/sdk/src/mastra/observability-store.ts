import { ObservabilityStorage, type ObservabilityStorageFeature } from '@mastra/core/storage';
import type {
  BatchCreateMetricsArgs,
  BatchCreateSpansArgs,
  BatchUpdateSpansArgs,
  BatchCreateLogsArgs,
  CreateSpanArgs,
  GetEntityNamesArgs,
  GetEntityNamesResponse,
  GetEntityTypesArgs,
  GetEntityTypesResponse,
  GetEnvironmentsArgs,
  GetEnvironmentsResponse,
  GetMetricAggregateArgs,
  GetMetricAggregateResponse,
  GetMetricBreakdownArgs,
  GetMetricBreakdownResponse,
  GetMetricLabelKeysArgs,
  GetMetricLabelKeysResponse,
  GetMetricLabelValuesArgs,
  GetMetricLabelValuesResponse,
  GetMetricNamesArgs,
  GetMetricNamesResponse,
  GetMetricPercentilesArgs,
  GetMetricPercentilesResponse,
  GetMetricTimeSeriesArgs,
  GetMetricTimeSeriesResponse,
  GetServiceNamesArgs,
  GetServiceNamesResponse,
  GetTagsArgs,
  GetTagsResponse,
  UpdateSpanArgs,
} from '@mastra/core/storage';
import { TollgateClient, type TollgateClientOptions } from '../client';
import { TollgateError } from '../errors';
import type { RecordStepEvent } from '../events/prepare-event';
import { metricsToStepEvents } from './metrics-to-events';

/** Settings of {@link TollgateObservabilityStore}: a client, or the options to make one. */
export type TollgateObservabilityStoreOptions = (
  { client: TollgateClient } | ({ client?: undefined } & TollgateClientOptions)
) & {
  /** Called when a step event made from Mastra's metrics is invalid (it is then skipped). */
  onInvalidEvent?: (error: TollgateError, event: RecordStepEvent) => void;
};

type Strategy = ObservabilityStorage['observabilityStrategy'];

/**
 * Mastra's observability storage, backed by Tollgate.
 *
 * - Metric reads (`getMetricAggregate`, `getMetricBreakdown`, `getMetricTimeSeries`,
 *   `getMetricPercentiles`) and discovery call Tollgate, so Mastra's `TokenCostControl` /
 *   `CostGuardProcessor` enforce budgets from Tollgate's data.
 * - Metric writes from Mastra's exporters (`batchCreateMetrics`) become Tollgate step events,
 *   one per model span, so an app that only swaps its store reports its usage too.
 * - Tollgate keeps usage, not traces: span and log writes are accepted and ignored. Keep a trace
 *   store if you need traces, and route only this domain here.
 *
 * @example
 * ```ts
 * const observability = new TollgateObservabilityStore({ baseUrl, apiKey });
 * const mastra = new Mastra({ agents, storage: new MastraCompositeStore({ id: 'app', default: libsql, domains: { observability } }) });
 * ```
 */
export class TollgateObservabilityStore extends ObservabilityStorage {
  /** The client the store reads and writes through. */
  readonly client: TollgateClient;
  private readonly onInvalidEvent?: (error: TollgateError, event: RecordStepEvent) => void;
  private readonly ownsClient: boolean;

  constructor(options: TollgateObservabilityStoreOptions) {
    super();
    this.ownsClient = !options.client;
    this.client = options.client ?? new TollgateClient(options as TollgateClientOptions);
    this.onInvalidEvent = options.onInvalidEvent;
  }

  /** Metric reads and every discovery call. */
  override getFeatures(): readonly ObservabilityStorageFeature[] {
    return [
      'metrics',
      'metric-discovery',
      'entity-type-discovery',
      'entity-name-discovery',
      'service-name-discovery',
      'environment-discovery',
      'tag-discovery',
    ];
  }

  /** Inserts only: Tollgate never updates what it stored. */
  override get observabilityStrategy(): Strategy {
    return { preferred: 'insert-only', supported: ['insert-only'] };
  }

  /** Tollgate's event log is append-only; nothing is cleared through Mastra. */
  override async dangerouslyClearAll(): Promise<void> {
    throw new TollgateError(
      'Tollgate never deletes recorded usage; retention drops whole time partitions on the service',
      { code: 'forbidden' },
    );
  }

  /** Sends what is buffered and, when the store made its own client, stops it. */
  async close(): Promise<void> {
    if (this.ownsClient) await this.client.shutdown();
    else await this.client.flush();
  }

  /** Turns Mastra's model token metrics into step events (one per model span) and records them. */
  override async batchCreateMetrics(args: BatchCreateMetricsArgs): Promise<void> {
    for (const event of metricsToStepEvents(args.metrics)) {
      try {
        this.client.events.record(event);
      } catch (err) {
        if (!(err instanceof TollgateError)) throw err;
        this.onInvalidEvent?.(err, event);
      }
    }
  }

  override async createSpan(_args: CreateSpanArgs): Promise<void> {}
  override async updateSpan(_args: UpdateSpanArgs): Promise<void> {}
  override async batchCreateSpans(_args: BatchCreateSpansArgs): Promise<void> {}
  override async batchUpdateSpans(_args: BatchUpdateSpansArgs): Promise<void> {}
  override async batchCreateLogs(_args: BatchCreateLogsArgs): Promise<void> {}

  override getMetricAggregate(args: GetMetricAggregateArgs): Promise<GetMetricAggregateResponse> {
    return this.client.metrics.aggregate(args);
  }
  override getMetricBreakdown(args: GetMetricBreakdownArgs): Promise<GetMetricBreakdownResponse> {
    return this.client.metrics.breakdown(args);
  }
  override getMetricTimeSeries(args: GetMetricTimeSeriesArgs): Promise<GetMetricTimeSeriesResponse> {
    return this.client.metrics.timeSeries(args);
  }
  override getMetricPercentiles(args: GetMetricPercentilesArgs): Promise<GetMetricPercentilesResponse> {
    return this.client.metrics.percentiles(args);
  }
  override getMetricNames(args: GetMetricNamesArgs): Promise<GetMetricNamesResponse> {
    return this.client.metrics.discovery.metricNames(args);
  }
  override getMetricLabelKeys(args: GetMetricLabelKeysArgs): Promise<GetMetricLabelKeysResponse> {
    return this.client.metrics.discovery.metricLabelKeys(args);
  }
  override getMetricLabelValues(args: GetMetricLabelValuesArgs): Promise<GetMetricLabelValuesResponse> {
    return this.client.metrics.discovery.metricLabelValues(args);
  }
  override getEntityTypes(_args: GetEntityTypesArgs): Promise<GetEntityTypesResponse> {
    return this.client.metrics.discovery.entityTypes() as Promise<GetEntityTypesResponse>;
  }
  override getEntityNames(args: GetEntityNamesArgs): Promise<GetEntityNamesResponse> {
    return this.client.metrics.discovery.entityNames(args);
  }
  override getServiceNames(_args: GetServiceNamesArgs): Promise<GetServiceNamesResponse> {
    return this.client.metrics.discovery.serviceNames();
  }
  override getEnvironments(_args: GetEnvironmentsArgs): Promise<GetEnvironmentsResponse> {
    return this.client.metrics.discovery.environments();
  }
  override getTags(args: GetTagsArgs): Promise<GetTagsResponse> {
    return this.client.metrics.discovery.tags(args);
  }
}
