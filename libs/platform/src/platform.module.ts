import { BullModule } from '@nestjs/bullmq';
import { DynamicModule, Global, Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { CqrsModule } from '@nestjs/cqrs';
import { EventPartitions, PrismaService } from '@tollgate/database';
import { ApiKeyAuth } from './auth/api-key-auth';
import { AuthFailureThrottle } from './auth/auth-failure-throttle';
import { Caches } from './caches';
import { Clock } from './clock';
import { Config, type AppConfig } from './config';
import { ShutdownLog } from './logging/shutdown-log';
import { JobHandlers } from './queues/job-handlers';
import { QueueErrors } from './queues/queue-errors';
import { QUEUE_NAMES } from './queues/queues';
import { RateLimiter } from './rate-limit/rate-limiter';
import { QueueConnection, queueConnection, RedisClient } from './redis';

/**
 * What both apps stand on: configuration, PostgreSQL through Prisma, Redis and the BullMQ queues,
 * and the CQRS buses. Built from a config parsed once at boot.
 */
@Global()
@Module({})
export class PlatformModule {
  static forRoot(config: AppConfig): DynamicModule {
    // One connection for every queue (on a Redis Cluster: one Cluster client, closed at shutdown).
    const connection = queueConnection(config);
    const providers = [
      { provide: Config, useValue: new Config(config) },
      { provide: QueueConnection, useValue: new QueueConnection(connection) },
      { provide: PrismaService, useFactory: () => new PrismaService(config.DATABASE_URL, config.DATABASE_POOL_SIZE) },
      {
        provide: EventPartitions,
        useFactory: (prisma: PrismaService) => new EventPartitions(prisma),
        inject: [PrismaService],
      },
      RedisClient,
      JobHandlers,
      Clock,
      Caches,
      QueueErrors,
      RateLimiter,
      AuthFailureThrottle,
      ApiKeyAuth,
      ShutdownLog,
    ];
    const queues = BullModule.registerQueue(...QUEUE_NAMES.map((name) => ({ name })));
    return {
      module: PlatformModule,
      global: true,
      imports: [
        DiscoveryModule,
        CqrsModule.forRoot(),
        BullModule.forRoot({ connection, prefix: config.QUEUE_PREFIX }),
        queues,
      ],
      providers,
      exports: [...providers, queues, CqrsModule],
    };
  }
}
