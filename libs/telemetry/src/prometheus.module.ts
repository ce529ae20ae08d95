import { getQueueToken } from '@nestjs/bullmq';
import { Global, Module, OnModuleInit, Optional } from '@nestjs/common';
import { HttpAdapterHost, ModuleRef } from '@nestjs/core';
import { EventsHandler, type IEventHandler } from '@nestjs/cqrs';
import { StepUsageRecorded } from '@tollgate/contracts';
import { PrismaService } from '@tollgate/database';
import { QUEUE_NAMES } from '@tollgate/platform';
import type { Queue } from 'bullmq';
import { dbPoolConnections, ingestBatchLatency, ingestEvents, queueJobs } from './metrics';
import { MetricsController } from './metrics.controller';
import { ScrapeHooks } from './scrape-hooks';

/** Counts appended events from the in-process bus (published once per stored event). */
@EventsHandler(StepUsageRecorded)
export class IngestEventsCounter implements IEventHandler<StepUsageRecorded> {
  handle(): void {
    ingestEvents.inc();
  }
}

const JOB_STATES = ['waiting', 'active', 'delayed', 'prioritized', 'waiting-children', 'failed', 'completed'] as const;

/**
 * The service's Prometheus metrics: pool usage, queue depths, ingest latency; features register
 * their own scrape hooks.
 */
@Global()
@Module({
  providers: [ScrapeHooks, IngestEventsCounter],
  exports: [ScrapeHooks],
})
export class PrometheusModule implements OnModuleInit {
  constructor(
    private readonly hooks: ScrapeHooks,
    private readonly prisma: PrismaService,
    private readonly moduleRef: ModuleRef,
    @Optional() private readonly adapterHost?: HttpAdapterHost,
  ) {}

  onModuleInit(): void {
    this.hooks.register('db-pool', async () => {
      const pool = this.prisma.pool;
      dbPoolConnections.set({ state: 'total' }, pool.totalCount);
      dbPoolConnections.set({ state: 'idle' }, pool.idleCount);
      dbPoolConnections.set({ state: 'waiting' }, pool.waitingCount);
    });
    this.hooks.register('queues', async () => {
      await Promise.all(
        QUEUE_NAMES.map(async (name) => {
          const queue = this.moduleRef.get<Queue>(getQueueToken(name), { strict: false });
          const counts = await queue.getJobCounts(...JOB_STATES);
          for (const state of JOB_STATES) queueJobs.set({ queue: name, state }, counts[state] ?? 0);
        }),
      );
    });
    // Ingest latency as clients see it, measured on the HTTP server (absent in the worker alone).
    const fastify = this.adapterHost?.httpAdapter?.getInstance?.() as
      | {
          addHook(
            name: 'onResponse',
            fn: (
              req: { routeOptions: { url?: string }; method: string },
              reply: { statusCode: number; elapsedTime: number },
              done: () => void,
            ) => void,
          ): void;
        }
      | undefined;
    fastify?.addHook('onResponse', (req, reply, done) => {
      if (req.method === 'POST' && req.routeOptions.url === '/v1/events')
        ingestBatchLatency.observe({ status: String(reply.statusCode) }, reply.elapsedTime / 1000);
      done();
    });
  }
}

/** GET /metrics, for the API app. */
@Module({ imports: [PrometheusModule], controllers: [MetricsController] })
export class PrometheusHttpModule {}
