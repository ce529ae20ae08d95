import { Controller, Get, Header, Req } from '@nestjs/common';
import { AppError, Config, Documented } from '@tollgate/platform';
import type { FastifyRequest } from 'fastify';
import { timingSafeEqual } from 'node:crypto';
import { metricsRegistry } from './metrics';
import { ScrapeHooks } from './scrape-hooks';

function tokenMatches(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** Prometheus scrape endpoint; open unless METRICS_TOKEN is set. */
@Controller('metrics')
export class MetricsController {
  constructor(
    private readonly hooks: ScrapeHooks,
    private readonly config: Config,
  ) {}

  @Get()
  @Header('content-type', metricsRegistry.contentType)
  @Header('cache-control', 'no-store')
  @Documented({ summary: 'Service metrics in Prometheus text format (METRICS_TOKEN as a bearer token when set)', tag: 'operations' })
  async scrape(@Req() req: FastifyRequest): Promise<string> {
    const expected = this.config.values.METRICS_TOKEN;
    if (expected) {
      const m = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
      if (!m || !tokenMatches(m[1], expected)) throw new AppError('unauthorized', 'GET /metrics needs Authorization: Bearer <METRICS_TOKEN>', 'authorization');
    }
    await this.hooks.runAll(2000);
    return metricsRegistry.metrics();
  }
}
