import { Module } from '@nestjs/common';
import { ObservabilityController } from './http/observability.controller';
import { MetricsProjector } from './projection/metrics-projector';
import { WakeProjectorOnIngest } from './projection/wake-projector';
import { MetricQueries } from './query/metric-queries';
import { MetricsReadDb } from './query/metrics-read-db';

/**
 * What Mastra's observability routes answer from: the rollup projection and the queries over it
 * (API, worker and CLI).
 */
@Module({
  providers: [MetricsProjector, MetricsReadDb, MetricQueries],
  exports: [MetricsProjector, MetricQueries],
})
export class MastraObservabilityModule {}

/** Mastra's observability routes, and the wake-up of the projector after ingest (API app). */
@Module({
  imports: [MastraObservabilityModule],
  controllers: [ObservabilityController],
  providers: [WakeProjectorOnIngest],
})
export class MastraObservabilityHttpModule {}
