import { Controller, Get, HttpCode, OnModuleDestroy, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { z } from 'zod';
import { Config } from '../config';
import { Documented } from '../http/documented';
import { RedisClient } from '../redis';
import { PostgresProbe } from './postgres-probe';
import { redisAnswers } from './redis-probe';

const liveResponse = z.strictObject({ status: z.literal('ok') });
const up = z.enum(['ok', 'down']);
const readyResponse = z.strictObject({
  status: z.enum(['ok', 'unavailable']).describe('ok when PostgreSQL and Redis both answered within a second'),
  checks: z.strictObject({ postgres: up, redis: up }),
});

@Controller('health')
export class HealthController implements OnModuleDestroy {
  private readonly postgres: PostgresProbe;

  constructor(
    config: Config,
    private readonly redis: RedisClient,
  ) {
    this.postgres = new PostgresProbe(config.values.DATABASE_URL);
  }

  /** Liveness: the process answers. */
  @Get()
  @HttpCode(200)
  @Documented({ summary: 'Liveness: the process answers', tag: 'operations', response: liveResponse })
  live() {
    return { status: 'ok' };
  }

  /**
   * Readiness: PostgreSQL and Redis answer within a second — PostgreSQL on the probe's own
   * connection, not the pool that load may exhaust, and the second measured so that a busy event
   * loop does not count against them (see deadline.ts).
   */
  @Get('ready')
  @Documented({
    summary: 'Readiness: PostgreSQL and Redis answer within a second',
    tag: 'operations',
    response: readyResponse,
    responseDescription: 'Ready',
    alsoAnswers: { 503: { description: 'Not ready: `checks` says which is down', schema: readyResponse } },
  })
  async ready(@Res({ passthrough: true }) reply: FastifyReply) {
    const [postgres, redis] = await Promise.all([this.postgres.check(1000), redisAnswers(this.redis.redis, 1000)]);
    const ok = postgres && redis;
    void reply.status(ok ? 200 : 503);
    return {
      status: ok ? 'ok' : 'unavailable',
      checks: { postgres: postgres ? 'ok' : 'down', redis: redis ? 'ok' : 'down' },
    };
  }

  async onModuleDestroy(): Promise<void> {
    await this.postgres.close();
  }
}
