import { EventPartitions, PrismaService } from '@tollgate/database';
import { randomUUID } from 'node:crypto';
import { TEST_DATABASE_URL } from '../../../../test/support/env';
import { systemEventId, type SystemEvent } from '../events';
import { appendSystemEvents } from './append-system-events.sql';

describe('appendSystemEvents (real PostgreSQL)', () => {
  const prisma = new PrismaService(TEST_DATABASE_URL, 2);
  beforeAll(() => new EventPartitions(prisma).ensureAhead(new Date(), 1));
  afterAll(() => prisma.onModuleDestroy());
  const at = new Date(Math.floor(Date.now() / 1000) * 1000 - 60_000);

  const released = (reservationId: string): SystemEvent => ({
    type: 'ReservationReleased',
    eventId: systemEventId('reservation', reservationId, 'released'),
    occurredAt: at,
    reservationId,
    scopes: { traceId: 't1', resourceId: 'r1', userId: 'u1', entityType: 'agent', entityName: 'planner' },
    data: { reason: 'released', costMicros: 4500, inputTokens: 1000, outputTokens: 200 },
  });
  const decided: SystemEvent = {
    type: 'GuardDecided',
    eventId: systemEventId('guard', 'step-1', 'decided'),
    occurredAt: at,
    data: { decision: 'deny', violations: [], warnings: [], stepId: 'step-1' },
  };
  const rows = (project: string) =>
    prisma.sql.query<Record<string, unknown>>(
      `SELECT event_id, type, occurred_at, trace_id, run_id, resource_id, user_id, thread_id, entity_type, entity_name, reservation_id, data
         FROM events WHERE project_id = $1 ORDER BY position`,
      project,
    );

  it('appends each event as a row of the log: its type, time, scope ids and data; returns the ids written', async () => {
    const project = `p-${randomUUID()}`;
    const written = await appendSystemEvents(prisma.sql, project, [released('rsv_1'), decided]);
    expect(written).toEqual(new Set([released('rsv_1').eventId, decided.eventId]));
    expect(await rows(project)).toEqual([
      {
        event_id: released('rsv_1').eventId,
        type: 'ReservationReleased',
        occurred_at: at,
        trace_id: 't1',
        run_id: null,
        resource_id: 'r1',
        user_id: 'u1',
        thread_id: null,
        entity_type: 'agent',
        entity_name: 'planner',
        reservation_id: 'rsv_1',
        data: { reason: 'released', costMicros: 4500, inputTokens: 1000, outputTokens: 200 },
      },
      {
        event_id: decided.eventId,
        type: 'GuardDecided',
        occurred_at: at,
        trace_id: null,
        run_id: null,
        resource_id: null,
        user_id: null,
        thread_id: null,
        entity_type: null,
        entity_name: null,
        reservation_id: null,
        data: { decision: 'deny', violations: [], warnings: [], stepId: 'step-1' },
      },
    ]);
  });

  it('skips an event id already in the log: appending twice writes one event', async () => {
    const project = `p-${randomUUID()}`;
    await appendSystemEvents(prisma.sql, project, [released('rsv_2')]);
    expect(await appendSystemEvents(prisma.sql, project, [released('rsv_2'), released('rsv_3')])).toEqual(
      new Set([released('rsv_3').eventId]),
    );
    expect((await rows(project)).map((r) => r.reservation_id)).toEqual(['rsv_2', 'rsv_3']);
    // The same id in another project is another event.
    expect(await appendSystemEvents(prisma.sql, `p-${randomUUID()}`, [released('rsv_2')])).toEqual(
      new Set([released('rsv_2').eventId]),
    );
  });

  it('writes nothing for no events', async () => {
    expect(await appendSystemEvents(prisma.sql, `p-${randomUUID()}`, [])).toEqual(new Set());
  });
});
