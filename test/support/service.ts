import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { EVENT_SELECT, PrismaService } from '@tollgate/database';
import { loadConfig, type AppConfig } from '@tollgate/platform';
import { randomBytes } from 'node:crypto';
import { createApiApp } from '../../apps/api/src/bootstrap';
import { checkAnswersOf } from './contract';
import { TEST_ADMIN_TOKEN, TEST_DATABASE_URL, TEST_REDIS_URL } from './env';

export interface RunningService {
  url: string;
  app: NestFastifyApplication;
  prisma: PrismaService;
  config: AppConfig;
  close(): Promise<void>;
}

export function testConfig(overrides: Record<string, string> = {}): AppConfig {
  return loadConfig({
    DATABASE_URL: TEST_DATABASE_URL,
    REDIS_URL: TEST_REDIS_URL,
    TOLLGATE_ADMIN_TOKEN: TEST_ADMIN_TOKEN,
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'error',
    QUEUE_PREFIX: `tollgate-test-${randomBytes(4).toString('hex')}`,
    // Exporters in the tests send to receivers on 127.0.0.1, which only the operator can allow.
    TOLLGATE_EXPORTER_ALLOW_HOSTS: '127.0.0.1',
    ...overrides,
  });
}

/** The API listening on a real port of 127.0.0.1, against the test database and Redis. */
export async function startService(overrides: Record<string, string> = {}): Promise<RunningService> {
  const config = testConfig(overrides);
  const app = await createApiApp(config);
  await app.listen(0, '127.0.0.1');
  const address = app.getHttpServer().address() as { port: number };
  checkAnswersOf(`http://127.0.0.1:${address.port}`);
  return {
    url: `http://127.0.0.1:${address.port}`,
    app,
    prisma: app.get(PrismaService),
    config,
    close: () => app.close(),
  };
}
