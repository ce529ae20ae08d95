import { randomUUID } from 'node:crypto';
import { call, createProject, stepEvent, type TestProject } from '../support/http';
import { startService, type RunningService } from '../support/service';
import { GuardTuning } from '@tollgate/ledger';

/**
 * A reserving check is decided on the usage this replica's last commit on its budgets left (a
 * budget it never committed on: none) and written in one round trip, only if the usage read under
 * the locks is within it. These
 * specs hold it to the guard's promise: every step committed before the check was sent counts,
 * whoever wrote it, and the budget is spent exactly.
 *
 * Each step: gpt-4o, 1000 input + 200 output tokens held; the budget, 5,000 tokens an hour, fits 4
 * (a limit is reached when usage plus the step is at or above it).
 */
const ESTIMATE = { provider: 'openai', model: 'gpt-4o', inputTokens: 1000, maxOutputTokens: 200 };
const LIMITS = [{ scope: 'resource', window: '1h', maxTotalTokens: 5000 }];

describe('reserving checks in one round trip', () => {
  let a: RunningService;
  let b: RunningService;
  let twoTrips: RunningService;
  let project: TestProject;
  beforeAll(async () => {
    a = await startService();
    b = await startService();
    // The variant the bench compares against: every check read, then written, in two trips.
    twoTrips = await startService();
    twoTrips.app.get(GuardTuning).oneTrip = false;
    project = await createProject(a.url);
  });
  afterAll(async () => {
    await a.close();
    await b.close();
    await twoTrips.close();
  });

  const check = (svc: RunningService, resourceId: string) =>
    call(svc.url, 'POST', '/v1/guard/check', {
      token: project.key,
      body: { context: { resourceId }, limits: LIMITS, estimate: ESTIMATE, reserve: true, stepId: randomUUID() },
    });
  const settle = (resourceId: string, reservationId: string) =>
    call(a.url, 'POST', '/v1/events', {
      token: project.key,
      body: { events: [stepEvent({ resourceId, reservationId })] },
    });
  /** The guard's commits by path, as /metrics counts them (both services share this process's registry). */
  async function commits(): Promise<Record<string, number>> {
    const text = (await call(a.url, 'GET', '/metrics')).body as string;
    return Object.fromEntries(
      [...text.matchAll(/^tollgate_guard_commits_total\{path="(\w+)"\} (\d+)$/gm)].map((m) => [m[1], Number(m[2])]),
    );
  }
  const delta = (before: Record<string, number>, after: Record<string, number>) =>
    Object.fromEntries(['one_trip', 'missed', 'two_trips'].map((k) => [k, (after[k] ?? 0) - (before[k] ?? 0)]));

  it("an agent's settled steps: every allow in one trip, from the first, exactly the 4 that fit, each seeing every step before it", async () => {
    const resourceId = `r-${randomUUID()}`;
    const before = await commits();
    const answers = [];
    for (let i = 0; i < 5; i++) {
      const res = await check(a, resourceId);
      answers.push(res.body);
      if (res.body.reservation) await settle(resourceId, res.body.reservation.id);
    }
    expect(answers.map((r) => r.decision)).toEqual(['allow', 'allow', 'allow', 'allow', 'deny']);
    // Each answer shows the usage it was decided on: the settled steps before it, nothing held.
    expect(answers.map((r) => r.usage[`resource:${resourceId}@1h`].totalTokens)).toEqual([0, 1200, 2400, 3600, 4800]);
    expect(answers.map((r) => r.usage[`resource:${resourceId}@1h`].reservedInputTokens)).toEqual([0, 0, 0, 0, 0]);
    // The allows in one trip, the first too (a budget this replica never committed on is guessed
    // empty); the denial goes the long way.
    expect(delta(before, await commits())).toEqual({ one_trip: 4, missed: 0, two_trips: 1 });
  });

  it("an agent's steps settling at other counts than reserved: still one trip each, until the budget is near", async () => {
    // Real steps never use exactly what was held: here 1,100 input tokens (the provider counts more
    // than the estimate) and 80 output tokens (the answer is shorter than its maximum), 1,180 a step.
    const resourceId = `r-${randomUUID()}`;
    const limits = [{ scope: 'resource', window: '1h', maxTotalTokens: 11_000 }];
    const before = await commits();
    const answers = [];
    for (let i = 0; i < 10; i++) {
      const res = await call(a.url, 'POST', '/v1/guard/check', {
        token: project.key,
        body: { context: { resourceId }, limits, estimate: ESTIMATE, reserve: true, stepId: randomUUID() },
      });
      answers.push(res.body);
      if (!res.body.reservation) break;
      await call(a.url, 'POST', '/v1/events', {
        token: project.key,
        body: {
          events: [
            stepEvent({
              resourceId,
              reservationId: res.body.reservation.id,
              usage: { inputTokens: 1100, outputTokens: 80 },
            }),
          ],
        },
      });
    }
    // 9 steps fit (8 × 1,180 + 1,200 = 10,640 < 11,000); the 10th would reach the limit.
    expect(answers.map((r) => r.decision)).toEqual([...Array(9).fill('allow'), 'deny']);
    // Each answer shows what was recorded before it, exactly.
    expect(answers.map((r) => r.usage[`resource:${resourceId}@1h`].totalTokens)).toEqual(
      Array.from({ length: 10 }, (_, i) => 1180 * i),
    );
    // Those close enough to the limit that the settled steps could change their answer go the long
    // way, as does the denial; every other one in one trip, the first too.
    const d = delta(before, await commits());
    expect(d.one_trip).toBeGreaterThanOrEqual(7);
    expect(d.one_trip + d.two_trips).toBe(10);
    expect(d.missed).toBeLessThanOrEqual(1);
  });

  it('counts a step recorded without a reservation between two checks: the usage it knew is only a guess', async () => {
    const resourceId = `r-${randomUUID()}`;
    const first = await check(a, resourceId);
    await settle(resourceId, first.body.reservation.id);
    // Another agent, unguarded, spends 3,000 tokens of the same budget.
    await call(a.url, 'POST', '/v1/events', {
      token: project.key,
      body: { events: [stepEvent({ resourceId, usage: { inputTokens: 2500, outputTokens: 500 } })] },
    });
    const before = await commits();
    const second = await check(a, resourceId);
    expect(second.body).toMatchObject({ decision: 'deny', violations: [expect.objectContaining({ usage: 5400 })] });
    expect(second.body.reservation).toBeUndefined();
    expect(delta(before, await commits())).toEqual({ one_trip: 0, missed: 1, two_trips: 1 });
  });

  it('a budget this replica never committed on but that holds usage: guessed empty, counted as read, known after', async () => {
    const resourceId = `r-${randomUUID()}`;
    // Two steps recorded without a check (before this replica started, say): 2,400 of 5,000 tokens.
    await call(a.url, 'POST', '/v1/events', {
      token: project.key,
      body: { events: [stepEvent({ resourceId }), stepEvent({ resourceId })] },
    });
    const before = await commits();
    const first = await check(a, resourceId);
    const second = await check(a, resourceId);
    const third = await check(a, resourceId);
    expect([first, second, third].map((r) => r.body.decision)).toEqual(['allow', 'allow', 'deny']);
    expect([first, second, third].map((r) => r.body.usage[`resource:${resourceId}@1h`])).toEqual([
      expect.objectContaining({ totalTokens: 2400, reservedInputTokens: 0 }),
      expect.objectContaining({ totalTokens: 2400, reservedInputTokens: 1000 }),
      expect.objectContaining({ totalTokens: 2400, reservedInputTokens: 2000 }),
    ]);
    // The first: its empty guess missed (one trip for nothing), decided on the usage read. The
    // second on what that commit left, in one trip; the denial the long way.
    expect(delta(before, await commits())).toEqual({ one_trip: 1, missed: 1, two_trips: 2 });
  });

  it("counts another replica's reservations made between two checks: the budget is spent exactly across replicas", async () => {
    const resourceId = `r-${randomUUID()}`;
    const decisions: string[] = [];
    const ask = async (svc: RunningService) => decisions.push((await check(svc, resourceId)).body.decision);
    await ask(a); // 1,200 held by a
    await ask(b); // 2,400, held by b
    await ask(b); // 3,600 (b's own, in one trip)
    await ask(b); // 4,800
    await ask(a); // a knew 1,200, which would fit; it reads 4,800, which does not
    await ask(b);
    expect(decisions).toEqual(['allow', 'allow', 'allow', 'allow', 'deny', 'deny']);
    const [held] = await a.prisma.$queryRawUnsafe<{ n: number }[]>(
      `SELECT count(*)::int AS n FROM reservations WHERE project_id = $1 AND $2 = ANY(scope_keys)`,
      project.id,
      `resource:${resourceId}`,
    );
    expect(held.n).toBe(4);
  });

  it('with oneTrip off: the same answers, every check read then written in two trips', async () => {
    const resourceId = `r-${randomUUID()}`;
    const before = await commits();
    const decisions: string[] = [];
    for (let i = 0; i < 5; i++) decisions.push((await check(twoTrips, resourceId)).body.decision);
    expect(decisions).toEqual(['allow', 'allow', 'allow', 'allow', 'deny']);
    expect(delta(before, await commits())).toEqual({ one_trip: 0, missed: 0, two_trips: 5 });
  });

  it('a batch of checks on many budgets: each sees every step committed before it, whoever wrote it', async () => {
    const resources = Array.from({ length: 8 }, () => `r-${randomUUID()}`);
    // Known to this replica: one check each, settled.
    for (const r of resources) await settle(r, (await check(a, r)).body.reservation.id);
    // An unguarded agent spends 3,000 tokens of the first budget: its next step no longer fits.
    await call(a.url, 'POST', '/v1/events', {
      token: project.key,
      body: { events: [stepEvent({ resourceId: resources[0], usage: { inputTokens: 2500, outputTokens: 500 } })] },
    });
    const rounds: string[][] = [];
    for (let round = 0; round < 2; round++) {
      const answers = await Promise.all(resources.map((r) => check(a, r)));
      rounds.push(answers.map((res) => res.body.decision));
      // Each saw the settled step and its own earlier reservations of this test, nothing else.
      answers.slice(1).forEach((res, i) =>
        expect(res.body.usage[`resource:${resources[i + 1]}@1h`]).toMatchObject({
          totalTokens: 1200,
          reservedInputTokens: 1000 * round,
        }),
      );
    }
    const fits = ['allow', 'allow', 'allow', 'allow', 'allow', 'allow', 'allow'];
    expect(rounds).toEqual([
      ['deny', ...fits],
      ['deny', ...fits],
    ]);
    // The budgets that still fit, at once: however they are batched, every batch in one trip.
    const before = await commits();
    const last = await Promise.all(resources.slice(1).map((r) => check(a, r)));
    expect(last.map((res) => res.body.decision)).toEqual(fits);
    const d = delta(before, await commits());
    expect({ ...d, one_trip: d.one_trip > 0 }).toEqual({ one_trip: true, missed: 0, two_trips: 0 });
    // And the next step of each would pass its budget: 1,200 settled + 3 × 1,200 held + 1,200.
    expect((await check(a, resources[1])).body.decision).toBe('deny');
  });

  it("two replicas taking turns on one budget: exact; each other's steps fit in the room above a guess, unless far larger", async () => {
    const resourceId = `r-${randomUUID()}`;
    // a's steps hold 1,200 tokens, b's 50,200: b's room above its guess (steps of its own size) holds
    // a step of a, a's room does not hold a step of b.
    const small = ESTIMATE;
    const large = { ...ESTIMATE, inputTokens: 50_000 };
    const ask = (svc: RunningService, estimate: typeof ESTIMATE) =>
      call(svc.url, 'POST', '/v1/guard/check', {
        token: project.key,
        body: {
          context: { resourceId },
          limits: [{ scope: 'resource', window: '1h', maxTotalTokens: 10_000_000 }],
          estimate,
          reserve: true,
          stepId: randomUUID(),
        },
      });
    const before = await commits();
    const held: number[] = [];
    for (let i = 0; i < 16; i++) {
      const res = await (i % 2 ? ask(b, large) : ask(a, small));
      held.push(res.body.usage[`resource:${resourceId}@1h`].reservedInputTokens);
    }
    // Each saw every reservation before it, whichever replica made it.
    expect(held).toEqual(Array.from({ length: 16 }, (_, i) => Math.ceil(i / 2) * 1000 + Math.floor(i / 2) * 50_000));
    const d = delta(before, await commits());
    // b: its 8 checks in one trip (its first guessed empty, with room for a's first step). a: its
    // first in one trip, then every guess stale by more than its room — 7 misses if each were
    // tried; after each miss in a row, it is tried less often.
    expect(d.one_trip).toBe(9);
    expect(d.two_trips).toBe(7);
    expect(d.missed).toBeLessThanOrEqual(3);
  });
});
