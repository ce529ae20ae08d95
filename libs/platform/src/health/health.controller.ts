import { Controller, Get, HttpCode, Res } from '@nestjs/common';
import { PrismaService } from '@tollgate/database';
import type { FastifyReply } from 'fastify';
import { RedisClient } from '../redis';

async function within<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('timeout')), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

@Controller('health')
export class HealthController {
  constructor(
    private readonly prisma: PrismaService,
    private readonly redis: RedisClient,
  ) {}

  /** Liveness: the process answers. */
  @Get()
  @HttpCode(200)
  live() {
    return { status: 'ok' };
  }

  /** Readiness: PostgreSQL and Redis answer within a second. */
  @Get('ready')
  async ready(@Res({ passthrough: true }) reply: FastifyReply) {
    const [postgres, redis] = await Promise.all([
      within(this.prisma.$queryRaw`SELECT 1`, 1000).then(() => true, () => false),
      this.redis.ping(1000),
    ]);
    const ok = postgres && redis;
    void reply.status(ok ? 200 : 503);
    return { status: ok ? 'ok' : 'unavailable', checks: { postgres: postgres ? 'ok' : 'down', redis: redis ? 'ok' : 'down' } };
  }
}
