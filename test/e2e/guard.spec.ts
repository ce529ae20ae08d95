import { Clock } from '@tollgate/platform';
import { EVENT_SELECT } from '@tollgate/database';
import { scopeLockId } from '../../libs/ledger/src/scope-usage/scope-lock';
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { TEST_DATABASE_URL } from '../support/env';
import { call, createProject, stepEvent, type TestProject } from '../support/http';
import { startService, type RunningService } from '../support/service';

// gpt-4o: $2.50 / M input, $10 / M output → 1000 in + 200 out = $0.0045.
const STEP_COST = 0.0045;

describe('POST /v1/guard/check', () => {
  let svc: RunningService;
  let project: TestProject;
  beforeAll(async () => {
    svc = await startService();
    project = await createProject(svc.url);
  });
  afterAll(() => svc.close());

  const ingest = (events: unknown[], p = project) =>
    call(svc.url, 'POST', '/v1/events', { token: p.key, body: { events } });
  const check = (body: Record<string, unknown>, p = project) =>
    call(svc.url, 'POST', '/v1/guard/check', { token: p.key, body });
  const logOf = (type: string, reservationId: string) =>
    svc.prisma.$queryRawUnsafe<any[]>(
      `SELECT ${EVENT_SELECT} FROM events WHERE project_id = $1 AND type = $2 AND reservation_id = $3`,
      project.id,
      type,
      reservationId,
    );

  it('counts a step the moment its ingest commits (no sleep)', async () => {
    const resourceId = `r-${randomUUID()}`;
    await ingest([stepEvent({ resourceId }), stepEvent({ resourceId })]);
    const res = await check({ context: { resourceId }, limits: [{ scope: 'resource', window: '24h', maxCost: 1 }] });
    expect(res.status).toBe(200);
    expect(res.body.decision).toBe('allow');
    expect(res.body.usage[`resource:${resourceId}@24h`]).toMatchObject({
      inputTokens: 2000,
      outputTokens: 400,
      totalTokens: 2400,
      estimatedCost: 2 * STEP_COST,
      costUnit: 'USD',
      reservedCost: 0,
    });
  });

  it('lets concurrent checks of one budget share reads, and each still counts every step acknowledged before it was sent', async () => {
    const resourceId = `r-${randomUUID()}`;
    const body = { context: { resourceId }, limits: [{ scope: 'resource', window: '24h', maxCost: 1000 }] };
    const readsMetric = async () => {
      const text = (await call(svc.url, 'GET', '/metrics')).body as string;
      return Number(/^tollgate_guard_usage_reads_total (\d+)/m.exec(text)![1]);
    };
    const readsBefore = await readsMetric();
    let acknowledged = 0;
    let stop = false;
    let checks = 0;
    const stale: string[] = [];
    // 16 agents check the budget back to back while steps are acknowledged one by one.
    const agents = Array.from({ length: 16 }, async () => {
      while (!stop) {
        const ackedWhenSent = acknowledged;
        const res = await check(body);
        checks++;
        const seen = res.body.usage[`resource:${resourceId}@24h`].inputTokens / 1000;
        if (seen < ackedWhenSent) stale.push(`sent after ${ackedWhenSent} steps, saw ${seen}`);
      }
    });
    for (let step = 1; step <= 30; step++) {
      expect((await ingest([stepEvent({ resourceId })])).status).toBe(200);
      acknowledged = step;
      // And a check sent right after the acknowledgement, while the agents' reads are in flight:
      const res = await check(body);
      expect(res.body.usage[`resource:${resourceId}@24h`].inputTokens).toBeGreaterThanOrEqual(step * 1000);
    }
    stop = true;
    await Promise.all(agents);
    expect(stale).toEqual([]);
    const reads = (await readsMetric()) - readsBefore;
    expect(checks).toBeGreaterThan(100);
    expect(reads).toBeLessThan(checks); // reads were shared (every check alone would be checks + 30)
  });

  it('denies when usage reaches the limit, and says which limit', async () => {
    const resourceId = `r-${randomUUID()}`;
    await ingest([stepEvent({ resourceId, usage: { inputTokens: 1000, outputTokens: 0 } })]);
    const res = await check({
      context: { resourceId, threadId: 't' },
      limits: [
        { scope: 'resource', window: '1h', maxTotalTokens: 1000 },
        { scope: 'session', window: '1h', maxCost: 1 },
      ],
    });
    expect(res.body.decision).toBe('deny');
    expect(res.body.violations).toEqual([
      {
        scope: 'resource',
        scopeKey: `resource:${resourceId}`,
        window: '1h',
        limitType: 'totalTokens',
        usage: 1000,
        limit: 1000,
        unit: 'tokens',
        threshold: 'hard',
        source: 'request',
      },
    ]);
    expect(res.body.skipped).toEqual([{ scope: 'session', reason: 'no sessionId in context' }]);
  });

  it('includes the estimate: a step that would reach the limit is denied', async () => {
    const resourceId = `r-${randomUUID()}`;
    await ingest([stepEvent({ resourceId })]); // $0.0045
    const estimate = { provider: 'openai', model: 'gpt-4o', inputTokens: 1000, maxOutputTokens: 200 }; // $0.0045
    expect(
      (await check({ context: { resourceId }, limits: [{ scope: 'resource', maxCost: 0.0091 }], estimate })).body
        .decision,
    ).toBe('allow');
    expect(
      (await check({ context: { resourceId }, limits: [{ scope: 'resource', maxCost: 0.009 }], estimate })).body
        .decision,
    ).toBe('deny');
  });

  it('counts the run scope over the whole run, by trace id', async () => {
    const traceId = `trace-${randomUUID()}`;
    const old = new Date(Date.now() - 3 * 24 * 3600_000).toISOString();
    await ingest([stepEvent({ traceId, occurredAt: old }), stepEvent({ traceId })]);
    const res = await check({ context: { traceId }, limits: [{ scope: 'run', maxTotalTokens: 2400 }] });
    expect(res.body.decision).toBe('deny');
    expect(res.body.usage[`run:${traceId}`]).toMatchObject({ totalTokens: 2400, window: null });
  });

  it('rejects a malformed check with the field', async () => {
    const bad = await check({ context: { resourceId: 'r' }, limits: [{ scope: 'galaxy', maxCost: 1 }] });
    expect(bad.status).toBe(400);
    expect(bad.body.field).toBe('limits[0].scope');
    const noAmount = await check({ context: { resourceId: 'r' }, limits: [{ scope: 'resource' }] });
    expect(noAmount.body.field).toBe('limits[0]');
    const reserveWithout = await check({ context: { resourceId: 'r' }, reserve: true });
    expect(reserveWithout.body.field).toBe('estimate');
  });

  it('needs the guard scope', async () => {
    const reader = await createProject(svc.url, ['read']);
    expect((await check({ context: {} }, reader)).status).toBe(403);
  });

  describe('window edges are exact to the millisecond', () => {
    let clocked: RunningService;
    let p: TestProject;
    const now = new Date('2026-06-10T12:34:56.789Z');
    beforeAll(async () => {
      // A 365-day window's edges need events a year old: the operator allows that backfill.
      clocked = await startService({ INGEST_MAX_AGE_DAYS: '400' });
      jest.spyOn(clocked.app.get(Clock), 'now').mockImplementation(() => new Date(now));
      p = await createProject(clocked.url);
    });
    afterAll(() => clocked.close());

    it.each(['1h', '24h', '7d', '30d', '365d'] as const)(
      '%s: an event 1 ms inside counts, 1 ms before does not, one dated ahead of the clock does',
      async (window) => {
        const ms = {
          '1h': 3600_000,
          '24h': 86_400_000,
          '7d': 7 * 86_400_000,
          '30d': 30 * 86_400_000,
          '365d': 365 * 86_400_000,
        }[window];
        const resourceId = `r-${randomUUID()}`;
        const at = (offset: number, inputTokens: number) =>
          stepEvent({
            resourceId,
            occurredAt: new Date(now.getTime() + offset).toISOString(),
            usage: { inputTokens, outputTokens: 0 },
          });
        const events = [
          at(-ms - 1, 1), // 1 ms before the window: out
          at(-ms, 10), // the window's first instant: in
          at(-ms + 1, 100), // 1 ms inside: in
          at(-Math.floor(ms / 2), 1000), // in the middle (whole hours and days)
          at(-1, 10_000), // 1 ms before now: in
          at(0, 100_000), // now: in
          at(1, 1_000_000), // 1 ms ahead of our clock: committed, so it counts (a window never hides a step)
        ];
        const res = await call(clocked.url, 'POST', '/v1/events', { token: p.key, body: { events } });
        expect(res.body.accepted).toBe(7);
        const g = await call(clocked.url, 'POST', '/v1/guard/check', {
          token: p.key,
          body: { context: { resourceId }, limits: [{ scope: 'resource', window, maxInputTokens: 10_000_000 }] },
        });
        expect(g.body.usage[`resource:${resourceId}@${window}`].inputTokens).toBe(1_111_110);
      },
    );
  });

  describe('reservations', () => {
    const estimate = { provider: 'openai', model: 'gpt-4o', inputTokens: 1000, maxOutputTokens: 200 };

    it('holds the estimate until the step event settles it with the actual usage, once', async () => {
      const resourceId = `r-${randomUUID()}`;
      const limits = [{ scope: 'resource', maxCost: 1 }];
      const res = await check({ context: { resourceId }, limits, estimate, reserve: true, stepId: randomUUID() });
      expect(res.body.decision).toBe('allow');
      const reservation = res.body.reservation;
      expect(reservation).toMatchObject({
        estimatedCost: STEP_COST,
        costUnit: 'USD',
        inputTokens: 1000,
        outputTokens: 200,
      });
      expect(await logOf('BudgetReserved', reservation.id)).toHaveLength(1);

      const held = await check({ context: { resourceId }, limits });
      expect(held.body.usage[`resource:${resourceId}@7d`]).toMatchObject({
        estimatedCost: 0,
        reservedCost: STEP_COST,
        reservedInputTokens: 1000,
      });

      const actual = stepEvent({
        resourceId,
        reservationId: reservation.id,
        usage: { inputTokens: 500, outputTokens: 100 },
      });
      await ingest([actual]);
      await ingest([actual]); // the same step event again: a duplicate, settles nothing twice
      const settled = await check({ context: { resourceId }, limits });
      expect(settled.body.usage[`resource:${resourceId}@7d`]).toMatchObject({
        inputTokens: 500,
        outputTokens: 100,
        estimatedCost: 0.00225,
        reservedCost: 0,
        reservedInputTokens: 0,
      });
      expect(await logOf('ReservationSettled', reservation.id)).toHaveLength(1);
    });

    it('gives a retried check of the same step its reservation back instead of a second one', async () => {
      const resourceId = `r-${randomUUID()}`;
      const body = {
        context: { resourceId },
        limits: [{ scope: 'resource', maxCost: 1 }],
        estimate,
        reserve: true,
        stepId: randomUUID(),
      };
      const [a, b] = await Promise.all([check(body), check(body)]);
      expect(a.body.reservation.id).toBe(b.body.reservation.id);
      const usage = await check({ context: { resourceId }, limits: body.limits });
      expect(usage.body.usage[`resource:${resourceId}@7d`].reservedCost).toBe(STEP_COST);
    });

    it.each([
      ['its own hold fills the budget', { maxCost: STEP_COST * 1.5 }, 'deny'],
      ['its own hold passes a warning threshold', { maxCost: STEP_COST * 3, warnAtPercent: 50 }, 'allow'],
    ])('gives a retried step its reservation back though %s, and logs no decision', async (_, limit, next) => {
      const resourceId = `r-${randomUUID()}`;
      const decisions = async () =>
        (
          await svc.prisma.$queryRawUnsafe<{ n: number }[]>(
            `SELECT count(*)::int AS n FROM events WHERE project_id = $1 AND type = 'GuardDecided' AND resource_id = $2`,
            project.id,
            resourceId,
          )
        )[0].n;
      const body = { context: { resourceId }, limits: [{ scope: 'resource', ...limit }], estimate, reserve: true };
      const stepId = randomUUID();
      const first = await check({ ...body, stepId });
      expect(first.body).toMatchObject({ decision: 'allow', warnings: [] });
      for (const retry of [await check({ ...body, stepId }), await check({ ...body, stepId })]) {
        expect(retry.status).toBe(200);
        expect(retry.body).toMatchObject({ decision: 'allow', reservation: { id: first.body.reservation.id } });
      }
      expect(await decisions()).toBe(0);
      expect(await logOf('BudgetReserved', first.body.reservation.id)).toHaveLength(1);
      // Another step is decided with that hold: denied, or allowed with a warning; either is logged.
      const other = await check({ ...body, stepId: randomUUID() });
      expect(other.body.decision).toBe(next);
      expect(await decisions()).toBe(1);
    });

    it.each([
      ['does not fit', { maxCost: STEP_COST * 1.5 }, 'deny', 1],
      ['would pass a warning threshold', { maxCost: STEP_COST * 3, warnAtPercent: 50 }, 'allow', 0],
    ])(
      'takes a tentative check only when it fits with nothing to report; one that %s holds and logs nothing',
      async (_, limit, own, violations) => {
        const resourceId = `r-${randomUUID()}`;
        const logged = async () =>
          (
            await svc.prisma.$queryRawUnsafe<{ type: string }[]>(
              `SELECT type FROM events WHERE project_id = $1 AND resource_id = $2 ORDER BY type`,
              project.id,
              resourceId,
            )
          ).map((e) => e.type);
        const body = { context: { resourceId }, limits: [{ scope: 'resource', ...limit }], estimate, reserve: true };
        const [step1, step2] = [randomUUID(), randomUUID()];
        const first = await check({ ...body, stepId: step1, tentative: true });
        expect(first.body).toMatchObject({
          decision: 'allow',
          warnings: [],
          reservation: { estimatedCost: STEP_COST },
        });

        const ahead = await check({ ...body, stepId: step2, tentative: true });
        expect(ahead.status).toBe(200);
        expect(ahead.body).toMatchObject({ decision: 'deny', reason: 'tentative', estimate: { cost: STEP_COST } });
        expect(ahead.body.reservation).toBeUndefined();
        expect(ahead.body.violations).toHaveLength(violations);
        expect(await logged()).toEqual(['BudgetReserved']);
        const held = await check({ context: { resourceId }, limits: body.limits });
        expect(held.body.usage[`resource:${resourceId}@7d`].reservedCost).toBe(STEP_COST);

        // The step's own check, sent as usual, is decided and logged as any check.
        const stepsOwn = await check({ ...body, stepId: step2 });
        expect(stepsOwn.body.decision).toBe(own);
        expect((await logged()).filter((t) => t === 'GuardDecided')).toHaveLength(1);
      },
    );

    it('refuses a tentative check that would not reserve', async () => {
      const limits = [{ scope: 'resource', maxCost: 1 }];
      const base = { context: { resourceId: 'r' }, limits, estimate, tentative: true };
      for (const body of [base, { ...base, reserve: true, stepId: 's', dryRun: true }]) {
        const res = await check(body);
        expect(res.status).toBe(400);
        expect(JSON.stringify(res.body)).toMatch(/tentative/);
      }
    });

    it('frees the budget when released, idempotently', async () => {
      const resourceId = `r-${randomUUID()}`;
      const res = await check({
        context: { resourceId },
        limits: [{ scope: 'resource', maxCost: 1 }],
        estimate,
        reserve: true,
        stepId: randomUUID(),
      });
      const id = res.body.reservation.id;
      const first = await call(svc.url, 'POST', `/v1/guard/reservations/${id}/release`, { token: project.key });
      expect(first.body).toMatchObject({ id, status: 'released' });
      const again = await call(svc.url, 'POST', `/v1/guard/reservations/${id}/release`, { token: project.key });
      expect(again.status).toBe(200);
      expect(again.body.status).toBe('released');
      expect(await logOf('ReservationReleased', id)).toHaveLength(1);
      const after = await check({ context: { resourceId }, limits: [{ scope: 'resource', maxCost: 1 }] });
      expect(after.body.usage[`resource:${resourceId}@7d`].reservedCost).toBe(0);
      // A late step event still counts its actual usage; the released reservation stays released.
      await ingest([stepEvent({ resourceId, reservationId: id })]);
      expect(
        (await check({ context: { resourceId }, limits: [{ scope: 'resource', maxCost: 1 }] })).body.usage[
          `resource:${resourceId}@7d`
        ].estimatedCost,
      ).toBe(STEP_COST);
      expect(await logOf('ReservationSettled', id)).toHaveLength(0);
    });

    it("does not release another project's reservation", async () => {
      const other = await createProject(svc.url);
      const res = await check({ context: { resourceId: 'x' }, estimate, reserve: true, stepId: randomUUID() });
      const attempt = await call(svc.url, 'POST', `/v1/guard/reservations/${res.body.reservation.id}/release`, {
        token: other.key,
      });
      expect(attempt.status).toBe(404);
      expect((await svc.prisma.reservation.findFirst({ where: { id: res.body.reservation.id } }))!.status).toBe('open');
    });

    it('lapses at expiry: the budget is free again and the lapse is logged once', async () => {
      const short = await startService({ GUARD_RESERVATION_TTL_MS: '300' });
      try {
        const p = await createProject(short.url);
        const resourceId = `r-${randomUUID()}`;
        const res = await call(short.url, 'POST', '/v1/guard/check', {
          token: p.key,
          body: {
            context: { resourceId },
            limits: [{ scope: 'resource', maxCost: 1 }],
            estimate,
            reserve: true,
            stepId: randomUUID(),
          },
        });
        const id = res.body.reservation.id;
        await new Promise((r) => setTimeout(r, 400));
        const after = await call(short.url, 'POST', '/v1/guard/check', {
          token: p.key,
          body: { context: { resourceId }, limits: [{ scope: 'resource', maxCost: 1 }] },
        });
        expect(after.body.usage[`resource:${resourceId}@7d`].reservedCost).toBe(0);
        const { ReservationsService } = await import('@tollgate/ledger');
        const sweeper = short.app.get(ReservationsService);
        expect(await sweeper.sweep()).toBeGreaterThanOrEqual(1);
        await sweeper.sweep();
        const rows = await short.prisma.$queryRawUnsafe<any[]>(
          `SELECT ${EVENT_SELECT} FROM events WHERE type = 'ReservationReleased' AND reservation_id = $1`,
          id,
        );
        expect(rows).toHaveLength(1);
        expect(rows[0].data.reason).toBe('lapsed');
        expect(
          (await call(short.url, 'POST', `/v1/guard/reservations/${id}/release`, { token: p.key })).body.status,
        ).toBe('lapsed');
      } finally {
        await short.close();
      }
    });
  });

  describe('policies', () => {
    it('apply to every check, and a request cannot loosen them', async () => {
      const p = await createProject(svc.url);
      const put = await call(svc.url, 'PUT', '/v1/policies/daily-cap', {
        token: p.key,
        body: { scope: 'resource', window: '24h', maxCost: 0.004 },
      });
      expect(put.status).toBe(200);
      const resourceId = `r-${randomUUID()}`;
      await ingest([stepEvent({ resourceId })], p); // $0.0045 ≥ $0.004
      const plain = await check({ context: { resourceId } }, p);
      expect(plain.body.decision).toBe('deny');
      expect(plain.body.violations[0]).toMatchObject({ source: 'policy:daily-cap', limit: 0.004 });
      const looser = await check(
        { context: { resourceId }, limits: [{ scope: 'resource', window: '24h', maxCost: 100 }] },
        p,
      );
      expect(looser.body.decision).toBe('deny');
      const dry = await check({ context: { resourceId }, dryRun: true }, p);
      expect(dry.body.decision).toBe('deny');
      expect((await call(svc.url, 'GET', '/v1/policies', { token: p.key })).body.policies).toEqual([
        expect.objectContaining({ name: 'daily-cap', maxCost: 0.004, strategy: 'block' }),
      ]);
      expect((await call(svc.url, 'DELETE', '/v1/policies/daily-cap', { token: p.key })).status).toBe(204);
      expect((await check({ context: { resourceId } }, p)).body.decision).toBe('allow');
    });

    it('warn policies and soft thresholds warn without blocking, and entity-scoped policies apply to that entity only', async () => {
      const p = await createProject(svc.url);
      await call(svc.url, 'PUT', '/v1/policies/soft', {
        token: p.key,
        body: { scope: 'user', window: '1h', maxTotalTokens: 1000, strategy: 'warn' },
      });
      await call(svc.url, 'PUT', '/v1/policies/writer-only', {
        token: p.key,
        body: { scope: 'user', window: '1h', maxTotalTokens: 100, entityName: 'writer' },
      });
      const userId = `u-${randomUUID()}`;
      await ingest([stepEvent({ userId })], p); // 1200 tokens
      const reader = await check({ context: { userId, entityName: 'reader' } }, p);
      expect(reader.body.decision).toBe('allow');
      expect(reader.body.warnings).toEqual([expect.objectContaining({ source: 'policy:soft', threshold: 'hard' })]);
      const writer = await check({ context: { userId, entityName: 'writer' } }, p);
      expect(writer.body.decision).toBe('deny');
      const soft = await check(
        { context: { userId }, limits: [{ scope: 'user', window: '1h', maxTotalTokens: 1300, warnAtPercent: 90 }] },
        p,
      );
      expect(soft.body.warnings).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ source: 'request', threshold: 'soft', usage: 1200, limit: 1300 }),
        ]),
      );
    });

    it('validates a policy', async () => {
      const bad = await call(svc.url, 'PUT', '/v1/policies/x', {
        token: project.key,
        body: { scope: 'resource', window: '2d', maxCost: 1 },
      });
      expect(bad.status).toBe(400);
      expect(bad.body.field).toBe('window');
    });
  });

  describe('unpriced usage (a model with no price)', () => {
    const unknown = { provider: 'acme', model: 'acme-large-9' };
    it('counts its tokens, and by default a cost budget does not let it through as free', async () => {
      const resourceId = `r-${randomUUID()}`;
      await ingest([stepEvent({ resourceId, ...unknown })]);
      const res = await check({
        context: { resourceId },
        limits: [
          { scope: 'resource', maxCost: 100 },
          { scope: 'resource', maxTotalTokens: 1_000_000 },
        ],
      });
      expect(res.body.decision).toBe('deny');
      expect(res.body.violations).toEqual([
        expect.objectContaining({ limitType: 'cost', reason: expect.stringContaining('no price') }),
      ]);
      expect(res.body.usage[`resource:${resourceId}@7d`]).toMatchObject({
        totalTokens: 1200,
        estimatedCost: 0,
        unpricedEvents: 1,
      });
    });

    it('counts its tokens only when the project chose count_tokens (its cost budgets then do not bind it)', async () => {
      const lax = await createProject(svc.url, ['ingest', 'guard', 'read', 'admin'], {
        unpricedPolicy: 'count_tokens',
      });
      const resourceId = `r-${randomUUID()}`;
      await ingest([stepEvent({ resourceId, ...unknown })], lax);
      const res = await check(
        {
          context: { resourceId },
          limits: [
            { scope: 'resource', maxCost: 0.000001 },
            { scope: 'resource', maxTotalTokens: 1_000_000 },
          ],
        },
        lax,
      );
      expect(res.body.decision).toBe('allow');
    });

    it('denies cost-limited steps when the project says so, and leaves token limits alone', async () => {
      const strict = await createProject(svc.url, ['ingest', 'guard', 'read', 'admin'], { unpricedPolicy: 'deny' });
      const resourceId = `r-${randomUUID()}`;
      await ingest([stepEvent({ resourceId, ...unknown })], strict);
      const costLimited = await check(
        { context: { resourceId }, limits: [{ scope: 'resource', maxCost: 100 }] },
        strict,
      );
      expect(costLimited.body.decision).toBe('deny');
      expect(costLimited.body.violations[0]).toMatchObject({ limitType: 'cost', limit: 100 });
      const tokenLimited = await check(
        { context: { resourceId }, limits: [{ scope: 'resource', maxTotalTokens: 1_000_000 }] },
        strict,
      );
      expect(tokenLimited.body.decision).toBe('allow');
    });
  });

  describe('audit', () => {
    it('records every denial and warning as a GuardDecided event, queryable by scope; dry runs are not recorded', async () => {
      const resourceId = `r-${randomUUID()}`;
      await ingest([stepEvent({ resourceId })]);
      await check({ context: { resourceId }, limits: [{ scope: 'resource', maxTotalTokens: 100 }] });
      await check({
        context: { resourceId },
        limits: [{ scope: 'resource', maxTotalTokens: 2000, warnAtPercent: 50 }],
      });
      await check({ context: { resourceId }, limits: [{ scope: 'resource', maxTotalTokens: 100 }], dryRun: true });
      await check({ context: { resourceId }, limits: [{ scope: 'resource', maxTotalTokens: 100_000 }] });
      const res = await call(svc.url, 'GET', `/v1/guard/decisions?scopeKey=resource:${resourceId}`, {
        token: project.key,
      });
      expect(res.status).toBe(200);
      expect(res.body.decisions.map((d: any) => d.decision)).toEqual(['allow', 'deny']);
      expect(res.body.decisions[1].violations[0]).toMatchObject({ limitType: 'totalTokens', usage: 1200, limit: 100 });
      expect(res.body.decisions[0].warnings[0]).toMatchObject({ threshold: 'soft' });
    });
  });

  describe('when the guard cannot decide', () => {
    it('answers a scope held by a stuck transaction as busy within the bound, whatever the failMode, and leaves nothing behind', async () => {
      const slow = await startService({ GUARD_TIMEOUT_MS: '500' });
      const blocker = new Client({ connectionString: TEST_DATABASE_URL });
      await blocker.connect();
      try {
        const p = await createProject(slow.url);
        const resourceId = `r-${randomUUID()}`;
        // Another transaction holds the scope's lock (as a stuck check on another replica would).
        await blocker.query('BEGIN');
        await blocker.query('SELECT pg_advisory_xact_lock($1::bigint)', [
          scopeLockId(p.id, `resource:${resourceId}`).toString(),
        ]);
        const body = (failMode: string) => ({
          context: { resourceId },
          limits: [{ scope: 'resource', maxCost: 1 }],
          estimate: { provider: 'openai', model: 'gpt-4o', inputTokens: 1, maxOutputTokens: 1 },
          reserve: true,
          stepId: randomUUID(),
          failMode,
        });
        const started = Date.now();
        const open = await call(slow.url, 'POST', '/v1/guard/check', { token: p.key, body: body('open') });
        const closed = await call(slow.url, 'POST', '/v1/guard/check', { token: p.key, body: body('closed') });
        expect(Date.now() - started).toBeLessThan(3000);
        for (const res of [open, closed]) {
          expect(res.status).toBe(200);
          expect(res.body).toMatchObject({ decision: 'deny', reason: 'busy', retryAfterMs: expect.any(Number) });
          expect(res.body.reservation).toBeUndefined();
        }
        await blocker.query('ROLLBACK');
        const [left] = await slow.prisma.$queryRawUnsafe<{ r: bigint; e: bigint }[]>(
          `SELECT (SELECT count(*) FROM reservations WHERE project_id = $1) AS r, (SELECT count(*) FROM events WHERE project_id = $1) AS e`,
          p.id,
        );
        expect({ reservations: Number(left.r), events: Number(left.e) }).toEqual({ reservations: 0, events: 0 });
      } finally {
        await blocker.query('ROLLBACK').catch(() => undefined);
        await blocker.end();
        await slow.close();
      }
    });

    it("applies the caller's failMode only when the database cannot be reached", async () => {
      const lost = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
      const body = (failMode: string) => ({
        context: { resourceId: `r-${randomUUID()}` },
        limits: [{ scope: 'resource', maxCost: 1 }],
        estimate: { provider: 'openai', model: 'gpt-4o', inputTokens: 1, maxOutputTokens: 1 },
        reserve: true,
        stepId: randomUUID(),
        failMode,
      });
      // The key and the settings are cached; the database goes away before the decision.
      await check(body('open'));
      const spies = [
        jest.spyOn(svc.prisma, 'transaction').mockRejectedValue(lost),
        jest.spyOn(svc.prisma, 'oneTrip').mockRejectedValue(lost),
      ];
      try {
        const open = await check(body('open'));
        const closed = await check(body('closed'));
        expect(open.body).toMatchObject({ decision: 'allow', reason: expect.stringContaining('failMode open') });
        expect(closed.body).toMatchObject({ decision: 'deny', reason: expect.stringContaining('failMode closed') });
      } finally {
        for (const spy of spies) spy.mockRestore();
      }
    });

    it('answers 503 with Retry-After, quickly, when PostgreSQL cannot be reached at all', async () => {
      const down = await startService({ DATABASE_URL: 'postgresql://postgres@127.0.0.1:1/tollgate_test' });
      try {
        const started = Date.now();
        const res = await call(down.url, 'POST', '/v1/guard/check', {
          token: project.key,
          body: { context: { resourceId: 'r' }, failMode: 'closed' },
        });
        expect(res.status).toBe(503);
        expect(res.headers.get('retry-after')).toBe('1');
        expect(Date.now() - started).toBeLessThan(5000);
      } finally {
        await down.close();
      }
    });
  });
});
