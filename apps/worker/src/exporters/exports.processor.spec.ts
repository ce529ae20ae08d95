import { JobHandlers, type JobName } from '@tollgate/platform';

describe('the exports queue in the job registry', () => {
  const register = (handlers: JobHandlers, jobs: JobName<'exports'>[]) => {
    for (const job of jobs) handlers.register('exports', job, async () => undefined);
  };

  it('stops the worker at boot when an exports job has no handler', () => {
    const handlers = new JobHandlers();
    register(handlers, ['exports.tick', 'export.drain']);
    expect(() => handlers.assertComplete(['exports'])).toThrow(
      'Worker job registry is inconsistent: no handler for job exports/export.deliver',
    );
  });

  it('accepts the registry when every exports job has exactly one handler', () => {
    const handlers = new JobHandlers();
    register(handlers, ['exports.tick', 'export.drain', 'export.deliver']);
    expect(() => handlers.assertComplete(['exports'])).not.toThrow();
  });
});
