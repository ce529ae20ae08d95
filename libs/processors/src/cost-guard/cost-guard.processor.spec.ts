import { MessageList } from '@mastra/core/agent/message-list';
import { RequestContext } from '@mastra/core/request-context';
import { getEncoding } from 'js-tiktoken';
import { abort, caught, text } from '../../test/support/messages';
import { InMemoryTollgate } from '../../test/support/in-memory-tollgate';
import { TOKENS_PER_CONVERSATION, TOKENS_PER_MESSAGE } from '../token-count/message-token-counter';
import type {
  GuardCheckCallOptions,
  GuardCheckRequest,
  GuardScope,
  GuardWindow,
  TollgateGuardClient,
} from '../tollgate/guard-client';
import { CostGuardProcessor } from './cost-guard.processor';
import type { CostGuardStepArgs } from './mastra-args';
import type { CostGuardOptions } from './options';

const enc = getEncoding('o200k_base');
const exact = (s: string) => enc.encode(s, [], []).length;
// $2 per million input tokens, $10 per million output tokens: tokens × rate = micro-units.
const PRICES = { 'openai/gpt-4o': { inputPerMillion: 2, outputPerMillion: 10 } };
const micros = (input: number, output: number) => input * 2 + output * 10;
const cost = (input: number, output: number) => micros(input, output) / 1e6;
/** `usd` dollars already spent plus a step, as Tollgate sums them: in whole micro-units. */
const plus = (usd: number, input: number, output: number) => (Math.round(usd * 1e6) + micros(input, output)) / 1e6;

const SYSTEM = 'You are a careful assistant.';
const QUESTION = 'What does the invoice say?';
const promptTokens =
  TOKENS_PER_CONVERSATION +
  (TOKENS_PER_MESSAGE + exact('system') + exact(SYSTEM)) +
  (TOKENS_PER_MESSAGE + exact('user') + exact(QUESTION));

function context(entries: Record<string, string>) {
  const rc = new RequestContext();
  for (const [k, v] of Object.entries(entries)) rc.set(k, v);
  return rc;
}

function stepArgs(overrides: Partial<CostGuardStepArgs> & { ids?: Record<string, string> } = {}): CostGuardStepArgs {
  const list = new MessageList();
  list.addSystem(SYSTEM);
  list.add(text('user', QUESTION) as never, 'input');
  const { ids = { mastra__resourceId: 'r1' }, ...rest } = overrides;
  return {
    messageList: list as never,
    abort,
    requestContext: context(ids),
    state: {},
    stepNumber: 0,
    steps: [],
    model: { provider: 'openai.chat', modelId: 'gpt-4o' },
    modelSettings: { maxOutputTokens: 500 },
    agent: { id: 'support', name: 'Support' },
    ...rest,
  };
}

const logger = () => ({ warn: jest.fn() });
const guard = (tollgate: TollgateGuardClient, options: Partial<CostGuardOptions> = {}) =>
  new CostGuardProcessor({ maxCost: 1, client: tollgate, logger: logger(), ...options });
const finish = (input: number, output: number) => [
  {
    type: 'finish',
    payload: { output: { usage: { inputTokens: input, outputTokens: output, totalTokens: input + output } } },
  },
];

describe('CostGuardProcessor', () => {
  it('has the documented id and name, and validates its options', () => {
    const g = new CostGuardProcessor({ maxCost: 1 });
    expect([g.id, g.name]).toEqual(['cost-guard', 'Cost Guard']);
    expect(() => new CostGuardProcessor({ maxCost: 0 })).toThrow(
      'CostGuardProcessor requires maxCost to be a finite positive number',
    );
    expect(() => new CostGuardProcessor({ maxCost: 1, warnAtPercent: 100 })).toThrow(
      'CostGuardProcessor requires warnAtPercent to be a number between 0 and 100 (exclusive)',
    );
    expect(() => new CostGuardProcessor({ maxCost: 1, busyDeadlineMs: -1 })).toThrow(
      'CostGuardProcessor requires busyDeadlineMs to be a number of milliseconds >= 0',
    );
  });

  it('asks Tollgate before the step with an exact estimate and a reservation', async () => {
    const tollgate = new InMemoryTollgate(PRICES);
    await guard(tollgate).processInputStep(stepArgs());
    expect(tollgate.checks).toEqual([
      {
        context: { resourceId: 'r1', entityType: 'agent', entityName: 'Support' },
        limits: [{ scope: 'resource', window: '7d', maxCost: 1 }],
        estimate: { provider: 'openai', model: 'gpt-4o', inputTokens: promptTokens, maxOutputTokens: 500 },
        reserve: true,
        stepId: expect.stringMatching(/^[0-9a-f-]{36}:0$/),
        failMode: 'open',
      },
    ]);
    expect(tollgate.open.map((r) => r.costMicros)).toEqual([micros(promptTokens, 500)]);
  });

  it('caps the estimate with the configured default when the step sets no maxOutputTokens', async () => {
    const tollgate = new InMemoryTollgate(PRICES);
    await guard(tollgate, { defaultMaxOutputTokens: 1234 }).processInputStep(stepArgs({ modelSettings: {} }));
    expect(tollgate.checks[0]!.estimate!.maxOutputTokens).toBe(1234);
  });

  const scopes: Array<
    [GuardScope, Partial<CostGuardStepArgs> & { ids?: Record<string, string> }, string, string | undefined]
  > = [
    ['resource', { ids: { mastra__resourceId: 'r1' } }, 'resourceId', 'resource:r1'],
    ['thread', { ids: { mastra__threadId: 't1' } }, 'threadId', 'thread:t1'],
    ['user', { ids: { userId: 'u1' } }, 'userId', 'user:u1'],
    ['organization', { ids: { organizationId: 'o1' } }, 'organizationId', 'organization:o1'],
    ['session', { ids: { sessionId: 's1' } }, 'sessionId', 'session:s1'],
    ['run', { ids: {}, tracing: { currentSpan: { traceId: 'trace-1' } } }, 'traceId', undefined],
  ];

  it.each(scopes)(
    '%s scope: blocks when the scope has spent its budget, with the documented TripWire',
    async (scope, args, idKey, scopeKey) => {
      const tollgate = new InMemoryTollgate(PRICES);
      const id = idKey === 'traceId' ? 'trace-1' : scopeKey!.split(':')[1]!;
      tollgate.seed({ [idKey]: id }, 'openai', 'gpt-4o', 400_000, 20_000); // $1.00
      const error = await caught(() => guard(tollgate, { scope }).processInputStep(stepArgs(args)));
      const usage = plus(1, promptTokens, 500);
      expect(error.message).toBe(`Cost guard: cost limit exceeded (${Number(usage.toFixed(6))}/1)`);
      expect(error.options).toEqual({
        retry: false,
        metadata: {
          processorId: 'cost-guard',
          usage: { estimatedCost: usage, costUnit: 'USD' },
          maxCost: 1,
          scope,
          ...(scopeKey ? { scopeKey } : {}),
          threshold: 'hard',
        },
      });
      expect(tollgate.checks[0]!.limits).toEqual([{ scope, ...(scope === 'run' ? {} : { window: '7d' }), maxCost: 1 }]);
      expect(tollgate.checks[0]!.context[idKey as keyof GuardCheckRequest['context']]).toBe(id);
    },
  );

  it.each(scopes)('%s scope: skips the check when the step lacks the scope id (fail-open)', async (scope) => {
    const tollgate = new InMemoryTollgate(PRICES);
    await guard(tollgate, { scope }).processInputStep(stepArgs({ ids: { unrelated: 'x' }, tracing: undefined }));
    expect(tollgate.checks).toHaveLength(0);
  });

  it('reads memory ids from the MastraMemory request-context entry too', async () => {
    const tollgate = new InMemoryTollgate(PRICES);
    const requestContext = new RequestContext();
    requestContext.set('MastraMemory', { thread: { id: 'th-9' }, resourceId: 'res-9' });
    await guard(tollgate, { scope: 'thread' }).processInputStep(stepArgs({ requestContext }));
    expect(tollgate.checks[0]!.context).toMatchObject({ threadId: 'th-9', resourceId: 'res-9' });
  });

  const windows: Array<[GuardWindow, number]> = [
    ['1h', 3_600_000],
    ['6h', 6 * 3_600_000],
    ['24h', 24 * 3_600_000],
    ['7d', 7 * 24 * 3_600_000],
    ['30d', 30 * 24 * 3_600_000],
    ['365d', 365 * 24 * 3_600_000],
  ];
  it.each(windows)('%s window: counts spending inside the window only', async (window, ms) => {
    const inside = new InMemoryTollgate(PRICES);
    inside.seed({ resourceId: 'r1' }, 'openai', 'gpt-4o', 500_000, 0, ms - 60_000);
    await expect(guard(inside, { window }).processInputStep(stepArgs())).rejects.toThrow(
      'Cost guard: cost limit exceeded',
    );
    expect(inside.checks[0]!.limits![0]!.window).toBe(window);

    const outside = new InMemoryTollgate(PRICES);
    outside.seed({ resourceId: 'r1' }, 'openai', 'gpt-4o', 500_000, 0, ms + 60_000);
    await expect(guard(outside, { window }).processInputStep(stepArgs())).resolves.toBeUndefined();
  });

  it('warn strategy: logs, lets the step run, and calls onViolation once per request', async () => {
    const tollgate = new InMemoryTollgate(PRICES);
    tollgate.seed({ resourceId: 'r1' }, 'openai', 'gpt-4o', 600_000, 0); // $1.20
    const log = logger();
    const g = new CostGuardProcessor({ maxCost: 1, client: tollgate, strategy: 'warn', logger: log });
    const violations: unknown[] = [];
    g.onViolation = (v) => void violations.push(v);
    const state = {};
    await g.processInputStep(stepArgs({ state }));
    await g.processInputStep(stepArgs({ state, stepNumber: 1 }));
    const usage = plus(1.2, promptTokens, 500);
    const message = `Cost guard: cost limit exceeded (${Number(usage.toFixed(6))}/1)`;
    expect(log.warn.mock.calls).toEqual([[message]]); // two steps over the limit, one warning
    expect(violations).toEqual([
      {
        processorId: 'cost-guard',
        message,
        detail: {
          usage,
          limit: 1,
          totalUsage: { estimatedCost: usage, costUnit: 'USD' },
          scope: 'resource',
          scopeKey: 'resource:r1',
          threshold: 'hard',
        },
      },
    ]);
    await g.processInputStep(stepArgs({ state: {} })); // a new request
    expect(violations).toHaveLength(2);
  });

  it('block strategy: calls onViolation once, and swallows its errors', async () => {
    const tollgate = new InMemoryTollgate(PRICES);
    tollgate.seed({ resourceId: 'r1' }, 'openai', 'gpt-4o', 600_000, 0);
    const g = guard(tollgate);
    const handler = jest.fn(() => {
      throw new Error('alerting is down');
    });
    g.onViolation = handler;
    const error = await caught(() => g.processInputStep(stepArgs()));
    expect(error.message).toMatch(/^Cost guard: cost limit exceeded/);
    expect(handler).toHaveBeenCalledTimes(1);
    // Mastra's runner then calls onViolation with the TripWire metadata: already delivered, dropped.
    await g.onViolation!({
      processorId: 'cost-guard',
      message: error.message,
      detail: (error.options as { metadata: object }).metadata,
    });
    expect(handler).toHaveBeenCalledTimes(1);
  });

  it('fills every {usage} and {limit} placeholder of a custom message', async () => {
    const tollgate = new InMemoryTollgate({ 'openai/gpt-4o': { inputPerMillion: 1, outputPerMillion: 0 } });
    tollgate.seed({ resourceId: 'r1' }, 'openai', 'gpt-4o', 2_500_000, 0); // $2.50
    const g = guard(tollgate, {
      maxCost: 2,
      message: 'Spent {usage} of {limit} USD ({usage} > {limit})',
      defaultMaxOutputTokens: 0,
    });
    const error = await caught(() => g.processInputStep(stepArgs({ modelSettings: {} })));
    const usage = Number(((2_500_000 + promptTokens) / 1e6).toFixed(6));
    expect(error.message).toBe(`Spent ${usage} of 2 USD (${usage} > 2)`);
  });

  it('warnAtPercent: warns once per request at the soft threshold and never aborts', async () => {
    const tollgate = new InMemoryTollgate(PRICES);
    tollgate.seed({ resourceId: 'r1' }, 'openai', 'gpt-4o', 400_000, 0); // $0.80
    const log = logger();
    const g = new CostGuardProcessor({ maxCost: 1, warnAtPercent: 80, client: tollgate, logger: log });
    const violations: Array<{ message: string; detail: { threshold: string; usage: number } }> = [];
    g.onViolation = (v) => void violations.push(v as never);
    const state = {};
    await g.processInputStep(stepArgs({ state }));
    await g.processInputStep(stepArgs({ state, stepNumber: 1 }));
    const usage = plus(0.8, promptTokens, 500);
    expect(tollgate.checks[0]!.limits![0]!.warnAtPercent).toBe(80);
    expect(violations).toHaveLength(1);
    expect(violations[0]!.detail).toMatchObject({
      threshold: 'soft',
      usage: expect.closeTo(usage, 12),
      limit: 1,
      scopeKey: 'resource:r1',
    });
    expect(violations[0]!.message).toBe(`Cost guard: cost reached 80% of the limit (${Number(usage.toFixed(6))}/1)`);
  });

  it('a maxCost function sets per-request budgets; an invalid result skips the check', async () => {
    const tollgate = new InMemoryTollgate(PRICES);
    const g = guard(tollgate, { maxCost: (rc) => (rc?.get('tier') === 'pro' ? 10 : Number.NaN) });
    await g.processInputStep(stepArgs({ ids: { mastra__resourceId: 'r1', tier: 'pro' } }));
    await g.processInputStep(stepArgs({ ids: { mastra__resourceId: 'r1', tier: 'free' } }));
    expect(tollgate.checks.map((c) => c.limits![0]!.maxCost)).toEqual([10]);
  });

  it('fail-open (default): lets the step run when Tollgate is unreachable', async () => {
    const tollgate = new InMemoryTollgate(PRICES);
    tollgate.failWith = new Error('connect ECONNREFUSED 10.0.0.7:443');
    const log = logger();
    await new CostGuardProcessor({ maxCost: 1, client: tollgate, logger: log }).processInputStep(stepArgs());
    expect(log.warn).toHaveBeenCalledWith(
      'Cost guard: cost check failed, allowing the step (fail-open): connect ECONNREFUSED 10.0.0.7:443',
    );
  });

  it('fail-closed: blocks the step when Tollgate is unreachable', async () => {
    const tollgate = new InMemoryTollgate(PRICES);
    tollgate.failWith = new Error('connect ECONNREFUSED 10.0.0.7:443');
    const error = await caught(() => guard(tollgate, { failMode: 'closed' }).processInputStep(stepArgs()));
    expect(error.message).toBe(
      'Cost guard: cost check failed, blocking the step (fail-closed): connect ECONNREFUSED 10.0.0.7:443',
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
      },
    });
    expect(tollgate.checks[0]!.failMode).toBe('closed');
  });

  it('records the step usage after the LLM call, settling its reservation', async () => {
    const tollgate = new InMemoryTollgate(PRICES);
    const g = guard(tollgate);
    const state = {};
    await g.processInputStep(stepArgs({ state, runId: 'run-1' }));
    const [reservationId] = tollgate.reservations.keys();
    await g.processLLMResponse({ chunks: finish(120, 30), stepNumber: 0, state });
    expect(tollgate.open).toHaveLength(0);
    expect(tollgate.recorded.map((r) => r.event)).toEqual([
      {
        eventId: expect.stringMatching(/:0$/),
        occurredAt: expect.any(String),
        traceId: expect.any(String),
        runId: 'run-1',
        resourceId: 'r1',
        entityName: 'Support',
        entityType: 'agent',
        provider: 'openai',
        model: 'gpt-4o',
        usage: { inputTokens: 120, outputTokens: 30 },
        reservationId,
        stepIndex: 0,
      },
    ]);
    expect(tollgate.spent('resource', 'r1')).toBeCloseTo(cost(120, 30), 12);
  });

  it("as an input processor only, records each step from the next step's `steps`", async () => {
    const tollgate = new InMemoryTollgate(PRICES);
    const g = guard(tollgate);
    const state = {};
    await g.processInputStep(stepArgs({ state }));
    await g.processInputStep(
      stepArgs({ state, stepNumber: 1, steps: [{ usage: { inputTokens: 100, outputTokens: 10 } }] }),
    );
    expect(tollgate.recorded.map((r) => [r.event.stepIndex, r.event.usage])).toEqual([
      [0, { inputTokens: 100, outputTokens: 10 }],
    ]);
    expect(tollgate.open).toHaveLength(1); // step 1's, until it is recorded
  });

  describe("when Tollgate's guard answers busy", () => {
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

  /** One simulated agent run on a shared budget: steps until the guard blocks or the run ends. */
  async function simulatedRun(g: CostGuardProcessor, seed: number): Promise<number> {
    const state = {};
    let steps = 0;
    for (let step = 0; step < 6; step++) {
      try {
        await g.processInputStep(stepArgs({ state, stepNumber: step, ids: { mastra__resourceId: 'shared' } }));
      } catch {
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, (seed * 7 + step * 3) % 5)); // the LLM call
      // Actual usage within the estimate: the prompt as counted, up to maxOutputTokens of output.
      await g.processLLMResponse({
        chunks: finish(promptTokens, 100 + ((seed * 31 + step * 17) % 400)),
        stepNumber: step,
        state,
      });
      steps++;
    }
    return steps;
  }

  it('32 concurrent runs on one budget end at or under maxCost', async () => {
    const tollgate = new InMemoryTollgate(PRICES);
    const maxCost = 0.05; // about 12 worst-case steps for 32 runs that would take up to 192
    const g = guard(tollgate, { maxCost });
    const steps = await Promise.all(Array.from({ length: 32 }, (_, i) => simulatedRun(g, i)));
    const spent = tollgate.spent('resource', 'shared');
    expect(spent).toBeLessThanOrEqual(maxCost);
    expect(steps.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(10); // the budget was used, not refused
    expect(tollgate.open).toHaveLength(0);

    // The same runs without reservations overspend: this is what the reservation prevents.
    const unreserved = new InMemoryTollgate(PRICES);
    const withoutReserve: TollgateGuardClient = {
      guard: { check: (r) => unreserved.guard.check({ ...r, reserve: false }) },
      events: unreserved.events,
    };
    await Promise.all(Array.from({ length: 32 }, (_, i) => simulatedRun(guard(withoutReserve, { maxCost }), i)));
    expect(unreserved.spent('resource', 'shared')).toBeGreaterThan(maxCost);
  });
});

describe('CostGuardProcessor seed-compatible mode (observability storage)', () => {
  const mastraWith = (observability: unknown) => ({
    getStorage: () => ({ stores: { observability } }),
    getLogger: () => logger(),
  });

  it('throws at registration when there is neither a client nor observability storage with getMetricAggregate', () => {
    const message =
      'CostGuardProcessor requires a Tollgate client or observability storage with getMetricAggregate support. Pass `client`, or configure observability storage on your Mastra instance.';
    expect(() => new CostGuardProcessor({ maxCost: 1 }).__registerMastra({ getStorage: () => undefined })).toThrow(
      message,
    );
    expect(() => new CostGuardProcessor({ maxCost: 1 }).__registerMastra(mastraWith({}))).toThrow(message);
    expect(() =>
      new CostGuardProcessor({ maxCost: 1, client: new InMemoryTollgate({}) }).__registerMastra({
        getStorage: () => undefined,
      }),
    ).not.toThrow();
  });

  it('queries the agent cost of the scope within the window and blocks at maxCost', async () => {
    const getMetricAggregate = jest.fn(async () => ({ estimatedCost: 1.25, costUnit: 'USD' }));
    const g = new CostGuardProcessor({ maxCost: 1, scope: 'thread', window: '24h' });
    g.__registerMastra(mastraWith({ getMetricAggregate }));
    const before = Date.now();
    const error = await caught(() => g.processInputStep(stepArgs({ ids: { mastra__threadId: 't1' } })));
    expect(getMetricAggregate).toHaveBeenCalledWith({
      name: ['mastra_model_total_input_tokens', 'mastra_model_total_output_tokens'],
      aggregation: 'sum',
      filters: { threadId: 't1', entityType: 'agent', timestamp: { start: expect.any(Date) } },
    });
    const start = (
      getMetricAggregate.mock.calls[0] as unknown as [{ filters: { timestamp: { start: Date } } }]
    )[0].filters.timestamp.start.getTime();
    expect(before - start).toBeGreaterThanOrEqual(24 * 3_600_000 - 1_000);
    expect(before - start).toBeLessThanOrEqual(24 * 3_600_000 + 1_000);
    expect(error.message).toBe('Cost guard: cost limit exceeded (1.25/1)');
    expect(error.options).toEqual({
      retry: false,
      metadata: {
        processorId: 'cost-guard',
        usage: { estimatedCost: 1.25, costUnit: 'USD' },
        maxCost: 1,
        scope: 'thread',
        scopeKey: 'thread:t1',
        threshold: 'hard',
      },
    });
  });

  it('filters the run scope by trace id, with no window, and attaches a breakdown when asked', async () => {
    const getMetricAggregate = jest.fn(async () => ({ estimatedCost: 2, costUnit: 'USD' }));
    const getMetricBreakdown = jest.fn(async () => ({
      groups: [{ dimensions: { provider: 'openai', model: 'gpt-4o' }, estimatedCost: 2, costUnit: 'USD' }],
    }));
    const g = new CostGuardProcessor({ maxCost: 1, scope: 'run', includeBreakdown: true });
    g.__registerMastra(mastraWith({ getMetricAggregate, getMetricBreakdown }));
    const error = await caught(() => g.processInputStep(stepArgs({ tracing: { currentSpan: { traceId: 'tr-1' } } })));
    expect(getMetricAggregate).toHaveBeenCalledWith(
      expect.objectContaining({ filters: { traceId: 'tr-1', entityType: 'agent' } }),
    );
    expect((error.options as { metadata: { breakdown: unknown } }).metadata.breakdown).toEqual([
      { provider: 'openai', model: 'gpt-4o', estimatedCost: 2, costUnit: 'USD' },
    ]);
  });

  it('treats a failed query as no cost (fail-open), or blocks (fail-closed)', async () => {
    const getMetricAggregate = jest.fn(async () => {
      throw new Error('clickhouse timeout');
    });
    const open = new CostGuardProcessor({ maxCost: 1, logger: logger() });
    open.__registerMastra(mastraWith({ getMetricAggregate }));
    await expect(open.processInputStep(stepArgs())).resolves.toBeUndefined();
    const closed = new CostGuardProcessor({ maxCost: 1, failMode: 'closed' });
    closed.__registerMastra(mastraWith({ getMetricAggregate }));
    await expect(closed.processInputStep(stepArgs())).rejects.toThrow(
      'Cost guard: cost check failed, blocking the step (fail-closed): clickhouse timeout',
    );
  });
});
