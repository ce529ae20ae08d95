import type { GuardCheckResponse } from '../../contracts/src/guard';
import { TollgateClient } from './client';
import { TollgateError } from './errors';
import { busyRetryDelay } from './guard';
import { backoffDelay, parseRetryAfter } from './http';
import { fakeService, refused, type FakeReply, type FakeRequest } from './testing/fake-service';

beforeEach(() => jest.useFakeTimers({ now: new Date('2026-12-01T10:00:00Z') }));
afterEach(() => jest.useRealTimers());

async function run<T>(p: Promise<T>, stepMs = 50): Promise<T> {
  let done = false;
  p.then(
    () => (done = true),
    () => (done = true),
  );
  for (let t = 0; !done && t < 600_000; t += stepMs) await jest.advanceTimersByTimeAsync(stepMs);
  return p;
}

function client(
  handler: (req: FakeRequest, n: number) => FakeReply | Promise<FakeReply>,
  options: { random?: () => number; guard?: { busyDeadlineMs?: number } } = {},
) {
  const service = fakeService(handler);
  return {
    c: new TollgateClient({
      baseUrl: 'http://tollgate.test/',
      apiKey: 'tg_test',
      fetch: service.fetch,
      random: () => 0.5,
      ...options,
    }),
    service,
  };
}

const allow: GuardCheckResponse = {
  decision: 'allow',
  violations: [],
  warnings: [],
  skipped: [],
  usage: {},
  asOf: '2026-12-01T10:00:00.000Z',
};
const request = {
  context: { runId: 'run-1', resourceId: 'res-1' },
  limits: [{ scope: 'resource' as const, maxCost: 1 }],
};
const busy = (retryAfterMs: number): GuardCheckResponse => ({
  decision: 'deny',
  reason: 'busy',
  retryAfterMs,
  violations: [],
  warnings: [],
  skipped: [],
  usage: {},
  asOf: '2026-12-01T10:00:00.000Z',
});
const reserving = {
  ...request,
  estimate: { provider: 'openai', model: 'gpt-4o', inputTokens: 100, maxOutputTokens: 50 },
  reserve: true,
  stepId: 'run-1:0',
};
const reserved: GuardCheckResponse = {
  ...allow,
  reservation: {
    id: 'rsv-1',
    estimatedCost: 0.0007,
    costUnit: 'USD',
    inputTokens: 100,
    outputTokens: 50,
    expiresAt: '2026-12-01T10:05:00.000Z',
  },
};
const gaps = (requests: FakeRequest[]) => requests.slice(1).map((r, i) => r.at - requests[i].at);

describe('guard.estimate', () => {
  it('posts the step and returns its price; refuses a malformed one before sending', async () => {
    const priced = {
      provider: 'openai',
      model: 'gpt-4o',
      countedInputTokens: 1000,
      counted: 'given',
      cost: 0.0045,
      costUnit: 'USD',
      priced: true,
      inputTokens: 1000,
      outputTokens: 200,
      inputTokensMargin: 1,
    };
    const { c, service } = client(() => ({ status: 200, body: priced }));
    expect(
      await run(c.guard.estimate({ provider: 'openai', model: 'gpt-4o', inputTokens: 1000, maxOutputTokens: 200 })),
    ).toEqual(priced);
    expect(service.requests[0]).toMatchObject({
      path: '/v1/estimate',
      method: 'POST',
      body: { provider: 'openai', model: 'gpt-4o', inputTokens: 1000, maxOutputTokens: 200 },
    });
    await expect(c.guard.estimate({ provider: 'openai', model: 'gpt-4o', maxOutputTokens: 1 })).rejects.toMatchObject({
      code: 'validation_failed',
      field: 'inputTokens',
    });
    expect(service.requests).toHaveLength(1);
  });
});

describe('guard.check', () => {
  it('posts the request, with defaults applied by the shared schema, and returns the decision', async () => {
    const { c, service } = client(() => ({ status: 200, body: allow }));
    expect(await run(c.guard.check(request))).toEqual(allow);
    expect(service.requests).toHaveLength(1);
    expect(service.requests[0]).toMatchObject({
      path: '/v1/guard/check',
      method: 'POST',
      headers: expect.objectContaining({ authorization: 'Bearer tg_test' }),
    });
    expect(service.requests[0].body).toEqual({
      ...request,
      limits: [{ scope: 'resource', window: '7d', maxCost: 1 }],
      reserve: false,
      failMode: 'open',
      dryRun: false,
    });
  });

  it('applies fail-open when the service cannot be reached', async () => {
    const { c, service } = client(() => refused());
    const res = await run(c.guard.check(request));
    expect(res.decision).toBe('allow');
    expect(res.reason).toMatch(/^guard unavailable \(network_error\): fail-open applied by the SDK/);
    expect(service.requests).toHaveLength(2);
  });

  it('applies fail-closed when the service answers after the timeout', async () => {
    const { c, service } = client(() => 'hang');
    const res = await run(c.guard.check({ ...request, failMode: 'closed' }));
    expect(res).toMatchObject({ decision: 'deny', violations: [], asOf: expect.any(String) });
    expect(res.reason).toMatch(/^guard unavailable \(timeout\): fail-closed/);
    // Two attempts of 5000 ms (the default, above the service's own bound), 75 ms apart.
    expect(service.requests[1].at - service.requests[0].at).toBe(5075);
    expect(Date.now() - Date.parse('2026-12-01T10:00:00Z')).toBeGreaterThanOrEqual(10_075);
    expect(service.requests).toHaveLength(2);
  });

  it('applies the fail mode on 5xx too, but throws on a 4xx, which no fallback should hide', async () => {
    const down = client(() => ({
      status: 503,
      body: { statusCode: 503, code: 'unavailable', message: 'A backing service is unavailable; retry shortly' },
    }));
    expect((await run(down.c.guard.check({ ...request, failMode: 'closed' }))).decision).toBe('deny');
    const badKey = client(() => ({
      status: 403,
      body: { statusCode: 403, code: 'forbidden', message: 'Key lacks the guard scope' },
    }));
    const err = await run(badKey.c.guard.check(request)).catch((e) => e);
    expect(err).toBeInstanceOf(TollgateError);
    expect(err).toMatchObject({ status: 403, code: 'forbidden' });
    expect(err.message).toBe(
      'POST /v1/guard/check failed with 403 forbidden: Key lacks the guard scope; the API key lacks the scope this call needs (ingest, guard or read)',
    );
    expect(badKey.service.requests).toHaveLength(1);
  });

  it('rejects an invalid request before sending it, naming the field', async () => {
    const { c, service } = client(() => ({ status: 200, body: allow }));
    const err = await c.guard
      .check({
        context: {},
        reserve: true,
        estimate: { provider: 'openai', model: 'gpt-4o', inputTokens: 10, maxOutputTokens: 10 },
      })
      .catch((e) => e);
    expect(err).toMatchObject({ code: 'validation_failed', field: 'stepId' });
    expect(err.message).toBe('Invalid guard check: stepId is required when reserve is true');
    const err2 = await c.guard.check({ context: {}, limits: [{ scope: 'resource', maxCost: -1 }] }).catch((e) => e);
    expect(err2).toMatchObject({ field: 'limits[0].maxCost' });
    expect(service.requests).toHaveLength(0);
  });

  describe("when the service answers 'busy'", () => {
    it('sends the same request again after retryAfterMs with jitter, and returns the allow', async () => {
      const { c, service } = client((_, n) => ({ status: 200, body: n === 1 ? busy(400) : reserved }));
      expect(await run(c.guard.check(reserving), 10)).toEqual(reserved);
      expect(service.requests).toHaveLength(2);
      expect(service.requests[1].rawBody).toBe(service.requests[0].rawBody);
      expect(service.requests[1].body).toMatchObject({ stepId: 'run-1:0', reserve: true });
      // 400 ms fixed, plus random 0.5 × 400 ms.
      expect(gaps(service.requests)).toEqual([600]);
    });

    it('never waits less than retryAfterMs, nor twice as long, and spreads callers out with its random', async () => {
      const waits: number[] = [];
      for (const r of [0, 0.25, 0.999999]) {
        const { c, service } = client((_, n) => ({ status: 200, body: n === 1 ? busy(200) : allow }), {
          random: () => r,
        });
        await run(c.guard.check(request), 1);
        waits.push(...gaps(service.requests));
      }
      expect(waits).toEqual([200, 250, 400]);
      expect([0, 0.5, 0.999999].map((r) => busyRetryDelay(1000, () => r))).toEqual([1000, 1500, 2000]);
      // Without a usable hint it still waits (never spins), and a huge one is bounded.
      expect([undefined, 0, -5, Number.NaN].map((h) => busyRetryDelay(h, () => 0))).toEqual([100, 100, 100, 100]);
      expect(busyRetryDelay(3_600_000, () => 0)).toBe(60_000);
    });

    it('returns the last busy answer once the deadline would be passed, even with failMode open', async () => {
      const { c, service } = client((_, n) => ({ status: 200, body: { ...busy(1000), asOf: `answer ${n}` } }));
      const res = await run(c.guard.check({ ...reserving, failMode: 'open' }), 10);
      // Retries 1500 ms apart (1000 fixed + 0.5 × 1000) within the 10 000 ms default: the one at 10 500 ms is not sent.
      expect(service.requests.map((r) => r.at - service.requests[0].at)).toEqual([
        0, 1500, 3000, 4500, 6000, 7500, 9000,
      ]);
      expect(res).toEqual({ ...busy(1000), asOf: 'answer 7' });
      expect(new Set(service.requests.map((r) => r.rawBody)).size).toBe(1);
    });

    it('takes busyDeadlineMs from the client options, and from the call, where 0 means no retry', async () => {
      const fromClient = client(() => ({ status: 200, body: busy(300) }), { guard: { busyDeadlineMs: 1000 } });
      expect((await run(fromClient.c.guard.check(request), 10)).reason).toBe('busy');
      expect(gaps(fromClient.service.requests)).toEqual([450, 450]); // a third retry would start at 1350 ms

      const noRetry = client(() => ({ status: 200, body: busy(300) }));
      expect(await run(noRetry.c.guard.check(request, { busyDeadlineMs: 0 }))).toEqual(busy(300));
      expect(noRetry.service.requests).toHaveLength(1);

      const err = await noRetry.c.guard.check(request, { busyDeadlineMs: -1 }).catch((e) => e);
      expect(err).toMatchObject({ code: 'validation_failed', field: 'busyDeadlineMs' });
      expect(() => new TollgateClient({ baseUrl: 'http://x', apiKey: 'k', guard: { busyDeadlineMs: 1.5 } })).toThrow(
        expect.objectContaining({ field: 'guard.busyDeadlineMs' }),
      );
    });

    it('applies the fail mode as before when a busy retry cannot reach the service', async () => {
      const { c, service } = client((_, n) => (n === 1 ? { status: 200, body: busy(100) } : refused()));
      const res = await run(c.guard.check({ ...request, failMode: 'closed' }), 10);
      expect(res.decision).toBe('deny');
      expect(res.reason).toMatch(/^guard unavailable \(network_error\): fail-closed applied by the SDK/);
      expect(service.requests).toHaveLength(3); // the busy answer, then an attempt and its retry
    });
  });

  it('release posts to the reservation route', async () => {
    const { c, service } = client(() => ({ status: 200, body: { id: 'rsv/1', status: 'released' } }));
    expect(await run(c.guard.release('rsv/1'))).toEqual({ id: 'rsv/1', status: 'released' });
    expect(service.requests[0]).toMatchObject({ method: 'POST', path: '/v1/guard/reservations/rsv%2F1/release' });
  });
});

describe('metrics', () => {
  it('posts Mastra-shaped queries and turns point timestamps into Dates', async () => {
    const { c, service } = client((req) =>
      req.path.endsWith('/timeseries')
        ? {
            status: 200,
            body: {
              series: [
                {
                  name: 'mastra_model_total_input_tokens',
                  points: [{ timestamp: '2026-12-01T09:00:00.000Z', value: 10 }],
                },
              ],
            },
          }
        : { status: 200, body: { value: 42, estimatedCost: 0.5, costUnit: 'USD' } },
    );
    const filters = { resourceId: 'res-1', timestamp: { start: new Date('2026-11-24T10:00:00Z') } };
    expect(
      await run(c.metrics.aggregate({ name: ['mastra_model_total_input_tokens'], aggregation: 'sum', filters })),
    ).toEqual({ value: 42, estimatedCost: 0.5, costUnit: 'USD' });
    expect(service.requests[0]).toMatchObject({
      path: '/api/observability/metrics/aggregate',
      body: {
        name: ['mastra_model_total_input_tokens'],
        aggregation: 'sum',
        filters: { resourceId: 'res-1', timestamp: { start: '2026-11-24T10:00:00.000Z' } },
      },
    });
    const ts = await run(
      c.metrics.timeSeries({ name: ['mastra_model_total_input_tokens'], interval: '1h', aggregation: 'sum' }),
    );
    expect(ts.series[0].points[0].timestamp).toEqual(new Date('2026-12-01T09:00:00.000Z'));
  });

  it('sends discovery calls as GET with query parameters', async () => {
    const { c, service } = client(() => ({ status: 200, body: { values: ['a'] } }));
    await run(
      c.metrics.discovery.metricLabelValues({
        metricName: 'mastra_model_total_input_tokens',
        labelKey: 'status',
        limit: 5,
      }),
    );
    await run(c.metrics.discovery.environments());
    expect(service.requests.map((r) => `${r.method} ${r.path}`)).toEqual([
      'GET /api/observability/discovery/metric-label-values?metricName=mastra_model_total_input_tokens&labelKey=status&limit=5',
      'GET /api/observability/discovery/environments',
    ]);
  });

  it('says which route is missing when the service has no metrics yet', async () => {
    const { c } = client(() => ({
      status: 404,
      body: { statusCode: 404, code: 'not_found', message: 'Cannot POST /api/observability/metrics/breakdown' },
    }));
    const err = await run(c.metrics.breakdown({ name: ['x'], groupBy: ['model'], aggregation: 'sum' })).catch((e) => e);
    expect(err).toMatchObject({ status: 404, code: 'not_found' });
    expect(err.message).toContain('check baseUrl, and that the service version has this route');
  });
});

describe('backoff', () => {
  const policy = { retries: 5, minDelayMs: 100, maxDelayMs: 5000, maxRetryAfterMs: 60_000 };
  it('doubles per attempt up to the cap, with half of each step random', () => {
    expect([0, 1, 2, 3, 10].map((a) => backoffDelay(a, policy, () => 0))).toEqual([50, 100, 200, 400, 2500]);
    expect([0, 1, 2, 3, 10].map((a) => backoffDelay(a, policy, () => 0.999999))).toEqual([100, 200, 400, 800, 5000]);
  });
  it('waits at least what Retry-After asks, within its bound', () => {
    expect(backoffDelay(0, policy, () => 0, 3)).toBe(3000);
    expect(backoffDelay(0, policy, () => 0, 3600)).toBe(60_000);
    expect(parseRetryAfter('2', 0)).toBe(2);
    expect(parseRetryAfter('Tue, 01 Dec 2026 10:00:05 GMT', Date.parse('2026-12-01T10:00:00Z'))).toBe(5);
    expect(parseRetryAfter('soon', 0)).toBeUndefined();
  });
});

describe('TollgateClient options', () => {
  it('refuses a missing baseUrl or apiKey with the field to fix', () => {
    expect(() => new TollgateClient({ baseUrl: 'localhost:3000', apiKey: 'k' })).toThrow(
      expect.objectContaining({ field: 'baseUrl' }),
    );
    expect(() => new TollgateClient({ baseUrl: 'http://x', apiKey: '' })).toThrow(
      expect.objectContaining({ field: 'apiKey' }),
    );
    expect(() => new TollgateClient({ baseUrl: 'http://x', apiKey: 'k', maxBatchSize: 5000 })).toThrow(
      'TollgateClient option maxBatchSize must be an integer between 0 and 1000, got 5000',
    );
  });
});
