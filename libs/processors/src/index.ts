/**
 * `@tollgate/processors`: Mastra processors that count tokens exactly and enforce budgets kept by
 * Tollgate.
 *
 * @packageDocumentation
 */
export { TokenLimiterProcessor } from './token-limiter/token-limiter.processor';
export type {
  TokenLimiterOptions,
  TokenLimiterGuardOptions,
  TokenLimiterTripwireMetadata,
  TokenLimitReachedPart,
} from './token-limiter/options';
export type {
  TokenLimiterInputArgs,
  TokenLimiterStepArgs,
  TokenLimiterStreamArgs,
  TokenLimiterResultArgs,
} from './token-limiter/mastra-args';
export { CostGuardProcessor, TokenCostControl, CostGuardBase } from './cost-guard/cost-guard.processor';
export type {
  TokenCostControlOptions,
  TokenCostControlTripwireMetadata,
  TokenCostControlViolationDetail,
  TokenCostControlUsage,
  TokenCostControlBreakdownEntry,
} from './cost-guard/cost-guard.processor';
export type { CostGuardLabels } from './cost-guard/labels';
export type { CostGuardOptions, CostScope, CostWindow, FallbackModel } from './cost-guard/options';
export type {
  CostGuardTripwireMetadata,
  CostGuardViolationDetail,
  CostGuardViolation,
  CostGuardUsage,
  CostGuardBreakdownEntry,
} from './cost-guard/outcomes';
export type {
  CostGuardStepArgs,
  CostGuardStepResult,
  CostGuardResponseArgs,
  MastraShape,
} from './cost-guard/mastra-args';
export type { CostGuardStepReport } from './cost-guard/step-report';
export {
  ObservabilityCostSource,
  TOKEN_COST_METRICS,
  type ObservabilityStoreShape,
} from './cost-guard/observability-cost-source';
export { formatCost, formatViolationMessage } from './cost-guard/violation-message';
export { readContextIds, scopeId } from './tollgate/context-ids';
export type { TrimMode } from './token-limiter/select-messages';
export { truncateByTokens, type TokenCodec } from './token-limiter/truncate-by-tokens';
export { TokenCountCache } from './token-count/count-cache';
export {
  MessageTokenCounter,
  type MessageTokenCounterOptions,
  TOKENS_PER_MESSAGE,
  TOKENS_PER_CONVERSATION,
  TOKENS_PER_TOOL_CALL,
  TOKENS_PER_TOOL_RESULT,
  DEFAULT_IMAGE_TOKENS,
  DEFAULT_FILE_TOKENS,
} from './token-count/message-token-counter';
export type {
  TollgateGuardClient,
  GuardCheckCallOptions,
  GuardAdjust,
  GuardCheckRequest,
  GuardCheckResponse,
  GuardEstimateView,
  GuardContext,
  GuardEstimate,
  GuardFinding,
  GuardLimit,
  GuardScope,
  GuardScopeUsage,
  GuardWindow,
  StepUsageEvent,
} from './tollgate/guard-client';
export { usageKey } from './tollgate/guard-client';
export type * from './mastra-shapes';
