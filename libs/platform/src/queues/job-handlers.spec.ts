import { UnrecoverableError } from 'bullmq';
import { JobHandlers, type RoutedJob } from './job-handlers';
import { jobNamesOf, type JobName } from './queues';

describe('JobHandlers', () => {
  const noop = async () => undefined;
  const job = (name: string, data: unknown, over: Partial<RoutedJob> = {}): RoutedJob => ({
    name,
    data,
    id: 'j1',
    attemptsMade: 0,
    opts: { attempts: 3 },
    ...over,
  });

  it('refuses to start when a job has no handler', () => {
    expect(() => new JobHandlers().assertComplete(['maintenance'])).toThrow(
      'no handler for job maintenance/partitions.ensure',
    );
  });

  it('refuses two handlers for one job, and handlers for unknown jobs', () => {
    const h = new JobHandlers();
    h.register('maintenance', 'partitions.ensure', noop);
    h.register('maintenance', 'partitions.ensure', noop);
    h.register('maintenance', 'vacuum' as JobName<'maintenance'>, noop);
    expect(() => h.assertComplete(['maintenance'])).toThrow(
      /two handlers for job maintenance\/partitions.ensure.*handler for unknown job maintenance\/vacuum/,
    );
  });

  it('accepts exactly one handler per job', () => {
    const h = new JobHandlers();
    for (const name of jobNamesOf('maintenance')) h.register('maintenance', name as JobName<'maintenance'>, noop);
    expect(() => h.assertComplete(['maintenance'])).not.toThrow();
  });

  it('routes a job to its handler with the payload as its schema parsed it, and the attempt', async () => {
    const h = new JobHandlers();
    const seen: unknown[] = [];
    h.register('exports', 'export.deliver', async (data, attempt) => {
      // Typed end to end: `priorAttempts` is a number here (its schema's default), never undefined.
      const next: number = data.priorAttempts + 1;
      seen.push(data, attempt, next);
      return 'delivered';
    });
    const answer = await h.route(
      'exports',
      job(
        'export.deliver',
        { batchId: 'b1', exporterId: 'x1', maxBackoffMs: 1000, unknownField: true },
        { attemptsMade: 2 },
      ),
    );
    expect(answer).toBe('delivered');
    expect(seen).toEqual([
      { batchId: 'b1', exporterId: 'x1', maxBackoffMs: 1000, priorAttempts: 0 },
      { attemptsMade: 2, attempts: 3, jobId: 'j1' },
      1,
    ]);
  });

  it('fails a payload that does not parse with UnrecoverableError naming the field; the handler never runs', async () => {
    const h = new JobHandlers();
    const handler = jest.fn(noop);
    h.register('exports', 'export.drain', handler);
    const routed = h.route('exports', job('export.drain', { exporterId: 42 }));
    await expect(routed).rejects.toBeInstanceOf(UnrecoverableError);
    await expect(routed).rejects.toThrow(
      /^Job exports\/export\.drain has a payload that does not parse: .*expected string.*→ at exporterId/,
    );
    await expect(h.route('exports', job('export.drain', null))).rejects.toBeInstanceOf(UnrecoverableError);
    expect(handler).not.toHaveBeenCalled();
  });

  it('fails a job no schema names, or one without a handler, with UnrecoverableError', async () => {
    const h = new JobHandlers();
    await expect(h.route('guard', job('reservations.sweep', {}))).rejects.toThrow(
      new UnrecoverableError('Queue guard has no job named reservations.sweep'),
    );
    h.register('guard', 'reservations.sweep', noop);
    await expect(h.route('guard', job('reservations.vacuum', {}))).rejects.toThrow(
      new UnrecoverableError('Queue guard has no job named reservations.vacuum'),
    );
    await expect(h.route('guard', job('reservations.sweep', {}))).resolves.toBeUndefined();
  });

  it('a handler that throws fails the attempt as usual (retried by BullMQ)', async () => {
    const h = new JobHandlers();
    h.register('projections', 'rollups.catch-up', async () => {
      throw new Error('database away');
    });
    const routed = h.route('projections', job('rollups.catch-up', {}));
    await expect(routed).rejects.toThrow('database away');
    await expect(routed).rejects.not.toBeInstanceOf(UnrecoverableError);
  });
});
