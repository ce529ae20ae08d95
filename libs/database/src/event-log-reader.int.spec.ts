import { randomUUID } from 'node:crypto';
import { TEST_DATABASE_URL } from '../../../test/support/env';
import { checkpointAfter, LOG_START, readEventsAfter } from './event-log-reader';
import { PrismaService } from './prisma.service';

describe('readEventsAfter', () => {
  const prisma = new PrismaService(TEST_DATABASE_URL, 2);
  afterAll(() => prisma.onModuleDestroy());

  it('orders by transaction id as a number, so a checkpoint never skips an event (tx 9 before tx 10)', async () => {
    const project = `reader-${randomUUID()}`;
    await prisma.$queryRawUnsafe(`SELECT ensure_event_partition(now())`);
    for (const tx of ['10', '9']) {
      await prisma.$executeRawUnsafe(
        `INSERT INTO events (tx, project_id, event_id, type, occurred_at) VALUES ($1::xid8, $2, $3, 'StepUsageRecorded', now())`,
        tx,
        project,
        `e-${tx}`,
      );
    }
    const first = await readEventsAfter(prisma, LOG_START, 1, project);
    const second = await readEventsAfter(prisma, checkpointAfter(LOG_START, first), 1, project);
    expect([...first, ...second].map((e) => e.tx)).toEqual(['9', '10']);
  });
});
