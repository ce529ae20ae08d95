import type { Queue } from 'bullmq';
import { addJob } from './add-job';

describe('addJob', () => {
  const queue = (name: string) => {
    const added: unknown[][] = [];
    return { added, queue: { name, add: async (...args: unknown[]) => added.push(args) } as unknown as Queue };
  };

  it('enqueues the payload as the schema parsed it (defaults applied, unknown fields dropped)', async () => {
    const { added, queue: q } = queue('exports');
    await addJob(
      q,
      'exports',
      'export.deliver',
      { batchId: 'b1', exporterId: 'x1', maxBackoffMs: 500, extra: 1 } as never,
      { jobId: 'j' },
    );
    expect(added).toEqual([
      ['export.deliver', { batchId: 'b1', exporterId: 'x1', maxBackoffMs: 500, priorAttempts: 0 }, { jobId: 'j' }],
    ]);
  });

  it('throws at the producer, naming the field, when the payload does not fit; nothing is enqueued', async () => {
    const { added, queue: q } = queue('exports');
    await expect(addJob(q, 'exports', 'export.drain', { exporterId: '' })).rejects.toThrow(/exporterId/);
    expect(added).toEqual([]);
  });

  it('refuses a queue that is not the one named', async () => {
    const { queue: q } = queue('guard');
    await expect(addJob(q, 'exports', 'export.drain', { exporterId: 'x1' })).rejects.toThrow(
      'addJob: the queue given is guard, not exports',
    );
  });
});
