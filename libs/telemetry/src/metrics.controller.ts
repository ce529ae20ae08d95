import { Controller, Get, Header, Req, Res } from '@nestjs/common';
import { AppError, AuthFailureThrottle, Config, Documented, tokensMatch, tooManyFailures } from '@tollgate/platform';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { exposition } from './exposition';
import { metricsRegistry } from './metrics';
import { ScrapeHooks } from './scrape-hooks';

/** What GET /metrics answers: the Prometheus text exposition format (not JSON). */
export const METRICS_RESPONSE = z
  .string()
  .describe('Prometheus text exposition format 0.0.4: # HELP and # TYPE lines, then one sample per line');

/**
 * Prometheus scrape endpoint; open unless METRICS_TOKEN is set, and without tenant identifiers
 * (project ids, exporter names) unless METRICS_TENANT_LABELS=on (which needs the token).
 */
@Controller('metrics')
export class MetricsController {
  constructor(
    private readonly hooks: ScrapeHooks,
    private readonly config: Config,
    private readonly failures: AuthFailureThrottle,
  ) {}

  @Get()
  @Header('cache-control', 'no-store')
  @Documented({
    summary: 'Service metrics in Prometheus text format (METRICS_TOKEN as a bearer token when set)',
    tag: 'operations',
    auth: 'metrics-token',
    response: METRICS_RESPONSE,
    responseMediaType: metricsRegistry.contentType,
  })
  async scrape(@Req() req: FastifyRequest, @Res({ passthrough: true }) reply: FastifyReply): Promise<string> {
    const expected = this.config.values.METRICS_TOKEN;
    if (expected) {
      const m = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
      const refused = new AppError(
        'unauthorized',
        'GET /metrics needs Authorization: Bearer <METRICS_TOKEN>',
        'authorization',
      );
      if (!m) throw refused;
      // Like the admin token: chosen by the operator, so a throttled address's guesses are not compared.
      const throttled = await this.failures.throttled(req.ip);
      if (throttled > 0) throw tooManyFailures(throttled);
      if (!tokensMatch(m[1], expected)) {
        const wait = await this.failures.failed(req.ip);
        throw wait > 0 ? tooManyFailures(wait) : refused;
      }
    }
    await this.hooks.runAll(2000);
    // Set here, not by @Header: a refusal above is JSON, and a text/plain type set before it made it a 500.
    void reply.header('content-type', metricsRegistry.contentType);
    return exposition(metricsRegistry, this.config.values.METRICS_TENANT_LABELS === 'on');
  }
}
