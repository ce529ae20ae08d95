import { PrismaService } from '@tollgate/database';
import { randomUUID } from 'node:crypto';
import { TEST_DATABASE_URL } from '../../../../test/support/env';
import { DIMENSION_TABLE_COLUMNS } from '../dimensions';
import { DecimalSum } from './decimal-sum';
import type { RollupCell } from './rollup-batch';
import {
  deleteEmptyRollups,
  lockCheckpoint,
  resolveDimensionIds,
  saveCheckpoint,
  upsertProjectRollups,
  upsertScopeRollups,
} from './rollup-store.sql';

// resetRollups is not covered here: it truncates the rollups of every project (a replay), which
// would pull the ground from under the other specs sharing the test database.
describe('rollup store statements (real PostgreSQL)', () => {
  const prisma = new PrismaService(TEST_DATABASE_URL, 3);
  afterAll(() => prisma.onModuleDestroy());

  const HOUR = 3_600_000;
  const bucket = Math.floor(Date.now() / HOUR) * HOUR - 2 * HOUR;
  const dims = (over: Record<string, string>) => DIMENSION_TABLE_COLUMNS.map((c) => over[c] ?? null);
  const cell = (projectId: string, over: Partial<RollupCell> & { values?: number[] } = {}): RollupCell => {
    const sum = new DecimalSum();
    for (const v of over.values ?? [10]) sum.add(v);
    const values = over.values ?? [10];
    return {
      projectId,
      cube: 'h',
      name: 1,
      bucketStart: bucket,
      dimsKey: 'k',
      dimsValues: dims({ provider: 'openai', model: 'gpt-4o', cost_unit: 'USD' }),
      count: values.length,
      sum,
      min: Math.min(...values),
      max: Math.max(...values),
      costMicros: 4500n,
      costCount: values.length,
      ...over,
    };
  };
  const projectRows = (projectId: string) =>
    prisma.$queryRawUnsafe<Record<string, unknown>[]>(
      `SELECT granularity, name, bucket_start, cost_unit, count::int, sum::text, min, max, cost_micros::text, cost_count::int FROM metric_rollups WHERE project_id = $1 ORDER BY granularity, name`,
      projectId,
    );
  const scopeRows = (projectId: string) =>
    prisma.$queryRawUnsafe<Record<string, unknown>[]>(
      `SELECT name, bucket_start, count::int, sum::text, min, max, cost_micros::text, cost_count::int FROM metric_scope_rollups WHERE project_id = $1 ORDER BY name`,
      projectId,
    );

  it('resolves dimension tuples to ids: new ones inserted, known ones found, per project', async () => {
    const [p1, p2] = [`p-${randomUUID()}`, `p-${randomUUID()}`];
    const a = { projectId: p1, key: 'a', values: dims({ provider: 'openai', model: 'gpt-4o' }) };
    const first = await resolveDimensionIds(prisma, [
      a,
      { projectId: p1, key: 'b', values: dims({ provider: 'anthropic' }) },
    ]);
    expect(first.size).toBe(2);
    const again = await resolveDimensionIds(prisma, [a, { projectId: p2, key: 'a', values: a.values }]);
    expect(again.get(`${p1}\u001ea`)).toBe(first.get(`${p1}\u001ea`));
    expect(again.get(`${p2}\u001ea`)).not.toBe(first.get(`${p1}\u001ea`));
    const [stored] = await prisma.$queryRawUnsafe<{ provider: string; model: string; user_id: string | null }[]>(
      'SELECT provider, model, user_id FROM metric_dimensions WHERE id = $1',
      first.get(`${p1}\u001ea`),
    );
    expect(stored).toEqual({ provider: 'openai', model: 'gpt-4o', user_id: null });
    expect(await resolveDimensionIds(prisma, [])).toEqual(new Map());
  });

  it('adds project cells into what is stored: counts, exact sums and costs add up, min and max widen', async () => {
    const project = `p-${randomUUID()}`;
    const dimsId = (
      await resolveDimensionIds(prisma, [{ projectId: project, key: 'k', values: dims({ cost_unit: 'USD' }) }])
    ).get(`${project}\u001ek`)!;
    await upsertProjectRollups(prisma, [
      { cell: cell(project, { values: [0.1, 0.2] }), dimsId },
      { cell: cell(project, { cube: 'hu', values: [5] }), dimsId },
    ]);
    await upsertProjectRollups(prisma, [{ cell: cell(project, { values: [0.05, 3] }), dimsId }]);
    expect(await projectRows(project)).toEqual([
      {
        granularity: 'h',
        name: 1,
        bucket_start: new Date(bucket),
        cost_unit: 'USD',
        count: 4,
        sum: '3.35',
        min: 0.05,
        max: 3,
        cost_micros: '9000',
        cost_count: 4,
      },
      {
        granularity: 'hu',
        name: 1,
        bucket_start: new Date(bucket),
        cost_unit: 'USD',
        count: 1,
        sum: '5',
        min: 5,
        max: 5,
        cost_micros: '4500',
        cost_count: 1,
      },
    ]);
  });

  it('adds scope cells into the hourly scoped cube', async () => {
    const project = `p-${randomUUID()}`;
    const dimsId = (
      await resolveDimensionIds(prisma, [{ projectId: project, key: 's', values: dims({ user_id: 'u1' }) }])
    ).get(`${project}\u001es`)!;
    await upsertScopeRollups(prisma, [{ cell: cell(project, { cube: 'scope', values: [7] }), dimsId }]);
    await upsertScopeRollups(prisma, [{ cell: cell(project, { cube: 'scope', values: [1, 2] }), dimsId }]);
    expect(await scopeRows(project)).toEqual([
      {
        name: 1,
        bucket_start: new Date(bucket),
        count: 3,
        sum: '10',
        min: 1,
        max: 7,
        cost_micros: '9000',
        cost_count: 3,
      },
    ]);
  });

  it('keeps a tuple and hour in one row whatever its metrics, each read back as its own cell', async () => {
    const project = `p-${randomUUID()}`;
    const dimsId = (
      await resolveDimensionIds(prisma, [{ projectId: project, key: 's', values: dims({ thread_id: 't1' }) }])
    ).get(`${project}\u001es`)!;
    const noCost = { costMicros: 0n, costCount: 0 };
    await upsertScopeRollups(prisma, [
      { cell: cell(project, { cube: 'scope', name: 1, values: [100] }), dimsId },
      { cell: cell(project, { cube: 'scope', name: 9, values: [30], ...noCost }), dimsId },
    ]);
    await upsertScopeRollups(prisma, [
      { cell: cell(project, { cube: 'scope', name: 9, values: [20], ...noCost }), dimsId },
      { cell: cell(project, { cube: 'scope', name: 12, values: [0.25], ...noCost }), dimsId },
    ]);
    expect(await scopeRows(project)).toEqual([
      {
        name: 1,
        bucket_start: new Date(bucket),
        count: 1,
        sum: '100',
        min: 100,
        max: 100,
        cost_micros: '4500',
        cost_count: 1,
      },
      {
        name: 9,
        bucket_start: new Date(bucket),
        count: 2,
        sum: '50',
        min: 20,
        max: 30,
        cost_micros: '0',
        cost_count: 0,
      },
      {
        name: 12,
        bucket_start: new Date(bucket),
        count: 1,
        sum: '0.25',
        min: 0.25,
        max: 0.25,
        cost_micros: '0',
        cost_count: 0,
      },
    ]);
    const [{ n }] = await prisma.$queryRawUnsafe<{ n: number }[]>(
      'SELECT count(*)::int AS n FROM metric_scope_hours WHERE project_id = $1',
      project,
    );
    expect(n).toBe(1);
  });

  it('starts a scoped metric a correction emptied anew: its old extremes are gone, the other metrics stay', async () => {
    const project = `p-${randomUUID()}`;
    const dimsId = (
      await resolveDimensionIds(prisma, [{ projectId: project, key: 's', values: dims({ user_id: 'u2' }) }])
    ).get(`${project}\u001es`)!;
    await upsertScopeRollups(prisma, [
      { cell: cell(project, { cube: 'scope', name: 1, values: [10] }), dimsId },
      { cell: cell(project, { cube: 'scope', name: 2, values: [40] }), dimsId },
    ]);
    const retracted = {
      ...cell(project, { cube: 'scope', name: 1, values: [-10] }),
      count: -1,
      costMicros: -4500n,
      costCount: -1,
      retracted: true,
    };
    await upsertScopeRollups(prisma, [{ cell: retracted, dimsId }]);
    await deleteEmptyRollups(prisma, [{ cell: retracted, dimsId }]);
    expect((await scopeRows(project)).map((r) => r.name)).toEqual([2]);
    await upsertScopeRollups(prisma, [{ cell: cell(project, { cube: 'scope', name: 1, values: [3] }), dimsId }]);
    expect((await scopeRows(project)).map((r) => [r.name, r.count, r.min, r.max])).toEqual([
      [1, 1, 3, 3],
      [2, 1, 40, 40],
    ]);
  });

  it('deletes the retracted cells a correction emptied, and only those', async () => {
    const project = `p-${randomUUID()}`;
    const dimsId = (
      await resolveDimensionIds(prisma, [{ projectId: project, key: 'k', values: dims({ cost_unit: 'USD' }) }])
    ).get(`${project}\u001ek`)!;
    await upsertProjectRollups(prisma, [
      { cell: cell(project, { name: 1 }), dimsId },
      { cell: cell(project, { name: 2 }), dimsId },
    ]);
    await upsertScopeRollups(prisma, [{ cell: cell(project, { cube: 'scope' }), dimsId }]);
    // A correction takes the one record of metric 1 (project and scope cubes) out; metric 2 keeps its record.
    const retract = (over: Partial<RollupCell>): RollupCell => {
      const c = cell(project, { ...over, values: [-10] });
      return { ...c, count: -1, costMicros: -4500n, costCount: -1, retracted: true };
    };
    const correction = [
      { cell: retract({ name: 1 }), dimsId },
      { cell: retract({ cube: 'scope', name: 1 }), dimsId },
    ];
    await upsertProjectRollups(prisma, correction.slice(0, 1));
    await upsertScopeRollups(prisma, correction.slice(1));
    await deleteEmptyRollups(prisma, [...correction, { cell: cell(project, { name: 2 }), dimsId }]);
    expect((await projectRows(project)).map((r) => [r.name, r.count])).toEqual([[2, 1]]);
    expect(await scopeRows(project)).toEqual([]);
  });

  it('locks a checkpoint for the transaction: a second reader skipping locked rows gets none; saving moves it on', async () => {
    const name = `spec-${randomUUID()}`;
    await prisma.$executeRawUnsafe('INSERT INTO projection_checkpoints (name) VALUES ($1)', name);
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => (locked = r));
    const holder = prisma.$transaction(async (tx) => {
      expect(await lockCheckpoint(tx, name, true)).toEqual({ tx: '0', position: 0n });
      locked();
      await held;
      await saveCheckpoint(tx, name, { tx: '1234', position: 42n }, 7);
    });
    await isLocked;
    expect(await prisma.$transaction((tx) => lockCheckpoint(tx, name, true))).toBeNull();
    release();
    await holder;
    expect(await prisma.$transaction((tx) => lockCheckpoint(tx, name, false))).toEqual({ tx: '1234', position: 42n });
    const [row] = await prisma.$queryRawUnsafe<{ events_projected: string }[]>(
      'SELECT events_projected::text FROM projection_checkpoints WHERE name = $1',
      name,
    );
    expect(row.events_projected).toBe('7');
    expect(await prisma.$transaction((tx) => lockCheckpoint(tx, `spec-${randomUUID()}`, true))).toBeNull();
  });
});
