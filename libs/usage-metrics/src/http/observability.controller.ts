import { Body, Controller, Get, HttpCode, Post, Query, Res, UseGuards } from '@nestjs/common';
import { AuthGuard, CurrentPrincipal, Documented, RequireScope, ZodPipe, type Principal } from '@tollgate/platform';
import type { FastifyReply } from 'fastify';
import type { z } from 'zod';
import {
  aggregateResponseSchema,
  breakdownResponseSchema,
  entityNamesResponseSchema,
  entityTypesResponseSchema,
  environmentsResponseSchema,
  labelKeysResponseSchema,
  labelValuesResponseSchema,
  metricNamesResponseSchema,
  percentilesResponseSchema,
  serviceNamesResponseSchema,
  tagsResponseSchema,
  timeSeriesResponseSchema,
  aggregateArgsSchema,
  breakdownArgsSchema,
  entityTypeQuerySchema,
  labelKeysQuerySchema,
  labelValuesQuerySchema,
  metricNamesQuerySchema,
  noQuerySchema,
  percentilesArgsSchema,
  timeSeriesArgsSchema,
  type ProjectionLag,
} from '../mastra-contract';
import { MetricQueries } from '../query/metric-queries';

/** Reports the projection's lag as headers too (the body's `lag` field is not in Mastra's types). */
function withLagHeaders<T extends { lag: ProjectionLag }>(reply: FastifyReply, answer: T): T {
  void reply
    .header('x-tollgate-projection-lag-events', String(answer.lag.events))
    .header('x-tollgate-projection-lag-ms', String(answer.lag.ms));
  return answer;
}

const TAG = 'metrics (Mastra-compatible)';

/** Mastra's observability metric routes (`@mastra/client-js` calls these paths unchanged). */
@Controller('api/observability')
@UseGuards(AuthGuard)
@RequireScope('read')
export class ObservabilityController {
  constructor(private readonly queries: MetricQueries) {}

  @Post('metrics/aggregate')
  @HttpCode(200)
  @Documented({
    summary:
      'getMetricAggregate: one value over the matching metric records, with estimatedCost/costUnit and comparePeriod',
    tag: TAG,
    auth: 'read',
    body: aggregateArgsSchema,
    response: aggregateResponseSchema,
  })
  async aggregate(
    @CurrentPrincipal() p: Principal,
    @Body(new ZodPipe(aggregateArgsSchema)) body: z.infer<typeof aggregateArgsSchema>,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    return withLagHeaders(reply, await this.queries.aggregate(p.projectId, body));
  }

  @Post('metrics/breakdown')
  @HttpCode(200)
  @Documented({
    summary: 'getMetricBreakdown: the aggregation per group of columns or label keys',
    tag: TAG,
    auth: 'read',
    body: breakdownArgsSchema,
    response: breakdownResponseSchema,
  })
  async breakdown(
    @CurrentPrincipal() p: Principal,
    @Body(new ZodPipe(breakdownArgsSchema)) body: z.infer<typeof breakdownArgsSchema>,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    return withLagHeaders(reply, await this.queries.breakdown(p.projectId, body));
  }

  @Post('metrics/timeseries')
  @HttpCode(200)
  @Documented({
    summary: 'getMetricTimeSeries: the aggregation per time bucket (1m, 5m, 15m, 1h, 1d), optionally per group',
    tag: TAG,
    auth: 'read',
    body: timeSeriesArgsSchema,
    response: timeSeriesResponseSchema,
  })
  async timeSeries(
    @CurrentPrincipal() p: Principal,
    @Body(new ZodPipe(timeSeriesArgsSchema)) body: z.infer<typeof timeSeriesArgsSchema>,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    return withLagHeaders(reply, await this.queries.timeSeries(p.projectId, body));
  }

  @Post('metrics/percentiles')
  @HttpCode(200)
  @Documented({
    summary: 'getMetricPercentiles: percentiles of one metric per time bucket',
    tag: TAG,
    auth: 'read',
    body: percentilesArgsSchema,
    response: percentilesResponseSchema,
  })
  async percentiles(
    @CurrentPrincipal() p: Principal,
    @Body(new ZodPipe(percentilesArgsSchema)) body: z.infer<typeof percentilesArgsSchema>,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    return withLagHeaders(reply, await this.queries.percentiles(p.projectId, body));
  }

  @Get('discovery/metric-names')
  @Documented({
    summary: 'getMetricNames',
    tag: TAG,
    auth: 'read',
    query: metricNamesQuerySchema,
    response: metricNamesResponseSchema,
  })
  async metricNames(
    @CurrentPrincipal() p: Principal,
    @Query(new ZodPipe(metricNamesQuerySchema)) q: z.infer<typeof metricNamesQuerySchema>,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    return withLagHeaders(reply, await this.queries.metricNames(p.projectId, q.prefix, q.limit));
  }

  @Get('discovery/metric-label-keys')
  @Documented({
    summary: 'getMetricLabelKeys',
    tag: TAG,
    auth: 'read',
    query: labelKeysQuerySchema,
    response: labelKeysResponseSchema,
  })
  async labelKeys(
    @CurrentPrincipal() p: Principal,
    @Query(new ZodPipe(labelKeysQuerySchema)) q: z.infer<typeof labelKeysQuerySchema>,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    return withLagHeaders(reply, await this.queries.labelKeys(p.projectId, q.metricName));
  }

  @Get('discovery/metric-label-values')
  @Documented({
    summary: 'getMetricLabelValues',
    tag: TAG,
    auth: 'read',
    query: labelValuesQuerySchema,
    response: labelValuesResponseSchema,
  })
  async labelValues(
    @CurrentPrincipal() p: Principal,
    @Query(new ZodPipe(labelValuesQuerySchema)) q: z.infer<typeof labelValuesQuerySchema>,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    return withLagHeaders(
      reply,
      await this.queries.labelValues(p.projectId, q.metricName, q.labelKey, q.prefix, q.limit),
    );
  }

  @Get('discovery/entity-types')
  @Documented({
    summary: 'getEntityTypes',
    tag: TAG,
    auth: 'read',
    // No parameter, and one given is refused with 400.
    query: noQuerySchema,
    response: entityTypesResponseSchema,
  })
  async entityTypes(
    @CurrentPrincipal() p: Principal,
    @Query(new ZodPipe(noQuerySchema)) _q: unknown,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    return withLagHeaders(reply, await this.queries.entityTypes(p.projectId));
  }

  @Get('discovery/entity-names')
  @Documented({
    summary: 'getEntityNames',
    tag: TAG,
    auth: 'read',
    query: entityTypeQuerySchema,
    response: entityNamesResponseSchema,
  })
  async entityNames(
    @CurrentPrincipal() p: Principal,
    @Query(new ZodPipe(entityTypeQuerySchema)) q: z.infer<typeof entityTypeQuerySchema>,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    return withLagHeaders(reply, await this.queries.entityNames(p.projectId, q.entityType));
  }

  @Get('discovery/service-names')
  @Documented({
    summary: 'getServiceNames',
    tag: TAG,
    auth: 'read',
    // No parameter, and one given is refused with 400.
    query: noQuerySchema,
    response: serviceNamesResponseSchema,
  })
  async serviceNames(
    @CurrentPrincipal() p: Principal,
    @Query(new ZodPipe(noQuerySchema)) _q: unknown,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    return withLagHeaders(reply, await this.queries.serviceNames(p.projectId));
  }

  @Get('discovery/environments')
  @Documented({
    summary: 'getEnvironments',
    tag: TAG,
    auth: 'read',
    // No parameter, and one given is refused with 400.
    query: noQuerySchema,
    response: environmentsResponseSchema,
  })
  async environments(
    @CurrentPrincipal() p: Principal,
    @Query(new ZodPipe(noQuerySchema)) _q: unknown,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    return withLagHeaders(reply, await this.queries.environments(p.projectId));
  }

  @Get('discovery/tags')
  @Documented({
    summary: 'getTags',
    tag: TAG,
    auth: 'read',
    query: entityTypeQuerySchema,
    response: tagsResponseSchema,
  })
  async tags(
    @CurrentPrincipal() p: Principal,
    @Query(new ZodPipe(entityTypeQuerySchema)) q: z.infer<typeof entityTypeQuerySchema>,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    return withLagHeaders(reply, await this.queries.tags(p.projectId, q.entityType));
  }
}
