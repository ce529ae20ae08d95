import type { StepUsageEvent } from '@tollgate/contracts';
import { EventPartitions, PrismaService } from '@tollgate/database';
import { randomUUID } from 'node:crypto';
import { TEST_DATABASE_URL } from '../../../../test/support/env';
import { insertPricedSteps } from '../append-events/priced-steps.fixture';
import { writeGuardOutcome } from '../check-guard/sql/guard-batch.sql';
import { newReservation } from '../budgets/new-reservation.fixture';
import { readLatency, readRun, readSteps, type StepFilter } from './read-steps.sql';

describe('readSteps, readRun, readLatency (real PostgreSQL)', () => {
  const prisma = new PrismaService(TEST_DATABASE_URL, 2);
  beforeAll(() => new EventPartitions(prisma).ensureAhead(new Date(), 1));
  afterAll(() => prisma.onModuleDestroy());

  const MIN = 60_000;
  const base = Date.now() - 60 * MIN;
  const step = (over: Partial<StepUsageEvent> = {}): StepUsageEvent => ({
    eventId: `e-${randomUUID()}`,
    occurredAt: new Date(base).toISOString(),
    traceId: 'run-1',
    resourceId: 'acme',
    userId: 'u1',
    entityType: 'agent',
    entityName: 'support-agent',
    provider: 'openai',
    model: 'gpt-4o',
    usage: { inputTokens: 1000, outputTokens: 100 },
    ...over,
  });
  const insert = (project: string, events: StepUsageEvent[]) => insertPricedSteps(prisma.sql, project, events);
  const ids = async (project: string, filter: StepFilter, limit = 100) =>
    (await readSteps(prisma.sql, project, filter, limit)).steps.map((s) => s.eventId);

  it('pages newest first by (occurredAt, position): every step once, ties on occurredAt in log order', async () => {
    const project = `p-${randomUUID()}`;
    // 7 steps, three of them at the same instant.
    const at = [0, 1, 2, 2, 2, 3, 4].map((m) => new Date(base + m * MIN).toISOString());
    const events = at.map((occurredAt, i) => step({ eventId: `s${i}`, occurredAt }));
    for (const e of events) await insert(project, [e]);
    const seen: string[] = [];
    let cursor;
    let pages = 0;
    do {
      const page = await readSteps(prisma.sql, project, {}, 2, cursor);
      seen.push(...page.steps.map((s) => s.eventId));
      cursor = page.next ?? undefined;
      pages++;
    } while (cursor);
    expect(seen).toEqual(['s6', 's5', 's4', 's3', 's2', 's1', 's0']);
    expect(pages).toBe(4);
    // The last page has no next cursor, even when it is full.
    const exact = await readSteps(prisma.sql, project, {}, 7);
    expect(exact.steps).toHaveLength(7);
    expect(exact.next).toBeNull();
  });

  it('filters by model, agent, resource, user, environment, tag, unpriced and time (inclusive ends); only step events', async () => {
    const project = `p-${randomUUID()}`;
    const t = (m: number) => new Date(base + m * MIN).toISOString();
    await insert(project, [
      step({ eventId: 'a', occurredAt: t(0), tags: ['beta', 'eu'], environment: 'prod' }),
      step({
        eventId: 'b',
        occurredAt: t(1),
        model: 'gpt-4o-mini',
        entityName: 'billing-agent',
        environment: 'staging',
      }),
      step({ eventId: 'c', occurredAt: t(2), resourceId: 'globex', userId: 'u2', tags: ['eu'] }),
      step({ eventId: 'd', occurredAt: t(3), provider: 'acme', model: 'acme-unknown' }),
    ]);
    // A guard event of the same project is not a step.
    await writeGuardOutcome(
      prisma.sql,
      project,
      [],
      [
        {
          type: 'GuardDecided',
          eventId: `tg:decision:${randomUUID()}`,
          occurredAt: new Date(base + 5 * MIN),
          scopes: { traceId: 'run-1' },
          data: { decision: 'deny', violations: [], warnings: [], stepId: null },
        },
      ],
    );
    expect(await ids(project, {})).toEqual(['d', 'c', 'b', 'a']);
    expect(await ids(project, { model: 'gpt-4o-mini' })).toEqual(['b']);
    expect(await ids(project, { provider: 'openai', model: 'gpt-4o' })).toEqual(['c', 'a']);
    expect(await ids(project, { entityName: 'billing-agent' })).toEqual(['b']);
    expect(await ids(project, { resourceId: 'globex' })).toEqual(['c']);
    expect(await ids(project, { userId: 'u1' })).toEqual(['d', 'b', 'a']);
    expect(await ids(project, { environment: 'prod' })).toEqual(['a']);
    expect(await ids(project, { tag: 'eu' })).toEqual(['c', 'a']);
    expect(await ids(project, { tag: 'beta', resourceId: 'acme' })).toEqual(['a']);
    expect(await ids(project, { unpriced: true })).toEqual(['d']);
    expect(await ids(project, { unpriced: false })).toEqual(['c', 'b', 'a']);
    expect(await ids(project, { from: new Date(t(1)), to: new Date(t(2)) })).toEqual(['c', 'b']);
    expect(await ids(project, { traceId: 'run-2' })).toEqual([]);
    // Another project sees none of them.
    expect(await ids(`p-${randomUUID()}`, {})).toEqual([]);
  });

  it('shows tokens, latency, scope ids and the cost now: a reprice correction replaces the cost, and an unpriced step priced later is no longer unpriced', async () => {
    const project = `p-${randomUUID()}`;
    const e = step({
      eventId: 'x',
      provider: 'acme',
      model: 'acme-unknown',
      usage: { inputTokens: 5000, outputTokens: 700, cacheReadTokens: 1200, reasoningTokens: 300 },
      durationMs: 812.5,
      threadId: 'th-1',
      tags: ['t'],
    });
    await insert(project, [e]);
    const [before] = (await readSteps(prisma.sql, project, {}, 10)).steps;
    expect(before).toMatchObject({
      eventId: 'x',
      scopes: { traceId: 'run-1', resourceId: 'acme', userId: 'u1', threadId: 'th-1' },
      entityName: 'support-agent',
      provider: 'acme',
      model: 'acme-unknown',
      tags: ['t'],
      usage: {
        inputTokens: 5000,
        cacheReadTokens: 1200,
        cacheWriteTokens: 0,
        cacheWrite1hTokens: 0,
        outputTokens: 700,
        reasoningTokens: 300,
        totalTokens: 5700,
      },
      durationMs: 812.5,
      cost: null,
      costUnit: null,
      unpriced: true,
      repriced: false,
      reservation: null,
    });
    // Two corrections (as the repricer writes them, at the step's occurredAt): the latest counts.
    for (const [sequence, costMicros] of [
      [1, 40_000],
      [2, 25_000],
    ]) {
      await prisma.sql.query(
        `INSERT INTO events (project_id, event_id, type, occurred_at, data) VALUES ($1, $2, 'StepRepriced', $3, $4::jsonb)`,
        project,
        `tg:reprice:x:${sequence}`,
        new Date(e.occurredAt),
        JSON.stringify({
          stepEventId: 'x',
          stepPosition: '0',
          sequence,
          old: {},
          new: {
            costMicros,
            inputCostMicros: null,
            outputCostMicros: null,
            costUnit: 'USD',
            priceId: 'p',
            source: 'override',
          },
        }),
      );
    }
    const [after] = (await readSteps(prisma.sql, project, {}, 10)).steps;
    expect(after).toMatchObject({
      cost: 0.025,
      costUnit: 'USD',
      costSource: 'override',
      unpriced: false,
      repriced: true,
    });
    expect(await ids(project, { unpriced: true })).toEqual([]);
    expect(await ids(project, { unpriced: false })).toEqual(['x']);
  });

  it("shows a step's reservation, who settled it, and whether the step passed it; a run lists its steps and guard events oldest first", async () => {
    const project = `p-${randomUUID()}`;
    const reserve = (id: string, at: number) => ({
      reservation: newReservation(id, {
        scopeKeys: ['run:run-9'],
        contextKeys: ['run:run-9'],
        createdAt: new Date(at),
        expiresAt: new Date(at + 10 * MIN),
      }),
      event: {
        type: 'BudgetReserved' as const,
        eventId: `tg:reservation:${id}:reserved`,
        occurredAt: new Date(at),
        scopes: { traceId: 'run-9' },
        reservationId: id,
        data: {
          stepId: `step-${id}`,
          scopeKeys: ['run:run-9'],
          estimatedCost: 0.0045,
          costUnit: 'USD',
          inputTokens: 1000,
          outputTokens: 200,
          inputTokensMargin: 1,
          expiresAt: new Date(at + 10 * MIN).toISOString(),
        },
      },
    });
    const r1 = reserve('rsv_1', base);
    const r2 = reserve('rsv_2', base + 2 * MIN);
    await writeGuardOutcome(prisma.sql, project, [r1.reservation], [r1.event]);
    await insert(project, [
      step({
        eventId: 'first',
        traceId: 'run-9',
        occurredAt: new Date(base + MIN).toISOString(),
        reservationId: 'rsv_1',
        usage: { inputTokens: 900, outputTokens: 150 },
      }),
    ]);
    await writeGuardOutcome(prisma.sql, project, [r2.reservation], [r2.event]);
    await insert(project, [
      step({
        eventId: 'second',
        traceId: 'run-9',
        occurredAt: new Date(base + 3 * MIN).toISOString(),
        reservationId: 'rsv_2',
        usage: { inputTokens: 3000, outputTokens: 150 },
      }),
    ]);
    // A retry naming an already settled reservation does not settle it again.
    await insert(project, [
      step({
        eventId: 'retry',
        traceId: 'run-9',
        occurredAt: new Date(base + 4 * MIN).toISOString(),
        reservationId: 'rsv_2',
        usage: { inputTokens: 10, outputTokens: 10 },
      }),
    ]);
    await writeGuardOutcome(
      prisma.sql,
      project,
      [],
      [
        {
          type: 'GuardDecided',
          eventId: 'tg:decision:d1',
          occurredAt: new Date(base + 5 * MIN),
          scopes: { traceId: 'run-9', entityName: 'support-agent' },
          data: {
            decision: 'deny',
            violations: [
              {
                scope: 'run',
                scopeKey: 'run:run-9',
                window: null,
                limitType: 'cost',
                usage: 0.02,
                limit: 0.02,
                unit: 'USD',
                threshold: 'hard',
                source: 'request',
              },
            ],
            warnings: [],
            stepId: 'step-3',
          },
        },
      ],
    );

    const run = await readRun(prisma.sql, project, 'run-9', 100);
    expect(run.truncated).toBe(false);
    expect(
      run.steps.map((s) => [
        s.eventId,
        s.reservation?.id,
        s.reservation?.status,
        s.reservation?.settledByEventId,
        s.reservation?.exceeded,
      ]),
    ).toEqual([
      ['first', 'rsv_1', 'settled', 'first', false],
      ['second', 'rsv_2', 'settled', 'second', true],
      ['retry', 'rsv_2', 'settled', 'second', false],
    ]);
    expect(run.steps[0].reservation).toMatchObject({
      reserved: { cost: 0.0045, costUnit: 'USD', inputTokens: 1000, outputTokens: 200 },
      reservedAt: new Date(base).toISOString(),
    });
    expect(run.steps[0].reservation!.closedAt).not.toBeNull();
    expect(run.guard.map((g) => [g.kind, g.eventId, g.stepId])).toEqual([
      ['reservation', 'tg:reservation:rsv_1:reserved', 'step-rsv_1'],
      ['reservation', 'tg:reservation:rsv_2:reserved', 'step-rsv_2'],
      ['decision', 'tg:decision:d1', 'step-3'],
    ]);
    expect(run.guard[0].reservation).toEqual({
      id: 'rsv_1',
      cost: 0.0045,
      costUnit: 'USD',
      inputTokens: 1000,
      outputTokens: 200,
      scopeKeys: ['run:run-9'],
      expiresAt: new Date(base + 10 * MIN).toISOString(),
    });
    expect(run.guard[2]).toMatchObject({
      decision: 'deny',
      entityName: 'support-agent',
      violations: [{ scopeKey: 'run:run-9', limitType: 'cost' }],
    });
    // Cut at the limit, and said so.
    const cut = await readRun(prisma.sql, project, 'run-9', 2);
    expect([cut.steps.length, cut.guard.length, cut.truncated]).toEqual([2, 2, true]);
    expect(await readRun(prisma.sql, project, 'no-such-run', 100)).toEqual({ steps: [], guard: [], truncated: false });
  });

  it('gives durationMs p50/p95 per model over the whole range by the metric routes’ rule (sorted[min(floor(p·n), n−1)])', async () => {
    const project = `p-${randomUUID()}`;
    const durations = [400, 100, 300, 200, 1000, 250, 150, 350, 50, 500];
    await insert(project, [
      ...durations.map((durationMs, i) => step({ occurredAt: new Date(base + i * MIN).toISOString(), durationMs })),
      step({ model: 'gpt-4o-mini', durationMs: 80 }),
      step({ model: 'gpt-4o-mini', durationMs: 90 }),
      // No duration: not a sample.
      step({ model: 'gpt-4o-mini' }),
    ]);
    const sorted = [...durations].sort((a, b) => a - b);
    expect(await readLatency(prisma.sql, project, {}, 10)).toEqual([
      { provider: 'openai', model: 'gpt-4o', steps: 10, p50: sorted[5], p95: sorted[9], max: 1000 },
      { provider: 'openai', model: 'gpt-4o-mini', steps: 2, p50: 90, p95: 90, max: 90 },
    ]);
    expect(await readLatency(prisma.sql, project, { model: 'gpt-4o', to: new Date(base + 3 * MIN) }, 10)).toEqual([
      { provider: 'openai', model: 'gpt-4o', steps: 4, p50: 300, p95: 400, max: 400 },
    ]);
  });
});
