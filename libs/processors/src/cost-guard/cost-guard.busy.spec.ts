import { caught } from '../../test/support/messages';
import { InMemoryTollgate } from '../../test/support/in-memory-tollgate';
import { PRICES, micros, promptTokens, stepArgs, logger, guard } from '../../test/support/priced-steps';
import type { GuardCheckCallOptions, GuardCheckRequest, TollgateGuardClient } from '../tollgate/guard-client';
import { CostGuardProcessor } from './cost-guard.processor';

describe("CostGuardProcessor when Tollgate's guard answers busy", () => {
  // The in-memory Tollgate takes a network hop with setImmediate: only the timers are faked.
  beforeEach(() =>
    jest.useFakeTimers({
      now: new Date('2026-12-01T10:00:00Z'),
      doNotFake: ['setImmediate', 'nextTick', 'queueMicrotask'],
    }),
  );
  afterEach(() => {
    jest.useRealTimers();
    jest.restoreAllMocks();
  });

  /** Settles `p` while moving the fake clock on by `stepMs`; the in-memory Tollgate's network hops take no fake time. */
  async function run<T>(p: Promise<T>, stepMs = 1): Promise<T> {
    let done = false;
    p.then(
      () => (done = true),
      () => (done = true),
    );
    for (let t = 0; !done && t < 600_000; t += stepMs) {
      for (let hop = 0; hop < 5; hop++) await new Promise((resolve) => setImmediate(resolve));
      if (!done) await jest.advanceTimersByTimeAsync(stepMs);
    }
    return p;
  }

  /** The in-memory Tollgate, seen through a hand-written client that records when each check was sent and with what options. */
  function timed(tollgate: InMemoryTollgate) {
    const sent: Array<{ at: number; request: GuardCheckRequest; options?: GuardCheckCallOptions }> = [];
    const client: TollgateGuardClient = {
      guard: {
        check: (request, options) => {
          sent.push({ at: Date.now(), request: structuredClone(request), options });
          return tollgate.guard.check(request);
        },
        release: tollgate.guard.release,
      },
      events: tollgate.events,
    };
    const gaps = () => sent.slice(1).map((s, i) => s.at - sent[i]!.at);
    return { client, sent, gaps };
  }

  it('sends the same check again after retryAfterMs with jitter, and the step runs with its reservation', async () => {
    jest.spyOn(Math, 'random').mockReturnValue(0.5);
    const tollgate = new InMemoryTollgate(PRICES);
    tollgate.busyChecks = 1;
    tollgate.busyRetryAfterMs = 250;
    const { client, sent, gaps } = timed(tollgate);
    const log = logger();
    await run(new CostGuardProcessor({ maxCost: 1, client, logger: log }).processInputStep(stepArgs()));
    expect(sent).toHaveLength(2);
    expect(sent[1]!.request).toEqual(sent[0]!.request); // same stepId: the service's idempotency holds
    expect(gaps()).toEqual([375]); // 250 fixed + 0.5 × 250
    // The client is told what is left of the deadline, so an SDK retrying busy answers stops where the guard would.
    expect(sent.map((s) => s.options)).toEqual([{ busyDeadlineMs: 10_000 }, { busyDeadlineMs: 9_625 }]);
    expect(tollgate.open.map((r) => r.costMicros)).toEqual([micros(promptTokens, 500)]);
    expect(log.warn).not.toHaveBeenCalled();
  });

  it('waits between retryAfterMs and twice as long, as its random says', async () => {
    const waits: number[] = [];
    for (const r of [0, 0.5, 0.999999]) {
      jest.spyOn(Math, 'random').mockReturnValue(r);
      const tollgate = new InMemoryTollgate(PRICES);
      tollgate.busyChecks = 1;
      tollgate.busyRetryAfterMs = 400;
      const { client, gaps } = timed(tollgate);
      await run(guard(client).processInputStep(stepArgs()));
      waits.push(...gaps());
    }
    expect(waits).toEqual([400, 600, 800]);
  });

  it('blocks the step once the deadline passes, saying the guard was busy, even with failMode open', async () => {
    jest.spyOn(Math, 'random').mockReturnValue(0.5);
    const tollgate = new InMemoryTollgate(PRICES);
    tollgate.busyChecks = Infinity;
    tollgate.busyRetryAfterMs = 1000;
    const { client, sent } = timed(tollgate);
    const log = logger();
    const g = new CostGuardProcessor({ maxCost: 1, client, failMode: 'open', logger: log });
    const handler = jest.fn();
    g.onViolation = handler;
    const error = await run(caught(() => g.processInputStep(stepArgs())));
    // Retries 1500 ms apart within the 10 000 ms default; the one at 10 500 ms is not sent.
    expect(sent.map((s) => s.at - sent[0]!.at)).toEqual([0, 1500, 3000, 4500, 6000, 7500, 9000]);
    expect(new Set(sent.map((s) => s.request.stepId)).size).toBe(1);
    expect(error.message).toBe(
      "Cost guard: Tollgate's guard was busy (too many checks queued on this step's scopes) and still was after 9000 ms of retries; blocking the step; no budget was checked",
    );
    expect(error.options).toEqual({
      retry: false,
      metadata: {
        processorId: 'cost-guard',
        usage: { estimatedCost: null, costUnit: null },
        maxCost: 1,
        scope: 'resource',
        scopeKey: 'resource:r1',
        threshold: 'hard',
        reason: 'busy',
      },
    });
    // Not a budget violation, and not an outage: no onViolation call, no fail-open.
    expect(handler).not.toHaveBeenCalled();
    expect(log.warn).not.toHaveBeenCalled();
    expect(tollgate.reservations.size).toBe(0);
  });

  it('honours busyDeadlineMs: 0 blocks at the first busy answer, without a retry', async () => {
    const tollgate = new InMemoryTollgate(PRICES);
    tollgate.busyChecks = Infinity;
    const error = await run(caught(() => guard(tollgate, { busyDeadlineMs: 0 }).processInputStep(stepArgs())));
    expect(tollgate.checks).toHaveLength(1);
    expect(error.message).toBe(
      "Cost guard: Tollgate's guard was busy (too many checks queued on this step's scopes) and still was after 0 ms of retries; blocking the step; no budget was checked",
    );
  });

  it('warn strategy: logs that the guard was busy and lets the step run, as it does for a deny', async () => {
    jest.spyOn(Math, 'random').mockReturnValue(0);
    const tollgate = new InMemoryTollgate(PRICES);
    tollgate.busyChecks = Infinity;
    tollgate.busyRetryAfterMs = 400;
    const log = logger();
    const g = new CostGuardProcessor({
      maxCost: 1,
      client: tollgate,
      strategy: 'warn',
      failMode: 'closed',
      busyDeadlineMs: 1000,
      logger: log,
    });
    const handler = jest.fn();
    g.onViolation = handler;
    await expect(run(g.processInputStep(stepArgs()))).resolves.toBeUndefined();
    expect(tollgate.checks).toHaveLength(3); // at 0, 400 and 800 ms; the next would be at 1200
    expect(log.warn).toHaveBeenCalledWith(
      "Cost guard: Tollgate's guard was busy (too many checks queued on this step's scopes) and still was after 800 ms of retries; letting the step run unreserved (strategy 'warn'); no budget was checked",
    );
    expect(handler).not.toHaveBeenCalled();
  });

  it('applies the fail mode as before when a retry cannot reach Tollgate', async () => {
    const tollgate = new InMemoryTollgate(PRICES);
    tollgate.busyChecks = 1;
    const client: TollgateGuardClient = {
      guard: {
        check: async (request) => {
          const response = await tollgate.guard.check(request);
          tollgate.failWith = new Error('connect ECONNREFUSED 10.0.0.7:443'); // from the second check on
          return response;
        },
      },
      events: tollgate.events,
    };
    const error = await run(caught(() => guard(client, { failMode: 'closed' }).processInputStep(stepArgs())));
    expect(tollgate.checks).toHaveLength(2);
    expect(error.message).toBe(
      'Cost guard: cost check failed, blocking the step (fail-closed): connect ECONNREFUSED 10.0.0.7:443',
    );
  });
});
