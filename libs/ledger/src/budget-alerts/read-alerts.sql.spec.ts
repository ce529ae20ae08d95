import { EventPartitions, PrismaService } from '@tollgate/database';
import { randomUUID } from 'node:crypto';
import { TEST_DATABASE_URL } from '../../../../test/support/env';
import { appendSystemEvents } from '../system-events/append-system-events.sql';
import type { BudgetExhausted, BudgetThresholdCrossed, SystemEvent } from '../events';
import { readAlerts } from './read-alerts.sql';

describe('readAlerts (real PostgreSQL)', () => {
  const prisma = new PrismaService(TEST_DATABASE_URL, 2);
  beforeAll(() => new EventPartitions(prisma).ensureAhead(new Date(), 1));
  afterAll(() => prisma.onModuleDestroy());

  const t0 = Date.now() - 60_000;
  const at = (s: number) => new Date(t0 + s * 1000);
  const crossed = (id: string, s: number, scopeKey: string, threshold: number): BudgetThresholdCrossed => ({
    eventId: `tg:alert:${id}`,
    type: 'BudgetThresholdCrossed',
    occurredAt: at(s),
    data: {
      scope: scopeKey.split(':')[0],
      scopeKey,
      window: '24h',
      source: 'policy:daily',
      limitType: 'cost',
      usage: 8.5,
      limit: 10,
      unit: 'USD',
      threshold,
      hysteresis: 5,
      stepEventId: `step-${id}`,
      sequence: 1,
    },
  });
  const exhausted = (id: string, s: number, scopeKey: string): BudgetExhausted => ({
    eventId: `tg:alert:${id}`,
    type: 'BudgetExhausted',
    occurredAt: at(s),
    data: {
      scope: scopeKey.split(':')[0],
      scopeKey,
      window: null,
      source: 'request',
      limitType: 'output_tokens',
      usage: 1200,
      limit: 1000,
      unit: 'tokens',
      stepId: `check-${id}`,
      sequence: 1,
    },
  });
  const other = (id: string, s: number): SystemEvent => ({
    eventId: `tg:other:${id}`,
    type: 'GuardDecided',
    occurredAt: at(s),
    data: { decision: 'deny', violations: [], warnings: [], stepId: null },
  });

  it('returns the alerts of the project, newest first, as the API shows them', async () => {
    const project = `p-${randomUUID()}`;
    await appendSystemEvents(prisma.sql, project, [
      crossed('a', 1, 'user:u1', 80),
      exhausted('b', 2, 'run:t1'),
      other('c', 3),
    ]);
    await appendSystemEvents(prisma.sql, `p-${randomUUID()}`, [crossed('x', 4, 'user:u1', 90)]);
    expect(await readAlerts(prisma.sql, project, undefined, 10)).toEqual([
      {
        eventId: 'tg:alert:b',
        kind: 'BudgetExhausted',
        occurredAt: at(2).toISOString(),
        scope: 'run',
        scopeKey: 'run:t1',
        window: null,
        source: 'request',
        limitType: 'output_tokens',
        threshold: 100,
        usage: 1200,
        limit: 1000,
        unit: 'tokens',
        stepId: 'check-b',
      },
      {
        eventId: 'tg:alert:a',
        kind: 'BudgetThresholdCrossed',
        occurredAt: at(1).toISOString(),
        scope: 'user',
        scopeKey: 'user:u1',
        window: '24h',
        source: 'policy:daily',
        limitType: 'cost',
        threshold: 80,
        usage: 8.5,
        limit: 10,
        unit: 'USD',
        stepEventId: 'step-a',
      },
    ]);
  });

  it('filters by scope key and keeps only the newest `limit`', async () => {
    const project = `p-${randomUUID()}`;
    await appendSystemEvents(prisma.sql, project, [
      crossed('a', 1, 'user:u1', 50),
      crossed('b', 2, 'user:u2', 50),
      crossed('c', 3, 'user:u1', 80),
      exhausted('d', 4, 'user:u1'),
    ]);
    const ids = async (scopeKey: string | undefined, limit: number) =>
      (await readAlerts(prisma.sql, project, scopeKey, limit)).map((a) => a.eventId);
    expect(await ids('user:u1', 10)).toEqual(['tg:alert:d', 'tg:alert:c', 'tg:alert:a']);
    expect(await ids('user:u1', 2)).toEqual(['tg:alert:d', 'tg:alert:c']);
    expect(await ids('user:u2', 10)).toEqual(['tg:alert:b']);
    expect(await ids('user:none', 10)).toEqual([]);
  });

  it('orders alerts of the same time by their position in the log', async () => {
    const project = `p-${randomUUID()}`;
    await appendSystemEvents(prisma.sql, project, [crossed('first', 5, 'user:u1', 50)]);
    await appendSystemEvents(prisma.sql, project, [crossed('second', 5, 'user:u1', 80)]);
    expect((await readAlerts(prisma.sql, project, undefined, 10)).map((a) => a.eventId)).toEqual([
      'tg:alert:second',
      'tg:alert:first',
    ]);
  });

  it('reads a stored crossing without stepEventId as null', async () => {
    const project = `p-${randomUUID()}`;
    const e = crossed('a', 1, 'user:u1', 80);
    const { stepEventId: _, ...data } = e.data;
    await appendSystemEvents(prisma.sql, project, [{ ...e, data: data as BudgetThresholdCrossed['data'] }]);
    expect(await readAlerts(prisma.sql, project, undefined, 10)).toEqual([
      expect.objectContaining({ eventId: 'tg:alert:a', stepEventId: null }),
    ]);
  });
});
