import { RequestContext } from '@mastra/core/request-context';
import { caught } from '../../test/support/messages';
import { InMemoryTollgate } from '../../test/support/in-memory-tollgate';
import {
  PRICES,
  micros,
  cost,
  plus,
  promptTokens,
  stepArgs,
  logger,
  guard,
  finish,
} from '../../test/support/priced-steps';
import type { GuardCheckRequest, GuardScope, GuardWindow, TollgateGuardClient } from '../tollgate/guard-client';
import { CostGuardProcessor } from './cost-guard.processor';
import type { CostGuardStepArgs } from './mastra-args';

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
