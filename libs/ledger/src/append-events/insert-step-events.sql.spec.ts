import type { StepUsageEvent } from '@tollgate/contracts';
import { EventPartitions, PrismaService } from '@tollgate/database';
import { randomUUID } from 'node:crypto';
import { TEST_DATABASE_URL } from '../../../../test/support/env';
import { writeGuardOutcome } from '../check-guard/guard-batch.sql';
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
        {
          id,
          stepId: `step-${id}`,
          scopeKeys: ['resource:r1'],
          contextKeys: ['resource:r1', 'run:t1'],
          costMicros: 4500,
          costUnit: 'USD',
          inputTokens,
          outputTokens: 200,
          rawInputTokens,
          provider: 'anthropic',
          model: 'claude-x',
          createdAt: new Date(),
          expiresAt: new Date(Date.now() + 60_000),
        },
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
  const insert = (project: string, e: StepUsageEvent) => insertStepEvents(prisma.sql, project, [{ event: e, occurredAt: new Date(e.occurredAt), cost: priceStep(e, new Date(), []) }]);
  const holds = (project: string) => prisma.sql.query('SELECT scope_key, reservation_id, cost_micros::text FROM reservation_holds WHERE project_id = $1', project);
  const types = async (project: string) =>
    (await prisma.sql.query<{ type: string; event_id: string }>('SELECT type, event_id FROM events WHERE project_id = $1 ORDER BY position', project)).map((r) => [r.type, r.event_id]);

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
    expect((await types(project)).map(([t]) => t).sort()).toEqual(['ReservationExceeded', 'ReservationSettled', 'StepUsageRecorded']);
    const [listed] = await readExceededReservations(prisma.sql, project, 'resource:r1', 10);
    expect(listed).toMatchObject({ reservationId: 'rsv_b', stepEventId: e.eventId, reserved: { inputTokens: 1000 }, actual: { inputTokens: 3000, cost: 0.0095 } });
    expect(await readExceededReservations(prisma.sql, project, 'resource:other', 10)).toEqual([]);
  });

  it('adds actual ÷ estimated input tokens to the model’s histogram (bin b holds (0.5 + 0.05 (b − 1), 0.5 + 0.05 b])', async () => {
    const project = `p-${randomUUID()}`;
    // Held 1350 for an estimate of 1000; actual 1300 → ratio 1.30 → bin 16. Actual 1000 → 1.00 → bin 10.
    await reserve(project, 'rsv_c', 1350, 1000);
    await reserve(project, 'rsv_d', 1350, 1000);
    await insert(project, step('rsv_c', 1300));
    await insert(project, step('rsv_d', 1000));
    const bins = await prisma.sql.query<{ provider: string; model: string; bin: number; n: string }>('SELECT provider, model, bin, n::text FROM estimate_ratio_bins WHERE project_id = $1 ORDER BY bin', project);
    expect(bins).toEqual([
      { provider: 'anthropic', model: 'claude-x', bin: 10, n: '1' },
      { provider: 'anthropic', model: 'claude-x', bin: 16, n: '1' },
    ]);
  });
});
