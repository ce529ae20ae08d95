import type { GuardFinding } from '@tollgate/contracts';
import { EventPartitions, PrismaService } from '@tollgate/database';
import { randomUUID } from 'node:crypto';
import { TEST_DATABASE_URL } from '../../../../../test/support/env';
import { appendSystemEvents } from '../../system-events/append-system-events.sql';
import type { EventScopes, GuardDecided, SystemEvent } from '../../events';
import { readGuardDecisions } from './guard-decisions.sql';

describe('readGuardDecisions (real PostgreSQL)', () => {
  const prisma = new PrismaService(TEST_DATABASE_URL, 2);
  beforeAll(() => new EventPartitions(prisma).ensureAhead(new Date(), 1));
  afterAll(() => prisma.onModuleDestroy());

  const t0 = Date.now() - 60_000;
  const at = (s: number) => new Date(t0 + s * 1000);
  const finding: GuardFinding = {
    scope: 'user',
    scopeKey: 'user:u1',
    window: '24h',
    limitType: 'cost',
    usage: 12,
    limit: 10,
    unit: 'USD',
    threshold: 'hard',
    source: 'policy:daily',
  };
  const decided = (
    id: string,
    s: number,
    decision: 'allow' | 'deny',
    scopes: EventScopes,
    violations: GuardFinding[] = [],
    warnings: GuardFinding[] = [],
  ): GuardDecided => ({
    eventId: `tg:guard:${id}`,
    type: 'GuardDecided',
    occurredAt: at(s),
    scopes,
    data: { decision, violations, warnings, stepId: `step-${id}` },
  });

  it('returns the decisions of the project, newest first, with the context the step had', async () => {
    const project = `p-${randomUUID()}`;
    const warning = { ...finding, threshold: 'soft' as const, usage: 8, reason: 'soft limit' };
    await appendSystemEvents(prisma.sql, project, [
      decided('a', 1, 'deny', { traceId: 't1', userId: 'u1', entityType: 'agent', entityName: 'planner' }, [finding]),
      decided(
        'b',
        2,
        'allow',
        { threadId: 'th1', resourceId: 'r1', organizationId: 'o1', sessionId: 's1' },
        [],
        [warning],
      ),
      {
        eventId: 'tg:alert:x',
        type: 'BudgetExhausted',
        occurredAt: at(3),
        scopes: { userId: 'u1' },
        data: { ...finding, window: '24h', stepId: null, sequence: 1 },
      } satisfies SystemEvent,
    ]);
    await appendSystemEvents(prisma.sql, `p-${randomUUID()}`, [decided('other', 4, 'deny', { userId: 'u1' })]);
    expect(await readGuardDecisions(prisma.sql, project, undefined, 10)).toEqual([
      {
        eventId: 'tg:guard:b',
        occurredAt: at(2).toISOString(),
        decision: 'allow',
        violations: [],
        warnings: [warning],
        context: { threadId: 'th1', resourceId: 'r1', organizationId: 'o1', sessionId: 's1' },
      },
      {
        eventId: 'tg:guard:a',
        occurredAt: at(1).toISOString(),
        decision: 'deny',
        violations: [finding],
        warnings: [],
        context: { traceId: 't1', userId: 'u1', entityName: 'planner' },
      },
    ]);
  });

  it('filters by one scope id (the run by its trace id) and keeps only the newest `limit`', async () => {
    const project = `p-${randomUUID()}`;
    await appendSystemEvents(prisma.sql, project, [
      decided('a', 1, 'deny', { traceId: 't1', userId: 'u1' }),
      decided('b', 2, 'deny', { traceId: 't2', userId: 'u1' }),
      decided('c', 3, 'deny', { traceId: 't1', userId: 'u2' }),
      decided('d', 4, 'deny', { runId: 't1' }),
    ]);
    const ids = async (scope: Parameters<typeof readGuardDecisions>[2], limit = 10) =>
      (await readGuardDecisions(prisma.sql, project, scope, limit)).map((d) => d.eventId);
    expect(await ids({ scope: 'run', id: 't1' })).toEqual(['tg:guard:c', 'tg:guard:a']);
    expect(await ids({ scope: 'user', id: 'u1' })).toEqual(['tg:guard:b', 'tg:guard:a']);
    expect(await ids({ scope: 'user', id: 'u1' }, 1)).toEqual(['tg:guard:b']);
    expect(await ids({ scope: 'session', id: 'u1' })).toEqual([]);
    expect(await ids(undefined, 3)).toEqual(['tg:guard:d', 'tg:guard:c', 'tg:guard:b']);
  });

  it('orders decisions of the same time by their position in the log', async () => {
    const project = `p-${randomUUID()}`;
    await appendSystemEvents(prisma.sql, project, [decided('first', 5, 'deny', {})]);
    await appendSystemEvents(prisma.sql, project, [decided('second', 5, 'deny', {})]);
    expect(await readGuardDecisions(prisma.sql, project, undefined, 10)).toEqual([
      expect.objectContaining({ eventId: 'tg:guard:second', context: {} }),
      expect.objectContaining({ eventId: 'tg:guard:first', context: {} }),
    ]);
  });
});
