import { PrismaService, readEventsAfter, type Checkpoint } from '@tollgate/database';
import { randomBytes } from 'node:crypto';
import { TEST_DATABASE_URL } from '../../../../test/support/env';
import { claimBatch, completeBatch, deadLetterBatch, listBatches, rewindCheckpoint } from './export-state.sql';

/** The exporter state transitions against the real PostgreSQL and migrations. */
describe('exporter state SQL', () => {
  const prisma = new PrismaService(TEST_DATABASE_URL, 4);
  afterAll(() => prisma.onModuleDestroy());

  const id = (p: string) => `${p}_${randomBytes(6).toString('hex')}`;
  async function exporterWithEvents(n: number) {
    const projectId = id('prj');
    await prisma.project.create({ data: { id: projectId, name: 'sql spec' } });
    await prisma.$queryRawUnsafe('SELECT ensure_event_partition(now())');
    for (let i = 0; i < n; i++) {
      await prisma.$executeRawUnsafe(
        `INSERT INTO events (project_id, event_id, type, occurred_at) VALUES ($1, $2, 'StepUsageRecorded', now())`,
        projectId,
        `e${i}`,
      );
    }
    const exporterId = id('exp');
    await prisma.exporter.create({ data: { id: exporterId, projectId, name: 'x', type: 'webhook', settings: {} } });
    // The commit-safe reader sees the rows once every older transaction of the cluster has ended.
    let rows = await readEventsAfter(prisma, { tx: '0', position: 0n }, 100, projectId);
    for (let waited = 0; rows.length < n && waited < 20_000; waited += 50) {
      await new Promise((r) => setTimeout(r, 50));
      rows = await readEventsAfter(prisma, { tx: '0', position: 0n }, 100, projectId);
    }
    expect(rows).toHaveLength(n);
    const at = (i: number): Checkpoint => ({ tx: rows[i].tx, position: rows[i].position });
    return { projectId, exporterId, rows, at };
  }
  const checkpointOf = async (exporterId: string) => {
    const e = await prisma.exporter.findUniqueOrThrow({ where: { id: exporterId } });
    return {
      tx: e.checkpointTx,
      position: e.checkpointPosition,
      inFlight: e.inFlightBatch,
      status: e.status,
      reason: e.pausedReason,
    };
  };
  const batch = (exporterId: string, from: Checkpoint, to: Checkpoint, logRows: number) => ({
    id: id('xb'),
    exporterId,
    from,
    to,
    logRows,
    eventCount: logRows,
    jobId: 'j',
  });

  it('lets one batch per exporter be in flight, and moves the checkpoint only when it is acknowledged', async () => {
    const { exporterId, at } = await exporterWithEvents(4);
    const start = { tx: '0', position: 0n };
    const first = batch(exporterId, start, at(1), 2);
    expect(await claimBatch(prisma, first)).toBe(true);
    expect(await claimBatch(prisma, batch(exporterId, start, at(1), 2))).toBe(false);
    expect(await checkpointOf(exporterId)).toMatchObject({ tx: '0', position: 0n, inFlight: first.id });

    expect(await completeBatch(prisma, first.id)).toEqual({ done: true, advanced: true });
    expect(await checkpointOf(exporterId)).toMatchObject({ tx: at(1).tx, position: at(1).position, inFlight: null });
    // A stale claim from the old checkpoint is refused; a repeated completion does nothing.
    expect(await claimBatch(prisma, batch(exporterId, start, at(3), 4))).toBe(false);
    expect(await completeBatch(prisma, first.id)).toEqual({ done: false, advanced: false });
  });

  it('keeps a replayed checkpoint when the batch in flight completes, and never replays forward', async () => {
    const { projectId, exporterId, at, rows } = await exporterWithEvents(4);
    const b = batch(exporterId, { tx: '0', position: 0n }, at(3), 4);
    await claimBatch(prisma, b);
    await prisma.exporter.update({
      where: { id: exporterId },
      data: { checkpointTx: at(1).tx, checkpointPosition: at(1).position },
    });
    // Replaying from the third event moves back to just before it; from beyond the log, nothing moves.
    expect(await rewindCheckpoint(prisma, exporterId, projectId, { position: rows[2].position + 100n })).toBeNull();
    const rewound = await rewindCheckpoint(prisma, exporterId, projectId, { position: rows[1].position });
    expect(rewound).toEqual({ tx: rows[1].tx, position: rows[1].position - 1n });
    expect(await completeBatch(prisma, b.id)).toEqual({ done: true, advanced: false });
    expect(await checkpointOf(exporterId)).toMatchObject({
      tx: rows[1].tx,
      position: rows[1].position - 1n,
      inFlight: null,
    });
  });

  it('dead-letters a batch past the checkpoint, and pauses after N in a row with the reason', async () => {
    const { exporterId, at } = await exporterWithEvents(3);
    const one = batch(exporterId, { tx: '0', position: 0n }, at(0), 1);
    await claimBatch(prisma, one);
    expect(await deadLetterBatch(prisma, one.id, 'POST answered 401', 2)).toEqual({ dead: true, paused: false });
    const two = batch(exporterId, at(0), at(1), 1);
    expect(await claimBatch(prisma, two)).toBe(true);
    expect(await deadLetterBatch(prisma, two.id, 'POST answered 401', 2)).toEqual({ dead: true, paused: true });
    expect(await checkpointOf(exporterId)).toMatchObject({
      tx: at(1).tx,
      position: at(1).position,
      status: 'paused',
      reason: '2 batches in a row failed and were dead-lettered; last error: POST answered 401',
    });
    expect((await listBatches(prisma, exporterId, ['dead'])).map((d) => [d.id, d.lastError])).toEqual([
      [one.id, 'POST answered 401'],
      [two.id, 'POST answered 401'],
    ]);
    // Paused: no new batch is claimed.
    expect(await claimBatch(prisma, batch(exporterId, at(1), at(2), 1))).toBe(false);
  });
});
