import { EVENT_SELECT } from '@tollgate/database';
import { TEST_ADMIN_TOKEN } from '../support/env';
import { call, createProject, stepEvent, type TestProject } from '../support/http';
import { startService, type RunningService } from '../support/service';

describe('POST /v1/events', () => {
  let svc: RunningService;
  let project: TestProject;

  beforeAll(async () => {
    svc = await startService();
    project = await createProject(svc.url);
  });
  afterAll(() => svc.close());

  const post = (events: unknown[], token = project.key) =>
    call(svc.url, 'POST', '/v1/events', { token, body: { events } });
  const stored = async (projectId: string, eventId?: string) =>
    svc.prisma.$queryRawUnsafe<any[]>(
      `SELECT ${EVENT_SELECT} FROM events WHERE project_id = $1 ${eventId ? 'AND event_id = $2' : ''} ORDER BY position`,
      ...(eventId ? [projectId, eventId] : [projectId]),
    );

  it('stores each event once, priced from the catalog, and answers one result per event in order', async () => {
    const events = [stepEvent(), stepEvent({ usage: { inputTokens: 2000, outputTokens: 0, cacheReadTokens: 1000 } })];
    const res = await post(events);
    expect(res.status).toBe(200);
    expect(res.body.accepted).toBe(2);
    expect(res.body.results.map((r: any) => [r.index, r.eventId, r.status])).toEqual([
      [0, events[0].eventId, 'accepted'],
      [1, events[1].eventId, 'accepted'],
    ]);
    const [row] = await stored(project.id, events[0].eventId);
    // gpt-4o: $2.50 per million input tokens, $10 per million output tokens.
    expect(Number(row.input_cost_micros)).toBe(2500);
    expect(Number(row.output_cost_micros)).toBe(2000);
    expect(Number(row.cost_micros)).toBe(4500);
    expect(row.cost_unit).toBe('USD');
    expect(row.price_id).toBe('genai-prices:openai/gpt-4o');
    expect(row.type).toBe('StepUsageRecorded');
    expect(row.resource_id).toBe('resource-1');
    const [cached] = await stored(project.id, events[1].eventId);
    // 1000 uncached at $2.50/M + 1000 cache reads at $1.25/M.
    expect(Number(cached.cost_micros)).toBe(3750);
  });

  it('acknowledges a retried batch as duplicates and never counts it twice, even with another occurredAt', async () => {
    const event = stepEvent();
    expect((await post([event])).body.results[0].status).toBe('accepted');
    const lastMonth = new Date(Date.now() - 20 * 24 * 3600 * 1000).toISOString(); // the previous month (its own partition) on most days
    const retry = await post([event, { ...event, occurredAt: lastMonth }]);
    expect(retry.body.results.map((r: any) => r.status)).toEqual(['duplicate', 'duplicate']);
    expect(await stored(project.id, event.eventId)).toHaveLength(1);
  });

  it('stores the same batch once when 10 clients send it at the same time', async () => {
    const events = Array.from({ length: 50 }, () => stepEvent());
    const replies = await Promise.all(Array.from({ length: 10 }, () => post(events)));
    expect(replies.every((r) => r.status === 200)).toBe(true);
    const accepted = replies.reduce((n, r) => n + r.body.accepted, 0);
    const duplicates = replies.reduce((n, r) => n + r.body.duplicates, 0);
    expect(accepted).toBe(50);
    expect(duplicates).toBe(450);
    const rows = await svc.prisma.$queryRawUnsafe<{ n: bigint }[]>(
      'SELECT count(*) AS n FROM events WHERE project_id = $1 AND event_id = ANY($2)',
      project.id,
      events.map((e) => e.eventId),
    );
    expect(Number(rows[0].n)).toBe(50);
  });

  it('stores an unknown model with a null cost and the unpriced flag, never as free', async () => {
    const event = stepEvent({ provider: 'acme', model: 'acme-large-9' });
    await post([event]);
    const [row] = await stored(project.id, event.eventId);
    expect(row.cost_micros).toBeNull();
    expect(row.unpriced).toBe(true);
  });

  it('prefers the cost the provider reported over the catalog', async () => {
    const event = stepEvent({ cost: { amount: 0.0123, currency: 'USD', source: 'openrouter' } });
    await post([event]);
    const [row] = await stored(project.id, event.eventId);
    expect(Number(row.cost_micros)).toBe(12300);
    expect(row.cost_source).toBe('provider');
    expect(Number(row.input_cost_micros) + Number(row.output_cost_micros)).toBe(12300);
  });

  it('stores a provider-reported cost of 0 for a step with tokens as reported, flagged and counted', async () => {
    const counted = async () =>
      Number(
        /^tollgate_zero_cost_steps_total (\d+)/m.exec((await call(svc.url, 'GET', '/metrics')).body as string)?.[1] ??
          0,
      );
    const before = await counted();
    const free = stepEvent({ cost: { amount: 0, currency: 'USD', source: 'gateway' } });
    const empty = stepEvent({ cost: { amount: 0, currency: 'USD' }, usage: { inputTokens: 0, outputTokens: 0 } });
    await post([free, empty]);
    const [row] = await stored(project.id, free.eventId);
    expect({ cost: Number(row.cost_micros), source: row.cost_source, unpriced: row.unpriced, data: row.data }).toEqual({
      cost: 0,
      source: 'provider',
      unpriced: false,
      data: { reportedCost: { amount: 0, currency: 'USD', source: 'gateway' }, zeroCostWithTokens: true },
    });
    expect((await stored(project.id, empty.eventId))[0].data).toEqual({ reportedCost: { amount: 0, currency: 'USD' } });
    expect((await counted()) - before).toBe(1);
  });

  it('accepts an event for a month that has no partition yet, when the operator allows that backfill', async () => {
    const backfill = await startService({ INGEST_MAX_AGE_DAYS: '9000' });
    try {
      const p = await createProject(backfill.url);
      const event = stepEvent({ occurredAt: '2003-05-17T10:00:00.000Z' });
      expect(
        (await call(backfill.url, 'POST', '/v1/events', { token: p.key, body: { events: [event] } })).body.results[0]
          .status,
      ).toBe('accepted');
      const [part] = await svc.prisma.$queryRawUnsafe<{ t: string | null }[]>(
        `SELECT to_regclass('events_2003_05')::text AS t`,
      );
      expect(part.t).toBe('events_2003_05');
    } finally {
      await backfill.close();
    }
  });

  it('refuses events older than the accepted age (35 days by default), naming the field, and creates no partition for them', async () => {
    // One event per month since 2000 once made 321 partitions that every project's queries then planned.
    const events = Array.from({ length: 24 }, (_, m) =>
      stepEvent({ occurredAt: new Date(Date.UTC(2004, m, 15)).toISOString() }),
    );
    const res = await post(events);
    expect(res.body).toMatchObject({ accepted: 0, rejected: 24 });
    expect(res.body.results[0]).toMatchObject({
      status: 'rejected',
      field: 'events[0].occurredAt',
      reason: 'is more than 35 days in the past (the oldest this project accepts)',
    });
    const parts = await svc.prisma.$queryRawUnsafe<{ n: bigint }[]>(
      `SELECT count(*) AS n FROM pg_class WHERE relname LIKE 'events_2004_%' OR relname LIKE 'events_2005_%'`,
    );
    expect(Number(parts[0].n)).toBe(0);
    const recent = await post([stepEvent({ occurredAt: new Date(Date.now() - 34 * 86_400_000).toISOString() })]);
    expect(recent.body.accepted).toBe(1);
  });

  it('lets a project accept less than the operator allows, never more', async () => {
    const p = await createProject(svc.url);
    const patch = (body: unknown) =>
      call(svc.url, 'PATCH', `/v1/admin/projects/${p.id}`, { token: TEST_ADMIN_TOKEN, body });
    expect((await patch({ maxEventAgeDays: 7 })).body).toMatchObject({ maxEventAgeDays: 7 });
    const ago = (days: number) => stepEvent({ occurredAt: new Date(Date.now() - days * 86_400_000).toISOString() });
    const res = await post([ago(6), ago(8)], p.key);
    expect(res.body.results.map((r: any) => [r.status, r.reason ?? null])).toEqual([
      ['accepted', null],
      ['rejected', 'is more than 7 days in the past (the oldest this project accepts)'],
    ]);
    const tooMuch = await patch({ maxEventAgeDays: 36 });
    expect(tooMuch.status).toBe(400);
    expect(tooMuch.body).toMatchObject({ field: 'maxEventAgeDays', message: expect.stringContaining('at most 35') });
  });

  describe('rejects each invalid event with its field and reason, and stores nothing of it', () => {
    const minute = 60_000;
    const cases: [string, Record<string, unknown>, string][] = [
      ['missing eventId', { eventId: undefined }, 'eventId'],
      ['empty eventId', { eventId: '' }, 'eventId'],
      ['eventId with a control character', { eventId: 'a\u0007b' }, 'eventId'],
      ['eventId longer than 256 characters', { eventId: 'x'.repeat(257) }, 'eventId'],
      ['occurredAt that is not a timestamp', { occurredAt: 'yesterday' }, 'occurredAt'],
      ['occurredAt without a time zone', { occurredAt: '2026-01-01T10:00:00' }, 'occurredAt'],
      ['occurredAt before 2000', { occurredAt: '1999-12-31T23:59:59Z' }, 'occurredAt'],
      [
        'occurredAt too far in the future',
        { occurredAt: new Date(Date.now() + 10 * minute).toISOString() },
        'occurredAt',
      ],
      ['missing traceId', { traceId: undefined }, 'traceId'],
      ['traceId of the wrong type', { traceId: 42 }, 'traceId'],
      ['missing provider', { provider: undefined }, 'provider'],
      ['missing model', { model: undefined }, 'model'],
      ['missing entityType', { entityType: undefined }, 'entityType'],
      ['unknown field', { costUsd: 1 }, 'costUsd'],
      ['missing usage', { usage: undefined }, 'usage'],
      ['negative token count', { usage: { inputTokens: -1, outputTokens: 0 } }, 'usage.inputTokens'],
      ['fractional token count', { usage: { inputTokens: 1.5, outputTokens: 0 } }, 'usage.inputTokens'],
      ['huge token count', { usage: { inputTokens: 1e15, outputTokens: 0 } }, 'usage.inputTokens'],
      ['token count as a string', { usage: { inputTokens: '10', outputTokens: 0 } }, 'usage.inputTokens'],
      [
        'unknown usage field',
        { usage: { inputTokens: 1, outputTokens: 1, thinkingTokens: 1 } },
        'usage.thinkingTokens',
      ],
      [
        'cache reads above input tokens',
        { usage: { inputTokens: 10, outputTokens: 0, cacheReadTokens: 11 } },
        'usage.cacheReadTokens',
      ],
      [
        'cache reads + writes above input tokens',
        { usage: { inputTokens: 10, outputTokens: 0, cacheReadTokens: 6, cacheWriteTokens: 6 } },
        'usage.cacheWriteTokens',
      ],
      [
        'reasoning above output tokens',
        { usage: { inputTokens: 10, outputTokens: 5, reasoningTokens: 6 } },
        'usage.reasoningTokens',
      ],
      ['negative cost', { cost: { amount: -0.01 } }, 'cost.amount'],
      ['cost in an invalid currency', { cost: { amount: 0.01, currency: 'dollars' } }, 'cost.currency'],
      ['labels that are not flat', { labels: { team: { name: 'a' } } }, 'labels.team'],
      [
        'too many labels',
        { labels: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, 'v'])) },
        'labels',
      ],
      ['tags that are not strings', { tags: [1] }, 'tags[0]'],
      ['negative durationMs', { durationMs: -5 }, 'durationMs'],
      ['fractional stepIndex', { stepIndex: 0.5 }, 'stepIndex'],
    ];

    it.each(cases)('%s', async (_name, patch, field) => {
      const event = { ...stepEvent(), ...patch };
      for (const [k, v] of Object.entries(patch)) if (v === undefined) delete (event as Record<string, unknown>)[k];
      const good = stepEvent();
      const res = await post([good, event]);
      expect(res.status).toBe(200);
      expect(res.body.results[0].status).toBe('accepted');
      expect(res.body.results[1]).toMatchObject({ index: 1, status: 'rejected', field: `events[1].${field}` });
      expect(res.body.results[1].reason).toEqual(expect.any(String));
      if (typeof event.eventId === 'string' && event.eventId)
        expect(await stored(project.id, event.eventId)).toHaveLength(0);
    });
  });

  describe('rejects a malformed request whole with a 4xx that names the field', () => {
    it('a body that is not JSON', async () => {
      const res = await call(svc.url, 'POST', '/v1/events', { token: project.key, raw: '{"events": [' });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ code: 'invalid_json', field: '(body)' });
    });

    it('an empty body', async () => {
      const res = await call(svc.url, 'POST', '/v1/events', { token: project.key, raw: '' });
      expect(res.status).toBe(400);
    });

    it('a body that is not JSON by content type', async () => {
      const res = await call(svc.url, 'POST', '/v1/events', {
        token: project.key,
        raw: 'events',
        contentType: 'text/plain',
      });
      expect(res.status).toBe(415);
    });

    it('events that is not an array', async () => {
      const res = await post({} as unknown as unknown[]);
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ code: 'validation_failed', field: 'events' });
    });

    it('an empty batch', async () => {
      const res = await post([]);
      expect(res.status).toBe(400);
      expect(res.body.field).toBe('events');
    });

    it('a batch of 1001 events, storing none of them', async () => {
      const events = Array.from({ length: 1001 }, () => stepEvent({ usage: { inputTokens: 1, outputTokens: 1 } }));
      const res = await post(events);
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ field: 'events', message: expect.stringContaining('at most 1000') });
      expect(await stored(project.id, events[0].eventId)).toHaveLength(0);
    });

    it('a body of 2 MiB with 413', async () => {
      const res = await call(svc.url, 'POST', '/v1/events', {
        token: project.key,
        raw: JSON.stringify({
          events: [stepEvent({ labels: { pad: 'x'.repeat(1000) } })],
          pad: 'x'.repeat(2 * 1024 * 1024),
        }),
      });
      expect(res.status).toBe(413);
      expect(res.body.code).toBe('payload_too_large');
    });

    it('an unknown top-level field', async () => {
      const res = await call(svc.url, 'POST', '/v1/events', {
        token: project.key,
        body: { events: [stepEvent()], extra: true },
      });
      expect(res.status).toBe(400);
      expect(res.body.field).toBe('extra');
    });
  });

  describe('keys', () => {
    it('401 without a key', async () => {
      const res = await call(svc.url, 'POST', '/v1/events', { body: { events: [stepEvent()] } });
      expect(res.status).toBe(401);
    });

    it('401 with a wrong key', async () => {
      const forged = project.key.slice(0, -4) + 'AAAA';
      const res = await post([stepEvent()], forged);
      expect(res.status).toBe(401);
    });

    it('403 with a key that lacks the ingest scope', async () => {
      const reader = await createProject(svc.url, ['read']);
      const res = await post([stepEvent()], reader.key);
      expect(res.status).toBe(403);
      expect(res.body.message).toContain("'ingest'");
    });

    it('401 as soon as a key is revoked', async () => {
      const other = await createProject(svc.url, ['ingest']);
      expect((await post([stepEvent()], other.key)).status).toBe(200);
      const revoke = await call(svc.url, 'DELETE', `/v1/admin/projects/${other.id}/keys/${other.keyId}`, {
        token: 'test-admin-token-0123456789',
      });
      expect(revoke.status).toBe(200);
      expect((await post([stepEvent()], other.key)).status).toBe(401);
    });

    it('stores keys only as hashes', async () => {
      const rows = await svc.prisma.apiKey.findMany({ where: { projectId: project.id } });
      expect(rows).toHaveLength(1);
      expect(rows[0].secretHash).toMatch(/^[0-9a-f]{64}$/);
      expect(project.key).not.toContain(rows[0].secretHash);
      // The secret is everything after the key id (it may itself contain '_').
      const secret = project.key.slice(`tg_${project.keyId}_`.length);
      expect(secret.length).toBeGreaterThan(40);
      expect(JSON.stringify(rows)).not.toContain(secret);
    });

    it('admin routes refuse a project key', async () => {
      const res = await call(svc.url, 'POST', '/v1/admin/projects', { token: project.key, body: { name: 'x' } });
      expect(res.status).toBe(401);
    });

    it("writes events into the key's own project only", async () => {
      const other = await createProject(svc.url);
      const event = stepEvent();
      await post([event], other.key);
      expect(await stored(project.id, event.eventId)).toHaveLength(0);
      expect(await stored(other.id, event.eventId)).toHaveLength(1);
    });
  });
});
