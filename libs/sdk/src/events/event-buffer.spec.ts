import { TollgateClient, type TollgateClientOptions } from '../client';
import { TollgateError } from '../errors';
import { acceptAll, fakeService, refused, step, type FakeReply, type FakeRequest } from '../testing/fake-service';

// The real timers are replaced by jest's fake clock: every wait below is simulated time.
beforeEach(() => jest.useFakeTimers({ now: new Date('2026-12-01T10:00:00Z') }));
afterEach(() => jest.useRealTimers());

function client(
  handler: (req: FakeRequest, n: number) => FakeReply | Promise<FakeReply>,
  options: Partial<TollgateClientOptions> = {},
) {
  const service = fakeService(handler);
  const drops: { reason: string; n: number; field?: string }[] = [];
  const rejections: { field: string; reason: string; eventId: string | null }[] = [];
  const c = new TollgateClient({
    baseUrl: 'http://tollgate.test',
    apiKey: 'tg_test',
    fetch: service.fetch,
    random: () => 0.5,
    onDrop: (d) => drops.push({ reason: d.reason, n: d.events.length, field: d.error?.field }),
    onRejected: (r) => rejections.push(r),
    ...options,
  });
  return { c, service, drops, rejections };
}

/** Runs simulated time forward until `p` settles. */
async function run<T>(p: Promise<T>, stepMs = 50, maxMs = 600_000): Promise<T> {
  let done = false;
  p.then(
    () => (done = true),
    () => (done = true),
  );
  for (let t = 0; !done && t < maxMs; t += stepMs) await jest.advanceTimersByTimeAsync(stepMs);
  return p;
}

const sizes = (reqs: FakeRequest[]) => reqs.map((r) => r.body.events.length);

describe('events.record buffering', () => {
  it('sends a batch as soon as maxBatchSize events are buffered, and the rest after flushIntervalMs', async () => {
    const { c, service } = client(acceptAll, { maxBatchSize: 3, flushIntervalMs: 1000, concurrency: 4 });
    for (let i = 0; i < 7; i++) c.events.record(step());
    await jest.advanceTimersByTimeAsync(0);
    expect(sizes(service.requests)).toEqual([3, 3]);
    await jest.advanceTimersByTimeAsync(999);
    expect(sizes(service.requests)).toEqual([3, 3]);
    await jest.advanceTimersByTimeAsync(1);
    expect(sizes(service.requests)).toEqual([3, 3, 1]);
    expect(c.events.stats).toMatchObject({ accepted: 7, buffered: 0, dropped: 0, requests: 3 });
  });

  it('cuts batches by bytes, never splitting one event', async () => {
    const { c, service } = client(acceptAll, { maxBatchBytes: 700, flushIntervalMs: 10 });
    const one = JSON.stringify({
      ...step(),
      eventId: '00000000-0000-4000-8000-000000000000',
      occurredAt: new Date().toISOString(),
    }).length;
    expect(one).toBeLessThan(350);
    for (let i = 0; i < 5; i++) c.events.record(step());
    await run(c.flush());
    // 700 bytes hold two events of ~250 bytes: 2 + 2 + 1.
    expect(sizes(service.requests)).toEqual([2, 2, 1]);
    expect(service.requests.every((r) => Buffer.byteLength(r.rawBody!) < 700 + 20)).toBe(true);
  });

  it('fills eventId and occurredAt once, so a retried batch carries the same ids', async () => {
    const { c, service } = client((req, n) =>
      n < 3
        ? { status: 503, body: { statusCode: 503, code: 'unavailable', message: 'retry shortly' } }
        : acceptAll(req),
    );
    const id = c.events.record(step());
    await run(c.flush());
    expect(service.requests).toHaveLength(3);
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect(new Set(service.requests.map((r) => r.rawBody)).size).toBe(1);
    expect(service.requests[0].body.events[0]).toMatchObject({ eventId: id, occurredAt: '2026-12-01T10:00:00.000Z' });
    expect(c.events.stats.accepted).toBe(1);
  });

  it('retries network errors with exponential backoff and jitter', async () => {
    const { c, service } = client((req, n) => (n <= 3 ? refused() : acceptAll(req)), { flushIntervalMs: 0 });
    c.events.record(step());
    await run(c.flush());
    const gaps = service.requests.slice(1).map((r, i) => r.at - service.requests[i].at);
    // Steps of 100, 200, 400 ms; with random() = 0.5 each wait is 3/4 of its step.
    expect(gaps).toEqual([75, 150, 300]);
  });

  it('honours Retry-After on 429 and 503', async () => {
    const { c, service } = client(
      (req, n) =>
        n === 1
          ? {
              status: 429,
              body: { statusCode: 429, code: 'rate_limited', message: 'slow down' },
              headers: { 'retry-after': '2' },
            }
          : acceptAll(req),
      { flushIntervalMs: 0 },
    );
    c.events.record(step());
    await run(c.flush());
    expect(service.requests[1].at - service.requests[0].at).toBe(2000);
  });

  it('never retries a 4xx other than 429: the batch is dropped once, with the error', async () => {
    const { c, service, drops } = client(
      () => ({ status: 401, body: { statusCode: 401, code: 'unauthorized', message: 'Unknown API key' } }),
      { flushIntervalMs: 0 },
    );
    c.events.record(step());
    c.events.record(step());
    await run(c.flush());
    await jest.advanceTimersByTimeAsync(60_000);
    expect(service.requests).toHaveLength(1);
    expect(drops).toEqual([{ reason: 'unrecoverable', n: 2, field: undefined }]);
    expect(c.events.stats).toMatchObject({ dropped: 2, buffered: 0 });
  });

  it('reports events the service rejected through onRejected, and never sends them again', async () => {
    const { c, service, rejections } = client(
      (req) => ({
        status: 200,
        body: {
          accepted: 1,
          duplicates: 1,
          rejected: 1,
          results: [
            { index: 0, eventId: req.body.events[0].eventId, status: 'accepted', position: '1' },
            {
              index: 1,
              eventId: req.body.events[1].eventId,
              status: 'rejected',
              field: 'events[1].occurredAt',
              reason: 'is more than 300000 ms in the future',
            },
            { index: 2, eventId: req.body.events[2].eventId, status: 'duplicate' },
          ],
        },
      }),
      { flushIntervalMs: 0 },
    );
    c.events.record(step());
    const bad = c.events.record(step({ occurredAt: new Date(Date.now() + 3600_000) }));
    c.events.record(step());
    await run(c.flush());
    await jest.advanceTimersByTimeAsync(60_000);
    expect(service.requests).toHaveLength(1);
    expect(rejections).toEqual([
      {
        event: expect.objectContaining({ eventId: bad }),
        eventId: bad,
        field: 'occurredAt',
        reason: 'is more than 300000 ms in the future',
      },
    ]);
    expect(c.events.stats).toMatchObject({ accepted: 1, rejected: 1, duplicates: 1, dropped: 0 });
  });

  it('throws a TollgateError naming the field when an event is invalid, before buffering it', () => {
    const { c } = client(acceptAll);
    let error: unknown;
    try {
      c.events.record(step({ usage: { inputTokens: 10, outputTokens: 1.5 } }));
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(TollgateError);
    expect(error).toMatchObject({ code: 'validation_failed', field: 'usage.outputTokens' });
    expect((error as Error).message).toBe('Invalid step event: usage.outputTokens must be an integer');
    expect(() => c.events.record(step({ provider: undefined }))).toThrow('Invalid step event: provider is required');
    expect(() => c.events.record(step({ colour: 'red' }))).toThrow('Invalid step event: colour is not a known field');
    expect(c.events.stats.buffered).toBe(0);
  });

  it('holds at most maxBufferSize events, dropping new ones through onDrop and the counter', async () => {
    const { c, drops } = client(() => 'hang', { maxBufferSize: 5, maxBatchSize: 2, concurrency: 1, timeoutMs: 60_000 });
    for (let i = 0; i < 8; i++) c.events.record(step());
    expect(c.events.stats).toMatchObject({ buffered: 5, dropped: 3 });
    expect(drops).toEqual([
      { reason: 'buffer_full', n: 1, field: undefined },
      { reason: 'buffer_full', n: 1, field: undefined },
      { reason: 'buffer_full', n: 1, field: undefined },
    ]);
  });

  it('keeps undelivered batches through a long outage and stores each event once when the service is back', async () => {
    let down = true;
    const stored = new Map<string, number>();
    const { c, service, drops } = client(
      (req) => {
        if (down) return refused();
        for (const e of req.body.events) stored.set(e.eventId, (stored.get(e.eventId) ?? 0) + 1);
        return acceptAll(req);
      },
      { maxBatchSize: 10, flushIntervalMs: 100 },
    );
    for (let i = 0; i < 95; i++) c.events.record(step());
    await jest.advanceTimersByTimeAsync(30_000);
    expect(c.events.stats.buffered).toBe(95);
    down = false;
    await run(c.flush());
    expect(stored.size).toBe(95);
    expect([...stored.values()].every((n) => n === 1)).toBe(true);
    expect(drops).toEqual([]);
    expect(c.events.stats).toMatchObject({ accepted: 95, buffered: 0, dropped: 0 });
    expect(service.requests.length).toBeGreaterThan(10);
  });

  it('splits a batch the service finds too large', async () => {
    const { c, service } = client(
      (req) =>
        req.body.events.length > 2
          ? {
              status: 413,
              body: {
                statusCode: 413,
                code: 'payload_too_large',
                message: 'Request body is too large',
                field: '(body)',
              },
            }
          : acceptAll(req),
      { flushIntervalMs: 0 },
    );
    for (let i = 0; i < 5; i++) c.events.record(step());
    await run(c.flush());
    expect(c.events.stats).toMatchObject({ accepted: 5, dropped: 0 });
    expect(
      sizes(service.requests)
        .filter((n) => n <= 2)
        .reduce((a, b) => a + b, 0),
    ).toBe(5);
  });

  it('flush() waits for delivery; shutdown() delivers what is held and leaves no timer behind', async () => {
    const { c, service } = client(acceptAll, { flushIntervalMs: 60_000 });
    c.events.record(step());
    c.events.record(step());
    await run(c.shutdown());
    expect(sizes(service.requests)).toEqual([2]);
    expect(jest.getTimerCount()).toBe(0);
    expect(c.events.stats.accepted).toBe(2);
  });

  it('shutdown() gives up at its deadline, dropping what is left, and later records are dropped as closed', async () => {
    const { c, drops } = client(() => refused(), { flushIntervalMs: 0 });
    c.events.record(step());
    const done = c.shutdown({ timeoutMs: 5000 });
    await jest.advanceTimersByTimeAsync(5000);
    await done;
    await jest.advanceTimersByTimeAsync(60_000);
    c.events.record(step());
    expect(drops.map((d) => d.reason)).toEqual(['shutdown', 'closed']);
    expect(c.events.stats).toMatchObject({ dropped: 2, buffered: 0 });
    expect(jest.getTimerCount()).toBe(0);
  });
});
