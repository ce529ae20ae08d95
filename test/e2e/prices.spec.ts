import { EVENT_SELECT } from '@tollgate/database';
import { call, createProject, stepEvent } from '../support/http';
import { startService, type RunningService } from '../support/service';

describe('price overrides', () => {
  let svc: RunningService;
  beforeAll(async () => (svc = await startService()));
  afterAll(() => svc.close());

  const costOf = async (projectId: string, eventId: string) => {
    const [row] = await svc.prisma.$queryRawUnsafe<any[]>(
      `SELECT ${EVENT_SELECT} FROM events WHERE project_id = $1 AND event_id = $2`,
      projectId,
      eventId,
    );
    return {
      cost: row.cost_micros === null ? null : Number(row.cost_micros),
      source: row.cost_source,
      priceId: row.price_id,
    };
  };

  it('prices each event with the price in force at its occurredAt', async () => {
    const p = await createProject(svc.url);
    const day = 24 * 3600_000;
    const t1 = new Date(Date.now() - 10 * day);
    const t2 = new Date(Date.now() - 5 * day);
    const put = (at: Date, input: number, output: number) =>
      call(svc.url, 'PUT', '/v1/prices/openai/gpt-4o', {
        token: p.key,
        body: { effectiveFrom: at.toISOString(), inputPerMillion: input, outputPerMillion: output },
      });
    expect((await put(t1, 1, 2)).status).toBe(200);
    expect((await put(t2, 3, 4)).status).toBe(200);

    const before = stepEvent({ occurredAt: new Date(t1.getTime() - 1).toISOString() });
    const atT1 = stepEvent({ occurredAt: t1.toISOString() });
    const between = stepEvent({ occurredAt: new Date(t2.getTime() - 1).toISOString() });
    const after = stepEvent({ occurredAt: new Date().toISOString() });
    const res = await call(svc.url, 'POST', '/v1/events', {
      token: p.key,
      body: { events: [before, atT1, between, after] },
    });
    expect(res.body.accepted).toBe(4);

    // 1000 input + 200 output tokens.
    expect(await costOf(p.id, before.eventId)).toMatchObject({ cost: 4500, source: 'catalog' });
    expect(await costOf(p.id, atT1.eventId)).toMatchObject({ cost: 1000 * 1 + 200 * 2, source: 'override' });
    expect(await costOf(p.id, between.eventId)).toMatchObject({ cost: 1000 * 1 + 200 * 2, source: 'override' });
    expect(await costOf(p.id, after.eventId)).toMatchObject({ cost: 1000 * 3 + 200 * 4, source: 'override' });
  });

  it('gives a model the catalog lacks a price, and applies cache rates', async () => {
    const p = await createProject(svc.url);
    await call(svc.url, 'PUT', '/v1/prices/acme/acme-large', {
      token: p.key,
      body: {
        effectiveFrom: '2020-01-01T00:00:00Z',
        inputPerMillion: 2,
        outputPerMillion: 8,
        cacheReadPerMillion: 0.5,
      },
    });
    const e = stepEvent({
      provider: 'acme',
      model: 'acme-large',
      usage: { inputTokens: 1000, outputTokens: 100, cacheReadTokens: 400 },
    });
    await call(svc.url, 'POST', '/v1/events', { token: p.key, body: { events: [e] } });
    expect((await costOf(p.id, e.eventId)).cost).toBe(600 * 2 + 400 * 0.5 + 100 * 8);
  });

  it("applies a project's overrides to that project only", async () => {
    const a = await createProject(svc.url);
    const b = await createProject(svc.url);
    await call(svc.url, 'PUT', '/v1/prices/openai/gpt-4o', {
      token: a.key,
      body: { effectiveFrom: '2020-01-01T00:00:00Z', inputPerMillion: 100, outputPerMillion: 100 },
    });
    const e = stepEvent();
    await call(svc.url, 'POST', '/v1/events', { token: b.key, body: { events: [e] } });
    expect((await costOf(b.id, e.eventId)).cost).toBe(4500);
    expect((await call(svc.url, 'GET', '/v1/prices', { token: b.key })).body.prices).toEqual([]);
    expect((await call(svc.url, 'GET', '/v1/prices', { token: a.key })).body.prices).toHaveLength(1);
  });

  it('rejects a bad price with the field, and needs the admin scope', async () => {
    const p = await createProject(svc.url);
    const bad = await call(svc.url, 'PUT', '/v1/prices/openai/gpt-4o', {
      token: p.key,
      body: { inputPerMillion: -1, outputPerMillion: 1 },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.field).toBe('inputPerMillion');
    const reader = await createProject(svc.url, ['read']);
    const forbidden = await call(svc.url, 'PUT', '/v1/prices/openai/gpt-4o', {
      token: reader.key,
      body: { inputPerMillion: 1, outputPerMillion: 1 },
    });
    expect(forbidden.status).toBe(403);
  });
});
