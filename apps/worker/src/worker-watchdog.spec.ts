import type { Logger } from '@nestjs/common';
import type { Queue } from 'bullmq';
import { WorkerWatchdog } from './worker-watchdog';

/** A watchdog over a queue whose scheduler is due at `due` (undefined: the scheduler is gone). */
function given(due: () => number | undefined) {
  const calls = { upserts: 0, replacements: 0, warnings: [] as unknown[] };
  const queue = {
    name: 'exports',
    getJobScheduler: async () => {
      const next = due();
      return next === undefined ? undefined : { key: 'exports.tick', next };
    },
  } as unknown as Queue;
  const watchdog = new WorkerWatchdog({
    queue,
    schedulerId: 'exports.tick',
    everyMs: 200,
    upsert: async () => calls.upserts++,
    replace: () => calls.replacements++,
    logger: { warn: (m: unknown) => calls.warnings.push(m), debug: () => undefined } as unknown as Logger,
  });
  return { watchdog, calls };
}

describe('WorkerWatchdog', () => {
  const start = Date.now();
  const late = (ms: number) => start + ms;

  it('leaves a queue alone while its schedule runs on time', async () => {
    const { watchdog, calls } = given(() => start);
    expect(watchdog.stuckAfterMs).toBe(10_000);
    expect(await watchdog.check(late(9_999))).toBe('ok');
    expect(calls).toEqual({ upserts: 0, replacements: 0, warnings: [] });
  });

  it('replaces a worker that took no job while the schedule was overdue, and gives the new one its own time', async () => {
    const { watchdog, calls } = given(() => start);
    expect(await watchdog.check(late(20_000))).toBe('replaced');
    expect(calls.upserts).toBe(1);
    expect(calls.replacements).toBe(1);
    expect(calls.warnings).toEqual([
      expect.objectContaining({
        msg: 'the worker took no job while its schedule was due: replacing it',
        queue: 'exports',
        scheduleDueSince: new Date(start).toISOString(),
      }),
    ]);
    // The new worker gets its own stuckAfterMs before it is judged.
    expect(await watchdog.check(late(29_999))).toBe('rescheduled');
    expect(await watchdog.check(late(30_000))).toBe('replaced');
    expect(calls.replacements).toBe(2);
  });

  it('only reschedules while a job runs (a slow job is not a stuck worker)', async () => {
    const { watchdog, calls } = given(() => start);
    let finish!: () => void;
    const job = watchdog.track(() => new Promise<void>((resolve) => (finish = resolve)));
    expect(await watchdog.check(Date.now() + 60_000)).toBe('rescheduled');
    expect([calls.upserts, calls.replacements]).toEqual([1, 0]);
    finish();
    await job;
  });

  it('only reschedules when the worker started a job lately (the schedule itself was lost)', async () => {
    const { watchdog, calls } = given(() => undefined);
    await watchdog.track(async () => undefined);
    expect(await watchdog.check(Date.now() + 1_000)).toBe('rescheduled');
    expect([calls.upserts, calls.replacements]).toEqual([1, 0]);
  });

  it('does nothing once stopped', async () => {
    const { watchdog, calls } = given(() => start);
    watchdog.stop();
    expect(await watchdog.check(late(60_000))).toBe('ok');
    expect(calls.upserts).toBe(0);
  });
});
