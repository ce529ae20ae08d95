import { DynamicModule, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { INestApplicationContext } from '@nestjs/common';
import { createLogger, PlatformModule, type AppConfig } from '@tollgate/platform';
import { WorkerFeaturesModule } from './worker.module';

@Module({})
class WorkerRootModule {
  static with(config: AppConfig): DynamicModule {
    return { module: WorkerRootModule, imports: [PlatformModule.forRoot(config), WorkerFeaturesModule] };
  }
}

/** The worker: a Nest application context (no HTTP) running the BullMQ processors. */
export async function createWorkerApp(config: AppConfig): Promise<INestApplicationContext> {
  const app = await NestFactory.createApplicationContext(WorkerRootModule.with(config), {
    logger: createLogger(config.LOG_LEVEL),
  });
  app.enableShutdownHooks();
  return app;
}
