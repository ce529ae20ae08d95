import { EventPartitions, PrismaService } from '@tollgate/database';
import { randomUUID } from 'node:crypto';
import { TEST_DATABASE_URL } from '../../../../test/support/env';
import { appendSystemEvents } from '../system-events/append-system-events.sql';
import type { ReservationExceeded } from '../events';
import { readExceededReservations } from './exceeded.sql';

describe('readExceededReservations (real PostgreSQL)', () => {
  const prisma = new PrismaService(TEST_DATABASE_URL, 2);
  beforeAll(() => new EventPartitions(prisma).ensureAhead(new Date(), 1));
  afterAll(() => prisma.onModuleDestroy());

  const t0 = Date.now() - 60_000;
  const at = (s: number) => new Date(t0 + s * 1000);
  const exceeded = (
    id: string,
    s: number,
    scopeKeys: string[],
    actualCostMicros: number | null = 7_250_000,
  ): ReservationExceeded => ({
    eventId: `tg:reservation:${id}:exceeded`,
    type: 'ReservationExceeded',
    occurredAt: at(s),
    reservationId: `rsv_${id}`,
    data: {
      stepEventId: `step-${id}`,
      scopeKeys,
      reserved: { costMicros: 4_500_000, costUnit: 'USD', inputTokens: 1000, outputTokens: 200 },
      actual: {
        costMicros: actualCostMicros,
        costUnit: actualCostMicros === null ? null : 'USD',
        inputTokens: 1500,
        outputTokens: 640,
      },
    },
  });

  it('returns the project’s exceeded settlements, newest first, costs in units', async () => {
    const project = `p-${randomUUID()}`;
    await appendSystemEvents(prisma.sql, project, [
      exceeded('a', 1, ['user:u1', 'resource:r1']),
      exceeded('b', 2, ['thread:th1'], null),
    ]);
    await appendSystemEvents(prisma.sql, `p-${randomUUID()}`, [exceeded('x', 3, ['user:u1'])]);
    expect(await readExceededReservations(prisma.sql, project, undefined, 10)).toEqual([
      {
        reservationId: 'rsv_b',
        stepEventId: 'step-b',
        occurredAt: at(2).toISOString(),
        scopeKeys: ['thread:th1'],
        reserved: { cost: 4.5, costUnit: 'USD', inputTokens: 1000, outputTokens: 200 },
        actual: { cost: null, costUnit: null, inputTokens: 1500, outputTokens: 640 },
      },
      {
        reservationId: 'rsv_a',
        stepEventId: 'step-a',
        occurredAt: at(1).toISOString(),
        scopeKeys: ['user:u1', 'resource:r1'],
        reserved: { cost: 4.5, costUnit: 'USD', inputTokens: 1000, outputTokens: 200 },
        actual: { cost: 7.25, costUnit: 'USD', inputTokens: 1500, outputTokens: 640 },
      },
    ]);
  });

  it('filters by a scope key among the reservation’s and keeps only the newest `limit`', async () => {
    const project = `p-${randomUUID()}`;
    await appendSystemEvents(prisma.sql, project, [
      exceeded('a', 1, ['user:u1', 'resource:r1']),
      exceeded('b', 2, ['user:u2']),
      exceeded('c', 3, ['resource:r1', 'user:u1']),
    ]);
    const ids = async (scopeKey: string | undefined, limit = 10) =>
      (await readExceededReservations(prisma.sql, project, scopeKey, limit)).map((r) => r.reservationId);
    expect(await ids('user:u1')).toEqual(['rsv_c', 'rsv_a']);
    expect(await ids('resource:r1', 1)).toEqual(['rsv_c']);
    expect(await ids('user:u2')).toEqual(['rsv_b']);
    expect(await ids('user:u')).toEqual([]);
    expect(await ids(undefined, 2)).toEqual(['rsv_c', 'rsv_b']);
  });

  it('reads a reservation that held no cost as 0', async () => {
    const project = `p-${randomUUID()}`;
    const e = exceeded('a', 1, ['user:u1']);
    e.data.reserved = { costMicros: null, costUnit: null, inputTokens: 1000, outputTokens: 200 };
    await appendSystemEvents(prisma.sql, project, [e]);
    expect((await readExceededReservations(prisma.sql, project, undefined, 10))[0].reserved).toEqual({
      cost: 0,
      costUnit: null,
      inputTokens: 1000,
      outputTokens: 200,
    });
  });
});
