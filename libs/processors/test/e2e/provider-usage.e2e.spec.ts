import { Agent } from '@mastra/core/agent';
import { RequestContext } from '@mastra/core/request-context';
import { TollgateClient } from '@tollgate/sdk';
import { TollgateStepProcessor } from '@tollgate/sdk/mastra';
import { randomUUID } from 'node:crypto';
import { priceStep } from '../../../ledger/src/pricing/price-step';
import { createProject, type TestProject } from '../../../../test/support/http';
import { startService, type RunningService } from '../../../../test/support/service';
import { CostGuardProcessor } from '../../src';
import { ANTHROPIC_MODEL, anthropicModel } from '../support/anthropic-models';

// The Anthropic step of the issue: 50 uncached + 10,000 cache-read input tokens, 20 output.
// claude-sonnet-4-20250514 in the catalog, per million tokens: input $3, cache read $0.30,
// output $15, so 50 × 3 + 10,000 × 0.3 + 20 × 15 = 150 + 3,000 + 300 = 3,450 micro-USD.
const EXPECTED_MICROS = 3_450;

const cases = [
  ['v2', 'generate'],
  ['v2', 'stream'],
  ['v3', 'generate'],
  ['v3', 'stream'],
] as const;

describe('an Anthropic step with cache reads, recorded in the real service', () => {
  let svc: RunningService;
  beforeAll(async () => {
    svc = await startService();
  });
  afterAll(() => svc.close());

  const steps = (projectId: string) =>
    svc.prisma.$queryRawUnsafe<Record<string, unknown>[]>(
      `SELECT provider, model, input_tokens::int, output_tokens::int, cache_read_tokens::int, cache_write_tokens::int, cost_micros::int, cost_source, unpriced, reservation_id IS NOT NULL AS settles
         FROM events WHERE project_id = $1 AND type = 'StepUsageRecorded' ORDER BY position`,
      projectId,
    );
  const openReservations = async (projectId: string) =>
    (
      await svc.prisma.$queryRawUnsafe<{ n: number }[]>(
        `SELECT count(*)::int AS n FROM reservations WHERE project_id = $1 AND status = 'open'`,
        projectId,
      )
    )[0]!.n;
  const client = (project: TestProject) => new TollgateClient({ baseUrl: svc.url, apiKey: project.key });
  const run = async (agent: Agent, mode: 'generate' | 'stream', resourceId: string) => {
    const requestContext = new RequestContext();
    requestContext.set('mastra__resourceId', resourceId);
    const text =
      mode === 'generate'
        ? (await agent.generate('What is in the cached document?', { requestContext })).text
        : await (
            await agent.stream('What is in the cached document?', { requestContext })
          ).text;
    expect(text).toBe('Cached answer.');
  };
  const expectedRow = {
    provider: 'anthropic',
    model: ANTHROPIC_MODEL,
    input_tokens: 10_050,
    output_tokens: 20,
    cache_read_tokens: 10_000,
    cache_write_tokens: 0,
    cost_micros: EXPECTED_MICROS,
    cost_source: 'catalog',
    unpriced: false,
    settles: true,
  };

  it.each(cases)(
    'CostGuardProcessor: the step is stored with its cache reads inside 10,050 input tokens, at 3,450 micro-USD, and its reservation is settled (%s model, %s)',
    async (spec, mode) => {
      const project = await createProject(svc.url);
      const tollgate = client(project);
      const warnings: string[] = [];
      const costGuard = new CostGuardProcessor({
        maxCost: 5,
        client: tollgate,
        logger: { warn: (m) => void warnings.push(m) },
      });
      const agent = new Agent({
        id: 'cached',
        name: 'cached',
        instructions: 'Answer from the document.',
        model: anthropicModel(spec) as never,
        inputProcessors: [costGuard],
      });

      await run(agent, mode, `r-${randomUUID()}`);
      await tollgate.flush();

      expect(warnings).toEqual([]);
      expect(await steps(project.id)).toEqual([expectedRow]);
      expect(await openReservations(project.id)).toBe(0);
      // The service's own pricing function, on the usage it stored, gives the same micro-units.
      const priced = priceStep(
        {
          provider: 'anthropic',
          model: ANTHROPIC_MODEL,
          usage: { inputTokens: 10_050, outputTokens: 20, cacheReadTokens: 10_000 },
        },
        new Date(),
        [],
      );
      expect(priced).toMatchObject({ priced: true, costMicros: BigInt(EXPECTED_MICROS) });
      await tollgate.shutdown();
    },
  );

  it.each(cases)(
    "the SDK's TollgateStepProcessor stores the same step at the same cost, settling its reservation (%s model, %s)",
    async (spec, mode) => {
      const project = await createProject(svc.url);
      const tollgate = client(project);
      const errors: unknown[] = [];
      const processor = new TollgateStepProcessor({
        client: tollgate,
        entityName: 'cached',
        guard: { reserve: true, limits: [{ scope: 'resource', maxCost: 5 }] },
        onError: (e) => errors.push(e),
      });
      const agent = new Agent({
        id: 'cached',
        name: 'cached',
        instructions: 'Answer from the document.',
        model: anthropicModel(spec) as never,
        inputProcessors: [processor],
        outputProcessors: [processor],
        errorProcessors: [processor],
      });

      await run(agent, mode, `r-${randomUUID()}`);
      await tollgate.flush();

      expect(errors).toEqual([]);
      expect(tollgate.events.stats).toMatchObject({ rejected: 0 });
      expect(await steps(project.id)).toEqual([expectedRow]);
      expect(await openReservations(project.id)).toBe(0);
      await tollgate.shutdown();
    },
  );
});
