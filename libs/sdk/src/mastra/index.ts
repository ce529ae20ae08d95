export { TollgateObservabilityStore, type TollgateObservabilityStoreOptions } from './observability-store';
export {
  TollgateStepProcessor,
  TOLLGATE_CONTEXT_KEYS,
  type TollgateStepProcessorOptions,
  type TollgateStepGuardOptions,
  type TollgateTripwireMetadata,
} from './step-processor';
export { metricsToStepEvents, MASTRA_TOKEN_METRICS, type MastraMetricLike } from './metrics-to-events';
