import { Module, OnModuleInit } from '@nestjs/common';
import { PrismaService } from '@tollgate/database';
import {
  deadLetterBatches,
  deadLetterEvents,
  exporterLagEvents,
  exporterLagSeconds,
  exporterPaused,
  PrometheusModule,
  ScrapeHooks,
} from '@tollgate/telemetry';
import { ExportersController } from './config/exporters.controller';
import { ExportersService } from './config/exporters.service';
import { Destinations } from './destination/destinations';
import { ExportJobs } from './delivery/export-jobs';
import { ExportPipeline } from './delivery/export-pipeline';
import { exporterLags } from './delivery/export-state.sql';

/** The exporters' domain, shared by the API (configuration) and the worker (delivery). */
@Module({
  imports: [PrometheusModule],
  providers: [Destinations, ExportJobs, ExportPipeline, ExportersService],
  exports: [Destinations, ExportJobs, ExportPipeline, ExportersService],
})
export class ExportersModule implements OnModuleInit {
  constructor(
    private readonly hooks: ScrapeHooks,
    private readonly prisma: PrismaService,
  ) {}

  onModuleInit(): void {
    this.hooks.register('exporters', async () => {
      const lags = await exporterLags(this.prisma);
      for (const gauge of [exporterLagEvents, exporterLagSeconds, exporterPaused, deadLetterBatches, deadLetterEvents])
        gauge.reset();
      for (const l of lags) {
        const labels = { project: l.projectId, exporter: l.name };
        exporterLagEvents.set(labels, l.lagEvents);
        exporterLagSeconds.set(labels, l.lagSeconds);
        exporterPaused.set(labels, l.status === 'paused' ? 1 : 0);
        deadLetterBatches.set(labels, l.deadBatches);
        deadLetterEvents.set(labels, l.deadEvents);
      }
    });
  }
}

/** The exporters' HTTP surface, for the API app. */
@Module({ imports: [ExportersModule], controllers: [ExportersController] })
export class ExportersHttpModule {}
