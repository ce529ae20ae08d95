import { Clock } from '@tollgate/platform';
import { randomUUID } from 'node:crypto';
import { call, createProject, stepEvent, type TestProject } from '../support/http';
import { startService, type RunningService } from '../support/service';
import { alertsResponse } from '../../libs/ledger/src/budget-alerts/alerts.controller';

const MIN = 60_000;
const HOUR = 60 * MIN;

/**
 * Budget alerts: a threshold fires once per crossing, in the commit that crossed it, and the
 * denial of a hard limit once per exhaustion. The clock is the service's (fixed where windows age).
 */
describe('budget alerts', () => {
  let svc: RunningService;
  let now: number;
  beforeAll(async () => {
    // 64 agents' commits on one alerting scope take turns, each holding a connection while it waits.
    svc = await startService({ DATABASE_POOL_SIZE: '30', INGEST_MAX_POOL_WAITING: '100', INGEST_MAX_AGE_DAYS: '400' });
    now = Date.parse('2026-06-10T12:00:00.000Z');
    jest.spyOn(svc.app.get(Clock), 'now').mockImplementation(() => new Date(now));
  });
  afterAll(() => svc.close());

  const api = (p: TestProject, method: string, path: string, body?: unknown) =>
    call(svc.url, method, path, { token: p.key, body });
  const ingest = async (p: TestProject, events: unknown[]) => {
    const res = await api(p, 'POST', '/v1/events', { events });
    expect(res.status).toBe(200);
    return res.body;
  };
  const tokens = (resourceId: string, n: number, at = now, over: Record<string, unknown> = {}) =>
    stepEvent({
      resourceId,
      occurredAt: new Date(at).toISOString(),
      usage: { inputTokens: n, outputTokens: 0 },
      ...over,
    });
  const alertsOf = async (p: TestProject, scopeKey?: string) => {
    const res = await api(p, 'GET', `/v1/alerts${scopeKey ? `?scopeKey=${encodeURIComponent(scopeKey)}` : ''}`);
    expect(res.status).toBe(200);
    // The answer is the OpenAPI document's: a strict schema, so an undocumented field fails.
    expect(alertsResponse.parse(res.body)).toEqual(res.body);
    return res.body.alerts as any[];
  };
  const policy = (p: TestProject, name: string, body: Record<string, unknown>) =>
    api(p, 'PUT', `/v1/policies/${name}`, body);

  it('64 agents racing across 50%, 80% and 100% write exactly one event per threshold, each naming the step that crossed it', async () => {
    const p = await createProject(svc.url);
    expect(
      (await policy(p, 'tokens', { scope: 'resource', window: '24h', maxTotalTokens: 64_000, alerts: [80, 50, 100] }))
        .body.alerts,
    ).toEqual([50, 80, 100]);
    const resourceId = `r-${randomUUID()}`;
    const steps = Array.from({ length: 64 }, (_, i) => tokens(resourceId, 1000, now - i));
    const results = await Promise.all(steps.map((s) => ingest(p, [s])));
    expect(results.every((r) => r.accepted === 1)).toBe(true);

    const alerts = await alertsOf(p, `resource:${resourceId}`);
    expect(alerts.map((a) => [a.kind, a.threshold])).toEqual([
      ['BudgetThresholdCrossed', 100],
      ['BudgetThresholdCrossed', 80],
      ['BudgetThresholdCrossed', 50],
    ]);
    // Commits are decided one after the other: each threshold is crossed by one step of 1000 tokens.
    expect(alerts.map((a) => a.usage)).toEqual([64_000, 52_000, 32_000]);
    for (const a of alerts) {
      expect(a).toMatchObject({
        scopeKey: `resource:${resourceId}`,
        window: '24h',
        source: 'policy:tokens',
        limitType: 'totalTokens',
        limit: 64_000,
        unit: 'tokens',
      });
      expect(steps.map((s) => s.eventId)).toContain(a.stepEventId);
    }
    const log = await svc.prisma.$queryRawUnsafe<{ n: bigint }[]>(
      `SELECT count(*) AS n FROM events WHERE project_id = $1 AND type = 'BudgetThresholdCrossed'`,
      p.id,
    );
    expect(Number(log[0].n)).toBe(3);
    const metrics = await fetch(`${svc.url}/metrics`).then((r) => r.text());
    expect(metrics).toMatch(/tollgate_alerts_fired_total\{kind="BudgetThresholdCrossed"\} \d+/);
  });

  it('a rolling window alerts again only after falling the hysteresis below the threshold (cross, age out, re-cross)', async () => {
    const p = await createProject(svc.url);
    await policy(p, 'hourly', { scope: 'resource', window: '1h', maxTotalTokens: 1000, alerts: [80] });
    const resourceId = `r-${randomUUID()}`;
    const t0 = now;
    try {
      await ingest(p, [tokens(resourceId, 70, t0 - 59 * MIN)]);
      const crossing = tokens(resourceId, 780, t0 - 30 * MIN);
      await ingest(p, [crossing]); // 850: crosses 80%
      let alerts = await alertsOf(p, `resource:${resourceId}`);
      expect(alerts).toHaveLength(1);
      expect(alerts[0]).toMatchObject({ threshold: 80, usage: 850, stepEventId: crossing.eventId });

      now = t0 + 2 * MIN; // the 70 aged out: 780, below 80% but not 5 points below
      await ingest(p, [tokens(resourceId, 30)]); // 810: hovering, no second alert
      expect(await alertsOf(p, `resource:${resourceId}`)).toHaveLength(1);

      now = t0 + 31 * MIN; // the 780 aged out: 30
      const again = tokens(resourceId, 800);
      await ingest(p, [again]); // 830: re-armed below 75%, crosses again
      alerts = await alertsOf(p, `resource:${resourceId}`);
      expect(alerts.map((a) => [a.usage, a.stepEventId])).toEqual([
        [830, again.eventId],
        [850, crossing.eventId],
      ]);
    } finally {
      now = t0;
    }
  });

  it("a request limit's thresholds alert like a policy's, from the check that named them on", async () => {
    const p = await createProject(svc.url);
    const resourceId = `r-${randomUUID()}`;
    const limits = [{ scope: 'resource', window: '24h', maxTotalTokens: 1000, alerts: [50], alertHysteresis: 10 }];
    expect((await api(p, 'POST', '/v1/guard/check', { context: { resourceId }, limits })).body.decision).toBe('allow');
    const step = tokens(resourceId, 600);
    await ingest(p, [step]);
    await ingest(p, [tokens(resourceId, 100)]);
    expect(
      (await alertsOf(p, `resource:${resourceId}`)).map((a) => [a.source, a.threshold, a.usage, a.stepEventId]),
    ).toEqual([['request', 50, 600, step.eventId]]);
    const bad = await api(p, 'POST', '/v1/guard/check', {
      context: { resourceId },
      limits: [{ ...limits[0], alerts: [-1] }],
    });
    expect({ status: bad.status, field: bad.body.field }).toEqual({ status: 400, field: 'limits[0].alerts[0]' });
  });

  it('a threshold removed from a policy does not alert again', async () => {
    const p = await createProject(svc.url);
    const resourceId = `r-${randomUUID()}`;
    const t0 = now;
    try {
      await policy(p, 'hourly', { scope: 'resource', window: '1h', maxTotalTokens: 1000, alerts: [50] });
      await ingest(p, [tokens(resourceId, 600, t0 - 50 * MIN)]);
      await policy(p, 'hourly', { scope: 'resource', window: '1h', maxTotalTokens: 1000, alerts: [90] });
      now = t0 + 20 * MIN; // aged out: the 50% state would have re-armed
      await ingest(p, [tokens(resourceId, 600)]);
      expect((await alertsOf(p, `resource:${resourceId}`)).map((a) => a.threshold)).toEqual([50]);
    } finally {
      now = t0;
    }
  });

  it('a run budget crosses once', async () => {
    const p = await createProject(svc.url);
    await policy(p, 'run', { scope: 'run', maxTotalTokens: 1000, alerts: [50] });
    const traceId = `t-${randomUUID()}`;
    await ingest(p, [tokens('r', 600, now, { traceId })]);
    await ingest(p, [tokens('r', 600, now, { traceId })]);
    const alerts = await alertsOf(p, `run:${traceId}`);
    expect(alerts.map((a) => [a.threshold, a.usage, a.window])).toEqual([[50, 600, null]]);
  });

  it('a late event inside the window crosses; one older than the window does not', async () => {
    const p = await createProject(svc.url);
    await policy(p, 'daily', { scope: 'resource', window: '24h', maxTotalTokens: 1000, alerts: [80] });
    const resourceId = `r-${randomUUID()}`;
    await ingest(p, [tokens(resourceId, 900, now - 25 * HOUR)]);
    expect(await alertsOf(p, `resource:${resourceId}`)).toEqual([]);
    const late = tokens(resourceId, 850, now - 23 * HOUR);
    await ingest(p, [late]);
    expect((await alertsOf(p, `resource:${resourceId}`)).map((a) => [a.usage, a.stepEventId])).toEqual([
      [850, late.eventId],
    ]);
  });

  it('a reprice that moves usage across a threshold alerts in its commit', async () => {
    const p = await createProject(svc.url);
    // 1000 input + 200 output of an unpriced model, later priced 2 / M in, 8 / M out: 0.0036 a step.
    await policy(p, 'money', { scope: 'resource', window: '24h', maxCost: 0.01, alerts: [50] });
    const resourceId = `r-${randomUUID()}`;
    const steps = [0, 1, 2].map((i) =>
      stepEvent({
        resourceId,
        occurredAt: new Date(now - HOUR - i).toISOString(),
        provider: 'acme',
        model: 'acme-large',
        usage: { inputTokens: 1000, outputTokens: 200 },
      }),
    );
    await ingest(p, steps);
    expect(await alertsOf(p, `resource:${resourceId}`)).toEqual([]);
    expect(
      (
        await api(p, 'PUT', '/v1/prices/acme/acme-large', {
          effectiveFrom: new Date(now - 2 * HOUR).toISOString(),
          inputPerMillion: 2,
          outputPerMillion: 8,
        })
      ).status,
    ).toBe(200);
    const res = await api(p, 'POST', '/v1/prices/reprice', {
      from: new Date(now - 3 * HOUR).toISOString(),
      to: new Date(now).toISOString(),
    });
    expect(res.body.repriced).toBe(3);
    const alerts = await alertsOf(p, `resource:${resourceId}`);
    // Repriced in occurredAt order: the second correction reaches 0.0072 ≥ 0.005.
    expect(alerts.map((a) => [a.kind, a.threshold, a.usage, a.unit, a.stepEventId])).toEqual([
      ['BudgetThresholdCrossed', 50, 0.0108, 'USD', steps[1].eventId],
    ]);
  });

  it('a hard limit that denies alerts BudgetExhausted once, and again after usage fell back', async () => {
    const p = await createProject(svc.url);
    await policy(p, 'cap', { scope: 'resource', window: '1h', maxTotalTokens: 1000 });
    const resourceId = `r-${randomUUID()}`;
    const t0 = now;
    try {
      await ingest(p, [tokens(resourceId, 1000, t0 - 50 * MIN)]);
      const check = () => api(p, 'POST', '/v1/guard/check', { context: { resourceId } });
      const denials = await Promise.all(Array.from({ length: 8 }, check));
      expect(denials.every((d) => d.body.decision === 'deny')).toBe(true);
      let alerts = await alertsOf(p, `resource:${resourceId}`);
      expect(alerts.map((a) => [a.kind, a.usage, a.limit, a.source])).toEqual([
        ['BudgetExhausted', 1000, 1000, 'policy:cap'],
      ]);

      now = t0 + 11 * MIN; // aged out
      await ingest(p, [tokens(resourceId, 1000)]); // its commit sees the budget back at 0 first
      expect((await check()).body.decision).toBe('deny');
      alerts = await alertsOf(p, `resource:${resourceId}`);
      expect(alerts.map((a) => a.kind)).toEqual(['BudgetExhausted', 'BudgetExhausted']);
    } finally {
      now = t0;
    }
  });

  it('forecasts the burn rate of the last hour and when each limit is reached at it', async () => {
    const p = await createProject(svc.url);
    await policy(p, 'day', { scope: 'resource', window: '24h', maxTotalTokens: 10_000 });
    const resourceId = `r-${randomUUID()}`;
    // 3000 tokens 5 h ago (outside the last hour), 1000 in the last hour: 4000 used, 1000 / h.
    await ingest(p, [
      tokens(resourceId, 3000, now - 5 * HOUR),
      tokens(resourceId, 600, now - 40 * MIN),
      tokens(resourceId, 400, now - MIN),
    ]);
    const res = await api(p, 'POST', '/v1/guard/check', {
      context: { resourceId },
      limits: [{ scope: 'resource', window: '24h', maxInputTokens: 100_000 }],
    });
    const forecast = res.body.usage[`resource:${resourceId}@24h`].forecast;
    expect(forecast.burnRate).toEqual({
      cost: 0.0025,
      costUnit: 'USD',
      totalTokens: 1000,
      inputTokens: 1000,
      outputTokens: 0,
    });
    // 6000 tokens left at 1000 / h: 6 h from now. 96 000 input tokens left: 96 h, past the 24 h window.
    expect(forecast.limits).toEqual([
      { source: 'request', limitType: 'inputTokens', limit: 100_000, unit: 'tokens', reachedAt: null },
      {
        source: 'policy:day',
        limitType: 'totalTokens',
        limit: 10_000,
        unit: 'tokens',
        reachedAt: new Date(now + 6 * HOUR).toISOString(),
      },
    ]);
    expect(forecast.limitReachedAt).toBe(new Date(now + 6 * HOUR).toISOString());
    const usage = await api(p, 'GET', `/v1/guard/usage?scopeKey=resource:${resourceId}`);
    expect(usage.body.usage[`resource:${resourceId}@24h`].forecast.limitReachedAt).toBe(
      new Date(now + 6 * HOUR).toISOString(),
    );
  });

  it('refuses bad thresholds with the field, storing nothing', async () => {
    const p = await createProject(svc.url);
    const bad = await policy(p, 'bad', { scope: 'resource', maxCost: 1, alerts: [80, 80] });
    expect({ status: bad.status, field: bad.body.field }).toEqual({ status: 400, field: 'alerts' });
    const negative = await policy(p, 'bad', { scope: 'resource', maxCost: 1, alerts: [0] });
    expect({ status: negative.status, field: negative.body.field }).toEqual({ status: 400, field: 'alerts[0]' });
    expect((await api(p, 'GET', '/v1/policies')).body.policies).toEqual([]);
  });
});
