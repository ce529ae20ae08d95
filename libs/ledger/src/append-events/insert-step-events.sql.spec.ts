import type { StepUsageEvent } from '@tollgate/contracts';
import { EventPartitions, PrismaService } from '@tollgate/database';
import { randomUUID } from 'node:crypto';
import { TEST_DATABASE_URL } from '../../../../test/support/env';
import { writeGuardOutcome } from '../check-guard/sql/guard-batch.sql';
import { newReservation } from '../budgets/new-reservation.fixture';
import { priceStep } from '../pricing/price-step';
import { readExceededReservations } from '../reservations/exceeded.sql';
import { closeReservations } from '../reservations/release-reservation.sql';
import { insertStepEvents } from './insert-step-events.sql';

describe('insertStepEvents settling reservations (real PostgreSQL)', () => {
  const prisma = new PrismaService(TEST_DATABASE_URL, 2);
  beforeAll(() => new EventPartitions(prisma).ensureAhead(new Date(), 1));
  afterAll(() => prisma.onModuleDestroy());

  const reserve = async (project: string, id: string, inputTokens: number, rawInputTokens = inputTokens) => {
    await writeGuardOutcome(
      prisma.sql,
      project,
      [
        newReservation(id, {
          inputTokens,
          rawInputTokens,
          provider: 'anthropic',
          model: 'claude-x',
        }),
      ],
      [],
    );
  };
  const step = (reservationId: string, inputTokens: number): StepUsageEvent => ({
    eventId: `e-${randomUUID()}`,
    occurredAt: new Date().toISOString(),
    traceId: 't1',
    resourceId: 'r1',
    entityType: 'agent',
    provider: 'openai',
    model: 'gpt-4o',
    usage: { inputTokens, outputTokens: 200 },
    reservationId,
  });
  const insert = (project: string, e: StepUsageEvent) =>
    insertStepEvents(prisma.sql, project, [
      { event: e, occurredAt: new Date(e.occurredAt), cost: priceStep(e, new Date(), []) },
    ]);
  const holds = (project: string) =>
    prisma.sql.query(
      'SELECT scope_key, reservation_id, cost_micros::text FROM reservation_holds WHERE project_id = $1',
      project,
    );
  const types = async (project: string) =>
    (
      await prisma.sql.query<{ type: string; event_id: string }>(
        'SELECT type, event_id FROM events WHERE project_id = $1 ORDER BY position',
        project,
      )
    ).map((r) => [r.type, r.event_id]);

  it('settles within the reservation: ReservationSettled under tg:, nothing exceeded', async () => {
    const project = `p-${randomUUID()}`;
    await reserve(project, 'rsv_a', 1000);
    const e = step('rsv_a', 1000);
    const stored = await insert(project, e);
    expect(stored.get(e.eventId)).toEqual({ position: expect.any(String), exceeded: undefined });
    expect(await types(project)).toEqual([
      ['StepUsageRecorded', e.eventId],
      ['ReservationSettled', 'tg:reservation:rsv_a:settled'],
    ]);
    // What it held is gone in the same statement (the guard reads holds, not reservations).
    expect(await holds(project)).toEqual([]);
  });

  it('holds an open reservation per scope until released, then holds nothing', async () => {
    const project = `p-${randomUUID()}`;
    await reserve(project, 'rsv_h', 1000);
    expect(await holds(project)).toEqual([{ scope_key: 'resource:r1', reservation_id: 'rsv_h', cost_micros: '4500' }]);
    await closeReservations(prisma.sql, { projectId: project, id: 'rsv_h' }, 'released');
    expect(await holds(project)).toEqual([]);
  });

  it('settles past the reservation: ReservationExceeded in the same statement, returned with the step', async () => {
    const project = `p-${randomUUID()}`;
    await reserve(project, 'rsv_b', 1000);
    const e = step('rsv_b', 3000); // gpt-4o: 3000 × $2.5/M + 200 × $10/M = $0.0095
    const stored = await insert(project, e);
    expect(stored.get(e.eventId)?.exceeded).toEqual({
      reservationId: 'rsv_b',
      reserved: { cost: 0.0045, costUnit: 'USD', inputTokens: 1000, outputTokens: 200 },
      actual: { cost: 0.0095, costUnit: 'USD', inputTokens: 3000, outputTokens: 200 },
    });
    expect((await types(project)).map(([t]) => t).sort()).toEqual([
      'ReservationExceeded',
      'ReservationSettled',
      'StepUsageRecorded',
    ]);
    const [listed] = await readExceededReservations(prisma.sql, project, 'resource:r1', 10);
    expect(listed).toMatchObject({
      reservationId: 'rsv_b',
      stepEventId: e.eventId,
      reserved: { inputTokens: 1000 },
      actual: { inputTokens: 3000, cost: 0.0095 },
    });
    expect(await readExceededReservations(prisma.sql, project, 'resource:other', 10)).toEqual([]);
  });

  it('adds actual ÷ estimated input tokens to the model’s histogram (bin b holds (0.5 + 0.05 (b − 1), 0.5 + 0.05 b])', async () => {
    const project = `p-${randomUUID()}`;
    // Held 1350 for an estimate of 1000; actual 1300 → ratio 1.30 → bin 16. Actual 1000 → 1.00 → bin 10.
    await reserve(project, 'rsv_c', 1350, 1000);
    await reserve(project, 'rsv_d', 1350, 1000);
    await insert(project, step('rsv_c', 1300));
    await insert(project, step('rsv_d', 1000));
    const bins = await prisma.sql.query<{ provider: string; model: string; bin: number; n: string }>(
      'SELECT provider, model, bin, n::text FROM estimate_ratio_bins WHERE project_id = $1 ORDER BY bin',
      project,
    );
    expect(bins).toEqual([
      { provider: 'anthropic', model: 'claude-x', bin: 10, n: '1' },
      { provider: 'anthropic', model: 'claude-x', bin: 16, n: '1' },
    ]);
  });
});

describe('insertStepEvents appending steps (real PostgreSQL)', () => {
  const prisma = new PrismaService(TEST_DATABASE_URL, 2);
  afterAll(() => prisma.onModuleDestroy());
  const at = new Date(Math.floor(Date.now() / 3_600_000) * 3_600_000 - 2 * 3_600_000 + 90_000);
  const hour = new Date(Math.floor(at.getTime() / 3_600_000) * 3_600_000);
  const day = new Date(Math.floor(at.getTime() / 86_400_000) * 86_400_000);
  beforeAll(() => new EventPartitions(prisma).ensureFor([at]));

  const step = (over: Partial<StepUsageEvent> = {}): StepUsageEvent => ({
    eventId: `e-${randomUUID()}`,
    occurredAt: at.toISOString(),
    traceId: 't1',
    runId: 'run-1',
    resourceId: 'r1',
    userId: 'u1',
    entityType: 'agent',
    provider: 'openai',
    model: 'gpt-4o', // input $2.50/M, output $10/M
    usage: { inputTokens: 1000, outputTokens: 200, cacheReadTokens: 300 },
    tags: ['beta'],
    labels: { team: 'search' },
    ...over,
  });
  const insert = (project: string, events: StepUsageEvent[]) =>
    insertStepEvents(
      prisma.sql,
      project,
      events.map((e) => ({ event: e, occurredAt: new Date(e.occurredAt), cost: priceStep(e, new Date(), []) })),
    );
  const counters = (project: string) =>
    prisma.sql.query<Record<string, unknown>>(
      `SELECT scope, scope_id, granularity, bucket_start, cost_unit, input_tokens::int, output_tokens::int, cost_micros::int, unpriced_events::int, events::int
         FROM usage_counters WHERE project_id = $1 ORDER BY scope, scope_id, granularity, cost_unit`,
      project,
    );

  it('stores the step with its usage and cost, and counts it for every scope it names (hour, day, run)', async () => {
    const project = `p-${randomUUID()}`;
    const e = step();
    const stored = await insert(project, [e]);
    expect([...stored.keys()]).toEqual([e.eventId]);
    const [row] = await prisma.sql.query<Record<string, unknown>>(
      `SELECT type, occurred_at, trace_id, run_id, resource_id, user_id, thread_id, input_tokens::int, output_tokens::int, cache_read_tokens::int,
              cost_micros::int, input_cost_micros::int, output_cost_micros::int, cost_unit, unpriced, tags, labels
         FROM events WHERE project_id = $1`,
      project,
    );
    // gpt-4o: 700 uncached × $2.50/M + 300 cache reads × $1.25/M + 200 × $10/M
    expect(row).toEqual({
      type: 'StepUsageRecorded',
      occurred_at: at,
      trace_id: 't1',
      run_id: 'run-1',
      resource_id: 'r1',
      user_id: 'u1',
      thread_id: null,
      input_tokens: 1000,
      output_tokens: 200,
      cache_read_tokens: 300,
      cost_micros: 4125,
      input_cost_micros: 2125,
      output_cost_micros: 2000,
      cost_unit: 'USD',
      unpriced: false,
      tags: ['beta'],
      labels: { team: 'search' },
    });
    const counted = {
      cost_unit: 'USD',
      input_tokens: 1000,
      output_tokens: 200,
      cost_micros: 4125,
      unpriced_events: 0,
      events: 1,
    };
    expect(await counters(project)).toEqual([
      { scope: 'resource', scope_id: 'r1', granularity: 'd', bucket_start: day, ...counted },
      { scope: 'resource', scope_id: 'r1', granularity: 'h', bucket_start: hour, ...counted },
      { scope: 'run', scope_id: 'run-1', granularity: 'r', bucket_start: new Date(0), ...counted },
      { scope: 'run', scope_id: 't1', granularity: 'r', bucket_start: new Date(0), ...counted },
      { scope: 'user', scope_id: 'u1', granularity: 'd', bucket_start: day, ...counted },
      { scope: 'user', scope_id: 'u1', granularity: 'h', bucket_start: hour, ...counted },
    ]);
  });

  it('a retried batch is acknowledged, never counted twice; new events in it are stored', async () => {
    const project = `p-${randomUUID()}`;
    const [a, b] = [step({ userId: undefined, runId: undefined }), step({ userId: undefined, runId: undefined })];
    await insert(project, [a]);
    const again = await insert(project, [a, b]);
    expect([...again.keys()]).toEqual([b.eventId]);
    const hourly = (await counters(project)).filter((c) => c.granularity === 'h');
    expect(hourly).toEqual([expect.objectContaining({ scope: 'resource', input_tokens: 2000, events: 2 })]);
  });

  it('an unpriced step is stored without cost and counted under no unit, flagged', async () => {
    const project = `p-${randomUUID()}`;
    await insert(project, [
      step({
        provider: 'acme',
        model: 'no-such-model',
        userId: undefined,
        runId: undefined,
        usage: { inputTokens: 50, outputTokens: 5 },
      }),
    ]);
    const [row] = await prisma.sql.query<Record<string, unknown>>(
      'SELECT cost_micros, cost_unit, unpriced FROM events WHERE project_id = $1',
      project,
    );
    expect(row).toEqual({ cost_micros: null, cost_unit: null, unpriced: true });
    expect((await counters(project)).filter((c) => c.granularity === 'h')).toEqual([
      {
        scope: 'resource',
        scope_id: 'r1',
        granularity: 'h',
        bucket_start: hour,
        cost_unit: '',
        input_tokens: 50,
        output_tokens: 5,
        cost_micros: 0,
        unpriced_events: 1,
        events: 1,
      },
    ]);
  });
});
