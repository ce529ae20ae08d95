/**
 * A compile-time test, run by `npm run typecheck`: the SDK's request and response types against the
 * types a client generator (openapi-typescript) makes of the OpenAPI document, for the routes the SDK
 * calls — the guard check, ingest and the metric queries. What the SDK sends must be a request the
 * document accepts; what the document says the service answers must be what the SDK reads. Where
 * both directions hold, both are checked: the SDK then describes the route exactly.
 *
 * test/contract/openapi.d.ts is generated (apps/api/src/openapi-document.spec.ts fails when it is
 * stale; UPDATE_OPENAPI_TYPES=1 regenerates it). Nothing here runs: a mismatch is a type error.
 */
import type {
  GuardCheckRequestInput,
  GuardCheckResponse,
  IngestResponse,
  MetricAggregateRequest,
  MetricAggregateResponse,
  MetricBreakdownRequest,
  MetricBreakdownResponse,
  MetricPercentilesRequest,
  MetricPercentilesResponse,
  MetricTimeSeriesRequest,
  MetricTimeSeriesResponse,
  StepUsageEventInput,
} from '../../libs/sdk/src';
import type { operations } from './openapi';

/** A value as JSON carries it: a Date is sent as its ISO string (and revived from it by the SDK). */
type Json<T> = T extends Date
  ? string
  : T extends (infer E)[]
    ? Json<E>[]
    : T extends object
      ? { [K in keyof T]: Json<T[K]> }
      : T;

type Body<Op extends keyof operations> = operations[Op] extends {
  requestBody: { content: { 'application/json': infer B } };
}
  ? B
  : never;
type Answer<Op extends keyof operations> = operations[Op] extends {
  responses: { 200: { content: { 'application/json': infer R } } };
}
  ? R
  : never;

/** Compiles only if `B` accepts every `A`; the error names the field that does not fit. */
type Fits<A extends B, B> = A;

/** What the SDK sends is a body the route accepts. */
export type Requests = [
  Fits<Json<GuardCheckRequestInput>, Body<'postV1GuardCheck'>>,
  Fits<{ events: Json<StepUsageEventInput>[] }, Body<'postV1Events'>>,
  Fits<Json<MetricAggregateRequest>, Body<'postApiObservabilityMetricsAggregate'>>,
  Fits<Json<MetricBreakdownRequest>, Body<'postApiObservabilityMetricsBreakdown'>>,
  Fits<Json<MetricTimeSeriesRequest>, Body<'postApiObservabilityMetricsTimeseries'>>,
  Fits<Json<MetricPercentilesRequest>, Body<'postApiObservabilityMetricsPercentiles'>>,
];

/** What the route answers is what the SDK reads. */
export type Responses = [
  Fits<Answer<'postV1GuardCheck'>, Json<GuardCheckResponse>>,
  Fits<Answer<'postV1Events'>, Json<IngestResponse>>,
  Fits<Answer<'postApiObservabilityMetricsAggregate'>, Json<MetricAggregateResponse>>,
  Fits<Answer<'postApiObservabilityMetricsBreakdown'>, Json<MetricBreakdownResponse>>,
  Fits<Answer<'postApiObservabilityMetricsTimeseries'>, Json<MetricTimeSeriesResponse>>,
  Fits<Answer<'postApiObservabilityMetricsPercentiles'>, Json<MetricPercentilesResponse>>,
];

/** The other way round: every body the guard check and ingest accept, the SDK can send. */
export type Exactly = [
  Fits<Body<'postV1GuardCheck'>, Json<GuardCheckRequestInput>>,
  Fits<Body<'postV1Events'>, { events: Json<StepUsageEventInput>[] }>,
  Fits<Json<GuardCheckResponse>, Answer<'postV1GuardCheck'>>,
  Fits<Json<IngestResponse>, Answer<'postV1Events'>>,
];
