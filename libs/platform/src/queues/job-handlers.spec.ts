import { JobHandlers } from './job-handlers';

describe('JobHandlers', () => {
  const noop = async () => undefined;

  it('refuses to start when a job has no handler', () => {
    expect(() => new JobHandlers().assertComplete(['maintenance'])).toThrow('no handler for job maintenance/partitions.ensure');
  });

  it('refuses two handlers for one job, and handlers for unknown jobs', () => {
    const h = new JobHandlers();
    h.register('maintenance', 'partitions.ensure', noop);
    h.register('maintenance', 'partitions.ensure', noop);
    h.register('maintenance', 'vacuum', noop);
    expect(() => h.assertComplete(['maintenance'])).toThrow(/two handlers for job maintenance\/partitions.ensure.*handler for unknown job maintenance\/vacuum/);
  });

  it('accepts exactly one handler per job', () => {
    const h = new JobHandlers();
    h.register('maintenance', 'partitions.ensure', noop);
    h.register('maintenance', 'retention.apply', noop);
    expect(() => h.assertComplete(['maintenance'])).not.toThrow();
  });
});
