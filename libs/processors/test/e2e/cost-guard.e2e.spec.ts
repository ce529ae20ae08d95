import { Agent, TripWire } from '@mastra/core/agent';
import { RequestContext } from '@mastra/core/request-context';
import { createTool } from '@mastra/core/tools';
import { TollgateClient } from '@tollgate/sdk';
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { call, createProject, type TestProject } from '../../../../test/support/http';
import { startService, type RunningService } from '../../../../test/support/service';
import {
  CostGuardProcessor,
  formatCost,
  type CostGuardOptions,
  type CostGuardStepReport,
  type CostGuardTripwireMetadata,
  type GuardCheckRequest,
} from '../../src';
import { scriptedModel } from '../support/scripted-model';

// The project prices openai/gpt-4o at $2 / M input and $10 / M output tokens, so tokens × rate are
// whole micro-units. A scripted step reports 10 input and 1,000 output tokens: $0.01002. Its
// estimate is the prompt as counted (always more than 10 tokens) plus maxOutputTokens = 1,000, so
// actual ≤ estimate, which is what makes the reservation a worst case.
const STEP = { input: 10, output: 1_000 };
const STEP_MICROS = STEP.input * 2 + STEP.output * 10;
const MAX_OUTPUT_TOKENS = 1_000;

describe('CostGuardProcessor with TollgateClient against the real service', () => {
  let svc: RunningService;
  beforeAll(async () => {
    // 32 runs queue on one scope's lock: give the guard room on a shared 2-core machine.
    svc = await startService({ GUARD_TIMEOUT_MS: '20000' });
  });
  afterAll(() => svc.close());

  async function pricedProject(): Promise<TestProject> {
    const project = await createProject(svc.url);
    const price = await call(svc.url, 'PUT', '/v1/prices/openai/gpt-4o', {
      token: project.key,
      body: { inputPerMillion: 2, outputPerMillion: 10, effectiveFrom: new Date(Date.now() - 60_000).toISOString() },
    });
    expect(price.status).toBe(200);
    return project;
  }
  const client = (project: TestProject) =>
    new TollgateClient({ baseUrl: svc.url, apiKey: project.key, guard: { timeoutMs: 20_000 } });
  const stepCosts = (projectId: string) =>
    svc.prisma.$queryRawUnsafe<{ n: number; micros: number | null }[]>(
      `SELECT count(*)::int AS n, sum(cost_micros)::float8 AS micros FROM events WHERE project_id = $1 AND type = 'StepUsageRecorded'`,
      projectId,
    );
  const openReservations = async (projectId: string) =>
    (
      await svc.prisma.$queryRawUnsafe<{ n: number }[]>(
        `SELECT count(*)::int AS n FROM reservations WHERE project_id = $1 AND status = 'open'`,
        projectId,
      )
    )[0]!.n;

  const lookup = createTool({
    id: 'lookup',
    description: 'Looks something up',
    inputSchema: z.object({ q: z.string() }),
    execute: async () => ({ found: 'yes' }),
  });
  function guardedAgent(costGuard: CostGuardProcessor) {
    const { model, prompts } = scriptedModel([
      { toolCall: { toolName: 'lookup', input: { q: 'one' } }, usage: STEP },
      { toolCall: { toolName: 'lookup', input: { q: 'two' } }, usage: STEP },
      { text: ['All ', 'done.'], usage: STEP },
    ]);
    const agent = new Agent({
      id: 'guarded',
      name: 'guarded',
      instructions: 'Use the lookup tool.',
      model,
      tools: { lookup },
      inputProcessors: [costGuard],
    });
    return { agent, prompts };
  }
  const contextFor = (resourceId: string) => {
    const requestContext = new RequestContext();
    requestContext.set('mastra__resourceId', resourceId);
    return requestContext;
  };

  /** Spies on the real client's checks, and on the error the guard's abort throws inside Mastra. */
  function observe(tollgate: TollgateClient, costGuard: CostGuardProcessor) {
    const checks: GuardCheckRequest[] = [];
    const check = tollgate.guard.check.bind(tollgate.guard);
    jest.spyOn(tollgate.guard, 'check').mockImplementation(async (request) => {
      checks.push(structuredClone(request) as GuardCheckRequest);
      return check(request);
    });
    const thrown: unknown[] = [];
    const processInputStep = costGuard.processInputStep.bind(costGuard);
    costGuard.processInputStep = async (args) => {
      try {
        return await processInputStep(args);
      } catch (error) {
        thrown.push(error);
        throw error;
      }
    };
    return { checks, thrown };
  }

  // $0.025: step 1 (≈ $0.0104 estimate) and step 2 ($0.01002 spent + ≈ $0.0104) fit; step 3
  // ($0.02004 spent + ≈ $0.0104) does not. Exactness means two steps can never spend the whole
  // budget themselves (each had to fit as a worst case), so "spent" means: the next worst case no longer fits.
  const MAX_COST = 0.025;

  // By default a step's record is sent without holding the run up, so the third step's check may
  // go out while step 2's record is in flight (step 2 then counts at its reservation): a denial
  // taken so is asked again once the record landed. Either way the denial is on what was spent.
  // By default each step after the first is checked ahead, while the step before runs its tools:
  // the second step runs on its check ahead; the third's does not fit, logs nothing, and the
  // step's own check denies it.
  const modes = [
    ['generate', 'records in the background', 'checked ahead'],
    ['stream', 'records in the background', 'checked ahead'],
    ['generate', 'awaitRecords', 'checked ahead'],
    ['stream', 'awaitRecords', 'checked ahead'],
    ['generate', 'records in the background', 'each on its own path'],
    ['stream', 'awaitRecords', 'each on its own path'],
  ] as const;
  it.each(modes)(
    'blocks the third step of a run whose first two steps spent the budget (%s, %s, %s)',
    async (mode, records, checked) => {
      const project = await pricedProject();
      const tollgate = client(project);
      const resourceId = `r-${randomUUID()}`;
      const awaitRecords = records === 'awaitRecords';
      const costGuard = new CostGuardProcessor({
        maxCost: MAX_COST,
        client: tollgate,
        awaitRecords,
        checkAhead: checked === 'checked ahead',
        logger: { warn: () => undefined },
      });
      const violations: unknown[] = [];
      costGuard.onViolation = (v) => void violations.push(v);
      const { checks, thrown } = observe(tollgate, costGuard);
      const { agent, prompts } = guardedAgent(costGuard);
      const options = {
        maxSteps: 5,
        requestContext: contextFor(resourceId),
        modelSettings: { maxOutputTokens: MAX_OUTPUT_TOKENS },
      };

      let tripwire: { reason: string; retry?: boolean; metadata?: unknown; processorId?: string } | undefined;
      if (mode === 'generate') {
        // Mastra 1.71 never rejects generate() with a processor's TripWire: it resolves with `tripwire`.
        tripwire = (await agent.generate('Look it up twice.', options)).tripwire;
      } else {
        const stream = await agent.stream('Look it up twice.', options);
        for await (const part of stream.fullStream as AsyncIterable<{ type: string; payload?: unknown }>) {
          if (part.type === 'tripwire') tripwire = part.payload as typeof tripwire;
        }
      }

      expect(prompts).toHaveLength(2); // the third LLM call never happened
      // One check per step (the second's sent ahead); the third step's asked again only when it raced step 2's record.
      const ahead = checks.filter((c) => c.tentative);
      const own = checks.filter((c) => !c.tentative);
      expect(ahead).toHaveLength(checked === 'checked ahead' ? 2 : 0);
      const asked = own.length - (checked === 'checked ahead' ? 1 : 2);
      expect(awaitRecords ? [1] : [1, 2]).toContain(asked);
      expect(checks.map((c) => c.estimate!.maxOutputTokens)).toEqual(Array(checks.length).fill(MAX_OUTPUT_TOKENS));
      expect(new Set(own.slice(-asked).map((c) => c.stepId)).size).toBe(1);
      const third = own[own.length - 1]!.estimate!;
      const usageMicros = 2 * STEP_MICROS + third.inputTokens * 2 + third.maxOutputTokens * 10;
      const metadata: CostGuardTripwireMetadata = {
        processorId: 'cost-guard',
        usage: { estimatedCost: usageMicros / 1e6, costUnit: 'USD' },
        maxCost: MAX_COST,
        scope: 'resource',
        scopeKey: `resource:${resourceId}`,
        threshold: 'hard',
      };
      const reason = `Cost guard: cost limit exceeded (${formatCost(usageMicros / 1e6)}/${MAX_COST})`;
      expect(tripwire).toEqual({ reason, retry: false, metadata, processorId: 'cost-guard' });
      // Inside Mastra, the guard's abort threw @mastra/core's own TripWire, with the same metadata.
      expect(thrown).toHaveLength(1);
      expect(thrown[0]).toBeInstanceOf(TripWire);
      expect((thrown[0] as TripWire<CostGuardTripwireMetadata>).options).toEqual({ retry: false, metadata });

      // Both steps were stored against their reservations; the service audited the denial.
      expect(await stepCosts(project.id)).toEqual([{ n: 2, micros: 2 * STEP_MICROS }]);
      expect(await openReservations(project.id)).toBe(0);
      const audit = await call(svc.url, 'GET', `/v1/guard/decisions?scopeKey=resource:${resourceId}`, {
        token: project.key,
      });
      const audited = audit.body.decisions.map((d: { violations: Array<{ usage: number; source: string }> }) =>
        d.violations.map((v) => [v.usage, v.source]),
      );
      expect(audited).toHaveLength(asked);
      expect(audited[0]).toEqual([[usageMicros / 1e6, 'request']]); // newest first: the denial that stood
      expect(violations).toHaveLength(1); // not a second time from Mastra's runner
      await tollgate.shutdown();
    },
  );

  /** The run of the agent above with `options`, its step results and its tripwire, in either mode. */
  async function runAgent(agent: Agent, mode: 'generate' | 'stream', options: Record<string, unknown>) {
    if (mode === 'generate') {
      const result = await agent.generate('Look it up twice.', options);
      return {
        text: result.text,
        tripwire: result.tripwire,
        steps: result.steps as Array<{ providerMetadata?: Record<string, Record<string, unknown>> }>,
      };
    }
    const stream = await agent.stream('Look it up twice.', options);
    let tripwire: unknown;
    for await (const part of stream.fullStream as AsyncIterable<{ type: string; payload?: unknown }>)
      if (part.type === 'tripwire') tripwire = part.payload;
    return {
      text: await stream.text,
      tripwire,
      steps: (await stream.steps) as Array<{ providerMetadata?: Record<string, Record<string, unknown>> }>,
    };
  }
  const reservationsOf = (projectId: string) =>
    svc.prisma.$queryRawUnsafe<{ status: string; output_tokens: number; model: string }[]>(
      `SELECT status, output_tokens::int, model FROM reservations WHERE project_id = $1 ORDER BY created_at, status`,
      projectId,
    );

  describe("onExceed 'shrink': the step that would be blocked runs with a smaller maxOutputTokens instead", () => {
    // The last step writes as much as it may: 1,000 output tokens, or fewer when capped.
    const capped = (call: { maxOutputTokens?: number }) => ({
      input: STEP.input,
      output: Math.min(STEP.output, call.maxOutputTokens ?? STEP.output),
    });

    it.each(['generate', 'stream'] as const)(
      'finishes the run within the budget, its last step capped at what fits and reported in its result (%s)',
      async (mode) => {
        const project = await pricedProject();
        const tollgate = client(project);
        const resourceId = `r-${randomUUID()}`;
        const costGuard = new CostGuardProcessor({
          maxCost: MAX_COST,
          client: tollgate,
          onExceed: 'shrink',
          minOutputTokens: 100,
          logger: { warn: () => undefined },
        });
        const { checks } = observe(tollgate, costGuard);
        const { model, prompts, maxOutputTokens } = scriptedModel([
          { toolCall: { toolName: 'lookup', input: { q: 'one' } }, usage: STEP },
          { toolCall: { toolName: 'lookup', input: { q: 'two' } }, usage: STEP },
          { text: ['All ', 'done.'], usage: capped },
        ]);
        const agent = new Agent({
          id: 'guarded',
          name: 'guarded',
          instructions: 'Use the lookup tool.',
          model,
          tools: { lookup },
          inputProcessors: [costGuard],
        });

        const result = await runAgent(agent, mode, {
          maxSteps: 5,
          requestContext: contextFor(resourceId),
          modelSettings: { maxOutputTokens: MAX_OUTPUT_TOKENS },
        });

        // What fits after two steps ($0.02004 spent of $0.025): the prompt at $2 / M and k output
        // tokens at $10 / M, strictly under the limit.
        const own = checks.filter((c) => !c.tentative);
        const third = own[own.length - 1]!.estimate!;
        const fits = Math.ceil((MAX_COST * 1e6 - 2 * STEP_MICROS - third.inputTokens * 2) / 10) - 1;
        expect(fits).toBeGreaterThan(100);
        expect(fits).toBeLessThan(MAX_OUTPUT_TOKENS);
        expect([result.text, result.tripwire]).toEqual(['All done.', undefined]);
        expect(prompts).toHaveLength(3);
        expect(maxOutputTokens).toEqual([MAX_OUTPUT_TOKENS, MAX_OUTPUT_TOKENS, fits]);
        // A check ahead never shrinks: the third step's does not fit, and its own check shrinks it.
        expect(
          own.every(
            (c) =>
              c.onExceed === 'shrink' && c.minOutputTokens === 100 && c.estimate!.maxOutputTokens === MAX_OUTPUT_TOKENS,
          ),
        ).toBe(true);
        expect(checks.filter((c) => c.tentative).map((c) => c.onExceed)).toEqual([undefined, undefined]);
        const report: CostGuardStepReport = {
          processorId: 'cost-guard',
          maxOutputTokens: fits,
          requestedMaxOutputTokens: MAX_OUTPUT_TOKENS,
          limitedBy: [
            {
              scopeKey: `resource:${resourceId}`,
              limitType: 'cost',
              usage: (2 * STEP_MICROS + third.inputTokens * 2 + MAX_OUTPUT_TOKENS * 10) / 1e6,
              limit: MAX_COST,
              unit: 'USD',
              source: 'request',
            },
          ],
        };
        expect(result.steps.map((s) => s.providerMetadata?.['tollgate'])).toEqual([
          undefined,
          undefined,
          { costGuard: report },
        ]);

        // Read as generate() resolves, with no flush: every step stored, the budget kept.
        const [{ n, micros }] = await stepCosts(project.id);
        expect(n).toBe(3);
        expect(micros).toBe(2 * STEP_MICROS + STEP.input * 2 + fits * 10);
        expect(micros!).toBeLessThanOrEqual(MAX_COST * 1e6);
        // The last step's reservation held the capped worst case (one released first if its check raced step 2's record).
        const held = await reservationsOf(project.id);
        expect(held.filter((r) => r.status === 'settled').map((r) => r.output_tokens)).toEqual([
          MAX_OUTPUT_TOKENS,
          MAX_OUTPUT_TOKENS,
          fits,
        ]);
        expect(held.filter((r) => r.status === 'open')).toEqual([]);
        await tollgate.shutdown();
      },
    );

    it('is blocked as before when even the floor does not fit', async () => {
      const project = await pricedProject();
      const tollgate = client(project);
      const costGuard = new CostGuardProcessor({
        maxCost: MAX_COST,
        client: tollgate,
        onExceed: 'shrink',
        minOutputTokens: 900,
        logger: { warn: () => undefined },
      });
      const { agent, prompts } = guardedAgent(costGuard);
      const result = await runAgent(agent, 'generate', {
        maxSteps: 5,
        requestContext: contextFor(`r-${randomUUID()}`),
        modelSettings: { maxOutputTokens: MAX_OUTPUT_TOKENS },
      });
      expect(prompts).toHaveLength(2);
      expect((result.tripwire as { reason: string }).reason).toMatch(/^Cost guard: cost limit exceeded \(/);
      await tollgate.shutdown();
    });
  });

  describe('fallbackModel: the step that would be blocked runs on a cheaper model that fits', () => {
    it.each(['generate', 'stream'] as const)(
      'moves the last step to the fallback, records it under that model, and stays within the budget (%s)',
      async (mode) => {
        const project = await pricedProject();
        // gpt-4o-mini: $0.15 / M input, $0.60 / M output; its worst case ($0.0006 + prompt) fits what is left.
        const price = await call(svc.url, 'PUT', '/v1/prices/openai/gpt-4o-mini', {
          token: project.key,
          body: {
            inputPerMillion: 0.15,
            outputPerMillion: 0.6,
            effectiveFrom: new Date(Date.now() - 60_000).toISOString(),
          },
        });
        expect(price.status).toBe(200);
        const tollgate = client(project);
        const resourceId = `r-${randomUUID()}`;
        const small = scriptedModel([{ text: ['All ', 'done.'], usage: STEP }], {
          provider: 'openai',
          modelId: 'gpt-4o-mini',
        });
        const options: CostGuardOptions = {
          maxCost: MAX_COST,
          client: tollgate,
          fallbackModel: small.model,
          logger: { warn: () => undefined },
        };
        const costGuard = new CostGuardProcessor(options);
        const { checks } = observe(tollgate, costGuard);
        const { agent, prompts } = guardedAgent(costGuard);

        const result = await runAgent(agent, mode, {
          maxSteps: 5,
          requestContext: contextFor(resourceId),
          modelSettings: { maxOutputTokens: MAX_OUTPUT_TOKENS },
        });

        expect([result.text, result.tripwire]).toEqual(['All done.', undefined]);
        expect(prompts).toHaveLength(2); // gpt-4o ran the first two steps
        expect(small.prompts).toHaveLength(1); // gpt-4o-mini the third
        expect(small.maxOutputTokens).toEqual([MAX_OUTPUT_TOKENS]);
        expect(checks.map((c) => c.estimate!.model).slice(-2)).toEqual(['gpt-4o', 'gpt-4o-mini']);
        const denied = checks[checks.length - 2]!.estimate!;
        expect(result.steps[2]!.providerMetadata?.['tollgate']).toEqual({
          costGuard: {
            processorId: 'cost-guard',
            maxOutputTokens: MAX_OUTPUT_TOKENS,
            requestedMaxOutputTokens: MAX_OUTPUT_TOKENS,
            model: 'openai/gpt-4o-mini',
            requestedModel: 'openai/gpt-4o',
            limitedBy: [
              {
                scopeKey: `resource:${resourceId}`,
                limitType: 'cost',
                usage: (2 * STEP_MICROS + denied.inputTokens * 2 + MAX_OUTPUT_TOKENS * 10) / 1e6,
                limit: MAX_COST,
                unit: 'USD',
                source: 'request',
              },
            ],
          },
        });
        const rows = await svc.prisma.$queryRawUnsafe<{ model: string; micros: number }[]>(
          `SELECT model, cost_micros::float8 AS micros FROM events WHERE project_id = $1 AND type = 'StepUsageRecorded' ORDER BY step_index`,
          project.id,
        );
        const miniMicros = Math.round(STEP.input * 0.15 + STEP.output * 0.6);
        expect(rows).toEqual([
          { model: 'gpt-4o', micros: STEP_MICROS },
          { model: 'gpt-4o', micros: STEP_MICROS },
          { model: 'gpt-4o-mini', micros: miniMicros },
        ]);
        expect(2 * STEP_MICROS + miniMicros).toBeLessThanOrEqual(MAX_COST * 1e6);
        expect(await openReservations(project.id)).toBe(0);
        await tollgate.shutdown();
      },
    );
  });

  it('32 concurrent agent runs on one resource end with total cost ≤ maxCost', async () => {
    const project = await pricedProject();
    const tollgate = client(project);
    const resourceId = `r-${randomUUID()}`;
    const maxCost = 0.1; // about 9 worst-case steps; the 32 runs would take 96 steps ($0.96) unguarded
    // Closed: a check that cannot be answered blocks, so the bound is a guarantee, not a likelihood.
    const costGuard = new CostGuardProcessor({
      maxCost,
      client: tollgate,
      failMode: 'closed',
      logger: { warn: () => undefined },
    });
    const results = await Promise.all(
      Array.from({ length: 32 }, async () => {
        const { agent } = guardedAgent(costGuard);
        return agent.generate('Look it up twice.', {
          maxSteps: 5,
          requestContext: contextFor(resourceId),
          modelSettings: { maxOutputTokens: MAX_OUTPUT_TOKENS },
        });
      }),
    );
    await tollgate.flush();

    const [{ n, micros }] = await stepCosts(project.id);
    expect(micros).toBeLessThanOrEqual(maxCost * 1e6);
    expect(micros).toBe(n * STEP_MICROS);
    expect(n).toBeGreaterThanOrEqual(5); // the budget was used, not refused
    const blocked = results.filter((r) => r.tripwire);
    expect(blocked.length).toBeGreaterThan(0);
    // Every block was the budget, none a guard that could not answer.
    for (const r of blocked) expect(r.tripwire!.reason).toMatch(/^Cost guard: cost limit exceeded \(/);
    expect(results.filter((r) => !r.tripwire).every((r) => r.text === 'All done.')).toBe(true);
    expect(await openReservations(project.id)).toBe(0);
    await tollgate.shutdown();
  }, 120_000);
});
