export { TollgateClient, type TollgateClientOptions, type EventsApi } from './client';
export { TollgateError, type TollgateErrorCode } from './errors';
export type { DropReason, DroppedEvents, RejectedEvent, EventStats, FlushResult } from './events/event-buffer';
export type { RecordStepEvent } from './events/prepare-event';
export { GuardApi, type GuardOptions, type GuardCheckOptions, type GuardReleaseResponse } from './guard';
export { MetricsApi, DiscoveryApi } from './metrics';
export type {
  AggregationType,
  AggregationInterval,
  ComparePeriod,
  DistinctColumn,
  MetricsFilter,
  MetricAggregateRequest,
  MetricAggregateResponse,
  MetricBreakdownRequest,
  MetricBreakdownResponse,
  MetricTimeSeriesRequest,
  MetricTimeSeriesResponse,
  MetricPercentilesRequest,
  MetricPercentilesResponse,
} from './metrics';
export type { FetchLike } from './http';
export { pooledFetch, type PooledFetch, type PooledFetchOptions } from './pooled-fetch';
export type { Clock } from './clock';
// The service's own schemas and types (compiled from libs/contracts into this package).
export { stepUsageEventSchema, usageSchema } from '../../contracts/src/step-event';
export type {
  StepUsageEvent,
  StepUsageEventInput,
  Usage,
  IngestResponse,
  IngestResult,
} from '../../contracts/src/step-event';
export { guardCheckRequestSchema } from '../../contracts/src/guard';
// One normalization of provider usage to Tollgate's meaning (input includes cache reads and
// writes, output includes reasoning), the one the Mastra integration and the processors use.
export {
  fromOpenAI,
  fromAnthropic,
  fromGemini,
  fromBedrock,
  fromAiSdk,
  fromMastraUsageStats,
} from '../../contracts/src/usage/normalize-usage';
export type {
  NormalizedUsage,
  UsageCounts,
  OpenAIChatUsage,
  OpenAIResponsesUsage,
  AnthropicUsage,
  GeminiUsageMetadata,
  GeminiModalityTokenCount,
  BedrockUsage,
  AiSdkUsage,
  AiSdkV3Usage,
  AiSdkFlatUsage,
  AiSdkUsageContext,
  MastraUsageStats,
} from '../../contracts/src/usage/normalize-usage';
export type {
  GuardCheckRequest,
  GuardCheckRequestInput,
  GuardCheckResponse,
  GuardContext,
  GuardLimit,
  GuardEstimate,
  GuardFinding,
  ScopeUsage,
  Scope,
  Window,
  LimitType,
} from '../../contracts/src/guard';
