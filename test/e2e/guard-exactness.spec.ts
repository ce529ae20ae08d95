import { EVENT_SELECT } from '@tollgate/database';
import { priceStep } from '@tollgate/ledger';
import { randomUUID } from 'node:crypto';
import { Pool } from 'undici';
import { TEST_ADMIN_TOKEN } from '../support/env';
import { call, createProject, type Reply, type TestProject } from '../support/http';
import { startService, type RunningService } from '../support/service';

/**
 * The guard's answers must be exact: under load, across clock skew, across cost units, for
 * models without a price, when a step uses more than it reserved, and when a client's event
 * names a reservation or an id that is not its own.
 *
 * gpt-4o: $2.50 / M input, $10 / M output → 1000 in + 200 out = $0.0045.
 */
const GPT4O = { provider: 'openai', model: 'gpt-4o', inputTokens: 1000, maxOutputTokens: 200 };
const STEP_MICROS = 4500;
const UNKNOWN = { provider: 'acme', model: 'acme-unknown-1', inputTokens: 1000, maxOutputTokens: 1000 };

const uid = (prefix: string) => `${prefix}-${randomUUID()}`;

/** A step event with unique ids; override any field (keep the check's context ids when settling). */
function step(overrides: Record<string, unknown> = {}): Record<string, any> {
  return {
    eventId: uid('evt'),
    occurredAt: new Date().toISOString(),
    traceId: uid('trace'),
    entityType: 'agent',
    entityName: 'support-agent',
    provider: 'openai',
    model: 'gpt-4o',
    usage: { inputTokens: 1000, outputTokens: 200 },
    ...overrides,
  };
}

/** The calls a test makes as one project's agent, plus the log and the reservations table. */
function asProject(svc: RunningService, p: TestProject) {
  return {
    check: (body: Record<string, unknown>) => call(svc.url, 'POST', '/v1/guard/check', { token: p.key, body }),
    ingest: (events: unknown[]) => call(svc.url, 'POST', '/v1/events', { token: p.key, body: { events } }),
    release: (id: string) => call(svc.url, 'POST', `/v1/guard/reservations/${id}/release`, { token: p.key }),
    configure: (body: Record<string, unknown>) =>
      call(svc.url, 'PATCH', `/v1/admin/projects/${p.id}`, { token: TEST_ADMIN_TOKEN, body }),
    logOf: (type: string, reservationId: string) =>
      svc.prisma.$queryRawUnsafe<any[]>(
        `SELECT ${EVENT_SELECT} FROM events WHERE project_id = $1 AND type = $2 AND reservation_id = $3`,
        p.id,
        type,
        reservationId,
      ),
    reservations: () =>
      svc.prisma.$queryRawUnsafe<{ id: string; status: string; cost_micros: bigint }[]>(
        'SELECT id, status, cost_micros FROM reservations WHERE project_id = $1',
        p.id,
      ),
    recordedCostMicros: async () => {
      const [row] = await svc.prisma.$queryRawUnsafe<{ cost: bigint | null }[]>(
        `SELECT sum(cost_micros) AS cost FROM events WHERE project_id = $1 AND type = 'StepUsageRecorded'`,
        p.id,
      );
      return Number(row.cost ?? 0);
    },
  };
}

const isBusy = (r: Reply) => r.body?.reason === 'busy';
const isUnavailable = (r: Reply) => typeof r.body?.reason === 'string' && r.body.reason.startsWith('guard unavailable');

/** The admin route that changes a project's settings answered success. */
function expectPatched(reply: Reply) {
  expect({ status: reply.status, ok: reply.status === 200 || reply.status === 204, body: reply.body }).toEqual({
    status: reply.status,
    ok: true,
    body: reply.body,
  });
}

describe('guard under load: 1,000 concurrent reserving checks of one budget (default settings)', () => {
  let svc: RunningService;
  let http: Pool;
  // Default settings on purpose: GUARD_TIMEOUT_MS and the failMode are not raised to hide queueing.
  beforeAll(async () => {
    svc = await startService();
    http = new Pool(svc.url, { connections: 1000 });
  });
  afterAll(async () => {
    await http.close();
    await svc.close();
  });

  it('allows exactly the 14 steps that fit, reserves exactly those, audits every evaluated denial, and never over-commits', async () => {
    const p = await createProject(svc.url);
    const as = asProject(svc, p);
    const resourceId = uid('r');
    const limits = [{ scope: 'resource', window: '24h', maxCost: 0.0631 }]; // 14 × $0.0045 = $0.063 fits; 15 would reach $0.0675

    const checks = Array.from({ length: 1000 }, () => ({ stepId: randomUUID(), traceId: uid('trace') }));
    const answers: Reply[] = await Promise.all(
      checks.map(async ({ stepId, traceId }) => {
        const res = await http.request({
          path: '/v1/guard/check',
          method: 'POST',
          headers: { authorization: `Bearer ${p.key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ context: { resourceId, traceId }, limits, estimate: GPT4O, reserve: true, stepId }),
        });
        return { status: res.statusCode, body: await res.body.json(), headers: new Headers() } as Reply;
      }),
    );

    const allowed = answers.map((a, i) => ({ a, check: checks[i] })).filter(({ a }) => a.body.decision === 'allow');
    const busy = answers.filter(isBusy);
    const evaluatedDenials = answers.filter((a) => a.body.decision === 'deny' && !isBusy(a));
    expect({
      non200: answers.filter((a) => a.status !== 200).length,
      guardUnavailable: answers.filter(isUnavailable).length,
      allowed: allowed.length,
      allowedWithoutReservation: allowed.filter(({ a }) => !a.body.reservation).length,
    }).toEqual({ non200: 0, guardUnavailable: 0, allowed: 14, allowedWithoutReservation: 0 });
    for (const b of busy) {
      expect(b.body).toMatchObject({ decision: 'deny', retryAfterMs: expect.any(Number) });
      expect(b.body.retryAfterMs).toBeGreaterThan(0);
      expect(b.body.reservation).toBeUndefined();
    }

    const rows = await as.reservations();
    expect(rows.map((r) => r.status)).toEqual(Array(14).fill('open'));
    expect(new Set(rows.map((r) => r.id))).toEqual(new Set(allowed.map(({ a }) => a.body.reservation.id)));
    const [{ n }] = await svc.prisma.$queryRawUnsafe<{ n: bigint }[]>(
      `SELECT count(*) AS n FROM events WHERE project_id = $1 AND type = 'GuardDecided'`,
      p.id,
    );
    expect(Number(n)).toBe(evaluatedDenials.length);

    // Each allowed step reports its actual usage (equal to the estimate) against its reservation.
    const settled = await as.ingest(
      allowed.map(({ a, check }) =>
        step({
          eventId: check.stepId,
          resourceId,
          traceId: check.traceId,
          reservationId: a.body.reservation.id,
          usage: { inputTokens: 1000, outputTokens: 200 },
        }),
      ),
    );
    expect(settled.body.accepted).toBe(14);
    const cost = await as.recordedCostMicros();
    expect(cost).toBeLessThanOrEqual(63_100);
    expect(cost).toBe(14 * STEP_MICROS);
  }, 60_000);
});

describe('guard exactness', () => {
  let svc: RunningService;
  beforeAll(async () => (svc = await startService()));
  afterAll(() => svc.close());

  const project = async () => {
    const p = await createProject(svc.url);
    return { p, ...asProject(svc, p) };
  };

  describe('clock skew', () => {
    it('counts a settled step dated 4 minutes ahead (inside the accepted skew) at once, not when its time comes', async () => {
      const { check, ingest } = await project();
      const resourceId = uid('r');
      const traceId = uid('trace');
      const limits = [{ scope: 'resource', window: '1h', maxTotalTokens: 2000 }];
      const reserved = await check({
        context: { resourceId, traceId },
        limits,
        estimate: { provider: 'openai', model: 'gpt-4o', inputTokens: 1000, maxOutputTokens: 100 },
        reserve: true,
        stepId: randomUUID(),
      });
      expect(reserved.body.decision).toBe('allow');
      const ahead = new Date(Date.now() + 4 * 60_000).toISOString();
      const res = await ingest([
        step({
          resourceId,
          traceId,
          occurredAt: ahead,
          reservationId: reserved.body.reservation.id,
          usage: { inputTokens: 999_000, outputTokens: 1_000 },
        }),
      ]);
      expect(res.body.accepted).toBe(1);

      const next = await check({ context: { resourceId, traceId }, limits });
      expect({
        decision: next.body.decision,
        totalTokens: next.body.usage[`resource:${resourceId}@1h`].totalTokens,
      }).toEqual({ decision: 'deny', totalTokens: 1_000_000 });
    });
  });

  describe('cost units', () => {
    const reported = (resourceId: string, amount: number, currency: string) =>
      step({ resourceId, cost: { amount, currency, source: 'provider' } });

    it('never adds amounts of different currencies: usage in a unit with no rate is reported apart, not counted against a USD limit', async () => {
      const { check, ingest } = await project();
      const resourceId = uid('r');
      expect(
        (
          await ingest([
            reported(resourceId, 1, 'USD'),
            reported(resourceId, 1000, 'JPY'),
            reported(resourceId, 3, 'EUR'),
          ])
        ).body.accepted,
      ).toBe(3);
      const res = await check({ context: { resourceId }, limits: [{ scope: 'resource', window: '24h', maxCost: 5 }] });
      expect(res.status).toBe(200);
      expect({ decision: res.body.decision, violations: res.body.violations }).toEqual({
        decision: 'allow',
        violations: [],
      });
      expect(res.body.usage[`resource:${resourceId}@24h`].costByUnit).toEqual({ USD: 1, JPY: 1000, EUR: 3 });
      expect(res.body.warnings).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ limitType: 'cost', unit: 'JPY', reason: expect.any(String) }),
          expect.objectContaining({ limitType: 'cost', unit: 'EUR', reason: expect.any(String) }),
        ]),
      );
    });

    it("converts usage at the project's exchange rates once they are set, and a JPY limit counts JPY", async () => {
      const { check, ingest, configure } = await project();
      const resourceId = uid('r');
      await ingest([reported(resourceId, 1, 'USD'), reported(resourceId, 1000, 'JPY'), reported(resourceId, 3, 'EUR')]);
      const limits = [{ scope: 'resource', window: '24h', maxCost: 5 }];
      expect((await check({ context: { resourceId }, limits })).body.decision).toBe('allow');

      expectPatched(await configure({ exchangeRates: { JPY: 0.0067, EUR: 1.1 } }));
      const converted = await check({ context: { resourceId }, limits });
      expect(converted.body.decision).toBe('deny');
      expect(converted.body.violations).toEqual([
        expect.objectContaining({ limitType: 'cost', unit: 'USD', usage: expect.closeTo(1 + 6.7 + 3.3, 6), limit: 5 }),
      ]);

      const yen = uid('r');
      await ingest([reported(yen, 1000, 'JPY')]);
      const inYen = await check({
        context: { resourceId: yen },
        limits: [{ scope: 'resource', window: '24h', maxCost: 500, costUnit: 'JPY' }],
      });
      expect(inYen.body.decision).toBe('deny');
      expect(inYen.body.violations).toEqual([
        expect.objectContaining({ limitType: 'cost', unit: 'JPY', usage: 1000, limit: 500 }),
      ]);
    });
  });

  describe('unpriced estimates', () => {
    const race = (check: (b: Record<string, unknown>) => Promise<Reply>, resourceId: string, maxCost: number) =>
      Promise.all(
        Array.from({ length: 50 }, () => {
          const traceId = uid('trace');
          return check({
            context: { resourceId, traceId },
            limits: [{ scope: 'resource', window: '24h', maxCost }],
            estimate: UNKNOWN,
            reserve: true,
            stepId: randomUUID(),
          });
        }),
      );

    it('denies by default a cost-limited step whose model has no price, instead of reserving $0 for it', async () => {
      const { check, reservations } = await project();
      const answers = await race(check, uid('r'), 0.01);
      expect(answers.filter((a) => a.body.decision === 'allow')).toHaveLength(0);
      for (const a of answers.filter((x) => !isBusy(x)))
        expect(a.body.estimate).toMatchObject({ cost: null, priced: false });
      expect(await reservations()).toHaveLength(0);
    });

    it("prices it at the project's fallback rate when the project says so: exactly the steps that fit", async () => {
      const { check, configure, reservations } = await project();
      expectPatched(
        await configure({
          unpricedPolicy: 'fallback',
          unpricedFallback: { inputPerMillion: 1, outputPerMillion: 4, currency: 'USD' },
        }),
      );
      // An unknown provider's tokenizer is unknown: its input is held with the largest seeded margin (1.35).
      const fallbackView = {
        cost: 0.00535,
        costUnit: 'USD',
        priced: false,
        fallback: 'project',
        inputTokens: 1350,
        inputTokensMargin: 1.35,
      }; // 1350 × $1/M + 1000 × $4/M

      const answers = await race(check, uid('r'), 0.0161); // 3 × $0.00535 = $0.01605 fits; a 4th would reach $0.0214
      expect(answers.filter((a) => a.body.decision === 'allow')).toHaveLength(3);
      for (const a of answers.filter((x) => !isBusy(x))) expect(a.body.estimate).toMatchObject(fallbackView);
      const rows = await reservations();
      expect(rows.map((r) => Number(r.cost_micros))).toEqual([5350, 5350, 5350]);

      const dry = await check({
        context: { resourceId: uid('r') },
        limits: [{ scope: 'resource', window: '24h', maxCost: 1 }],
        estimate: UNKNOWN,
        dryRun: true,
      });
      expect(dry.body.estimate).toMatchObject(fallbackView);
    });

    it('answers how the estimate was priced on every check that has one, dry runs included', async () => {
      const { check } = await project();
      const resourceId = uid('r');
      const limits = [{ scope: 'resource', window: '24h', maxCost: 1 }];
      const view = { cost: 0.0045, costUnit: 'USD', priced: true, priceId: expect.any(String) };
      const plain = await check({ context: { resourceId }, limits, estimate: GPT4O });
      const dry = await check({ context: { resourceId }, limits, estimate: GPT4O, dryRun: true });
      const reserving = await check({
        context: { resourceId },
        limits,
        estimate: GPT4O,
        reserve: true,
        stepId: randomUUID(),
      });
      expect([plain.body.estimate, dry.body.estimate, reserving.body.estimate]).toEqual([
        expect.objectContaining(view),
        expect.objectContaining(view),
        expect.objectContaining(view),
      ]);
    });
  });

  describe('actual usage above the reservation', () => {
    it('is reported in the ingest result, logged as ReservationExceeded and counted in /metrics', async () => {
      const { check, ingest, logOf } = await project();
      const resourceId = uid('r');
      const traceId = uid('trace');
      const g = await check({
        context: { resourceId, traceId },
        limits: [{ scope: 'resource', window: '24h', maxCost: 1 }],
        estimate: GPT4O,
        reserve: true,
        stepId: randomUUID(),
      });
      const reservation = g.body.reservation;
      expect(reservation).toMatchObject({ id: expect.any(String), inputTokens: expect.any(Number) });

      const res = await ingest([
        step({ resourceId, traceId, reservationId: reservation.id, usage: { inputTokens: 3000, outputTokens: 200 } }),
      ]);
      expect(res.body.results[0]).toMatchObject({
        status: 'accepted',
        reservationExceeded: {
          reservationId: reservation.id,
          reserved: {
            cost: reservation.estimatedCost,
            inputTokens: reservation.inputTokens,
            outputTokens: reservation.outputTokens,
          },
          actual: { cost: 0.0095, inputTokens: 3000, outputTokens: 200 }, // 3000 × $2.50/M + 200 × $10/M
        },
      });
      expect(await logOf('ReservationExceeded', reservation.id)).toHaveLength(1);
      const metrics = (await call(svc.url, 'GET', '/metrics')).body as string;
      const exceeded = [
        ...metrics.matchAll(/^tollgate_reservations_exceeded_total(?:\{[^}]*\})? (\d+(?:\.\d+)?)$/gm),
      ].reduce((sum, m) => sum + Number(m[1]), 0);
      expect(exceeded).toBeGreaterThanOrEqual(1);
    });

    describe('a Claude model whose tokenizer counts 1.3× the estimate', () => {
      const CLAUDE = { provider: 'anthropic', model: 'claude-sonnet-4-5' };
      const ESTIMATE = { ...CLAUDE, inputTokens: 10_000, maxOutputTokens: 500 };
      const ACTUAL = { inputTokens: 13_000, outputTokens: 500 };

      it('holds the estimate times the margin learned for the provider', async () => {
        const { check } = await project();
        const g = await check({
          context: { resourceId: uid('r') },
          limits: [{ scope: 'resource', window: '24h', maxCost: 100 }],
          estimate: ESTIMATE,
          reserve: true,
          stepId: randomUUID(),
        });
        expect(g.body.decision).toBe('allow');
        expect(g.body.estimate).toMatchObject({ inputTokensMargin: expect.any(Number) });
        const margin = g.body.estimate.inputTokensMargin;
        expect(margin).toBeGreaterThanOrEqual(1.3);
        expect(g.body.estimate.inputTokens).toBe(Math.ceil(10_000 * margin));
        expect(g.body.reservation.inputTokens).toBe(Math.ceil(10_000 * margin));
      });

      it('16 agents racing one budget never commit more than it', async () => {
        const { check, ingest, recordedCostMicros } = await project();
        const actual = priceStep({ ...CLAUDE, usage: ACTUAL }, new Date(), []);
        if (!actual.priced) throw new Error(`the catalog has no price for ${CLAUDE.provider}/${CLAUDE.model}`);
        const budgetMicros = 20 * Number(actual.costMicros);
        const resourceId = uid('r');
        const limits = [{ scope: 'resource', window: '24h', maxCost: budgetMicros / 1e6 }];
        let steps = 0;
        const agent = async (n: number) => {
          const traceId = uid(`agent-${n}`);
          for (let i = 0; i < 100; i++) {
            const stepId = randomUUID();
            const g = await check({
              context: { resourceId, traceId },
              limits,
              estimate: ESTIMATE,
              reserve: true,
              stepId,
            });
            expect(g.status).toBe(200);
            if (g.body.decision !== 'allow') return;
            steps += 1;
            // The model call: agents take different times, so some re-check while others' steps
            // are still in flight (in lockstep every step would settle before the next check).
            await new Promise((r) => setTimeout(r, n * 20));
            const res = await ingest([
              step({
                eventId: stepId,
                resourceId,
                traceId,
                ...CLAUDE,
                usage: ACTUAL,
                reservationId: g.body.reservation.id,
              }),
            ]);
            expect(res.body.accepted).toBe(1);
          }
          throw new Error(`agent ${n} was never denied`);
        };
        await Promise.all(Array.from({ length: 16 }, (_, n) => agent(n)));
        const cost = await recordedCostMicros();
        expect(steps).toBeGreaterThan(0);
        expect(cost).toBeLessThanOrEqual(budgetMicros);
      });
    });
  });

  describe('settlement and the audit log', () => {
    it("rejects a step event that names another scope's reservation, and leaves the reservation open", async () => {
      const { p, check, ingest, reservations } = await project();
      const r1 = uid('r1');
      const traceId = uid('trace');
      const g = await check({
        context: { resourceId: r1, traceId },
        limits: [{ scope: 'resource', window: '24h', maxCost: 1 }],
        estimate: GPT4O,
        reserve: true,
        stepId: randomUUID(),
      });
      const id = g.body.reservation.id;
      const foreign = step({ resourceId: uid('r2'), traceId, reservationId: id });
      const res = await ingest([foreign]);
      expect(res.body.results[0]).toMatchObject({ status: 'rejected', field: 'events[0].reservationId' });
      expect((await reservations()).map((r) => [r.id, r.status])).toEqual([[id, 'open']]);
      expect(
        await svc.prisma.$queryRawUnsafe<any[]>(
          'SELECT event_id FROM events WHERE project_id = $1 AND event_id = $2',
          p.id,
          foreign.eventId,
        ),
      ).toEqual([]);
    });

    it("rejects a client event id in the service's tg: namespace", async () => {
      const { ingest } = await project();
      const res = await ingest([step({ eventId: `tg:${randomUUID()}`, resourceId: uid('r') })]);
      expect(res.body.results[0]).toMatchObject({ status: 'rejected', field: 'events[0].eventId' });
    });

    it("a client event named like the service's release event does not suppress the real release", async () => {
      const { check, ingest, release, logOf } = await project();
      const resourceId = uid('r');
      const traceId = uid('trace');
      const g = await check({
        context: { resourceId, traceId },
        limits: [{ scope: 'resource', window: '24h', maxCost: 1 }],
        estimate: GPT4O,
        reserve: true,
        stepId: randomUUID(),
      });
      const id = g.body.reservation.id;
      await ingest([step({ eventId: `reservation:${id}:released`, resourceId: uid('r'), traceId: uid('trace') })]);
      expect((await release(id)).body).toMatchObject({ id, status: 'released' });
      expect(await logOf('ReservationReleased', id)).toHaveLength(1);
    });

    it('a reservation holds budget only on the scopes whose limits were checked', async () => {
      const { check } = await project();
      const userId = uid('u');
      const a = await check({
        context: { resourceId: uid('r'), userId },
        limits: [{ scope: 'resource', window: '24h', maxCost: 1 }],
        estimate: GPT4O,
        reserve: true,
        stepId: randomUUID(),
      });
      expect(a.body.decision).toBe('allow');
      const b = await check({
        context: { userId, resourceId: uid('r2') },
        limits: [{ scope: 'user', window: '24h', maxCost: 0.0046 }],
        estimate: GPT4O,
        reserve: true,
        stepId: randomUUID(),
      });
      expect({ decision: b.body.decision, violations: b.body.violations }).toEqual({
        decision: 'allow',
        violations: [],
      });
    });
  });
});
