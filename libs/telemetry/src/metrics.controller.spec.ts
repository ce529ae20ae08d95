import type { FastifyReply, FastifyRequest } from 'fastify';

describe('MetricsController token comparison', () => {
  it('is constant-time: two 32-byte digests through timingSafeEqual whatever the length presented', async () => {
    const crypto = jest.requireActual<typeof import('node:crypto')>('node:crypto');
    const calls: [number, number][] = [];
    let controller: import('./metrics.controller').MetricsController | undefined;
    jest.isolateModules(() => {
      jest.doMock('node:crypto', () => ({
        ...crypto,
        timingSafeEqual: (x: Buffer, y: Buffer) => (calls.push([x.length, y.length]), crypto.timingSafeEqual(x, y)),
      }));
      const { MetricsController } = require('./metrics.controller') as typeof import('./metrics.controller');
      const { Config } = require('@tollgate/platform') as typeof import('@tollgate/platform');
      const config = new Config({ METRICS_TOKEN: 'metrics-token-0123456789', METRICS_TENANT_LABELS: 'off' } as never);
      const noThrottle = { throttled: async () => 0, failed: async () => 0 };
      controller = new MetricsController({ runAll: async () => [] } as never, config, noThrottle as never);
    });
    const reply = { header: () => reply } as unknown as FastifyReply;
    const scrape = (token: string) =>
      controller!
        .scrape({ headers: { authorization: `Bearer ${token}` }, ip: '127.0.0.1' } as FastifyRequest, reply)
        .then(
          () => 'ok',
          (e: { code?: string }) => e.code,
        );
    const results = [];
    for (const token of ['metrics-token-0123456789', 'metrics-token-012345678X', 'm', 'x'.repeat(10_000)])
      results.push(await scrape(token));
    expect(results).toEqual(['ok', 'unauthorized', 'unauthorized', 'unauthorized']);
    expect(calls).toEqual(Array.from({ length: 4 }, () => [32, 32]));
  });
});
