import type { StepUsageEvent } from '@tollgate/contracts';
import { EventPartitions, PrismaService } from '@tollgate/database';
import { randomUUID } from 'node:crypto';
import { insertStepEvents } from '../../../ledger/src/append-events/insert-step-events.sql';
import { priceStep } from '../../../ledger/src/pricing/price-step';
import { TEST_DATABASE_URL } from '../../../../test/support/env';
import { METRIC_BY_NAME } from '../metric-names';
import { MetricsProjector } from '../projection/metrics-projector';
import { dimensionValuesOf, labelKeysOf, labelValuesOf, metricNamesOf, tagsOf } from './discovery.sql';

/** The discovery statements against real PostgreSQL: every value, from the log tail and once projected. */
describe('discovery statements (real PostgreSQL)', () => {
  const prisma = new PrismaService(TEST_DATABASE_URL, 3);
  afterAll(() => prisma.onModuleDestroy());

  /**
   * Runs the projector until it has read this project's steps. It reads below the oldest running
   * transaction of the whole PostgreSQL cluster, so another database's open transaction (other test
   * runs on the same server) can hold it back for a moment.
   */
  const projectAll = async (lag: () => Promise<number>) => {
    const projector = new MetricsProjector(prisma);
    for (const deadline = Date.now() + 20_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 100))) {
      await projector.catchUp();
      if ((await lag()) === 0) return;
    }
    throw new Error('the projector did not reach the steps in 20 s');
  };
  const id = (name: string) => METRIC_BY_NAME.get(name)!.id;

  const step = (over: Partial<StepUsageEvent>): StepUsageEvent => ({
    eventId: `e-${randomUUID()}`,
    occurredAt: new Date(Date.now() - 60_000).toISOString(),
    traceId: 'trace-1',
    entityType: 'agent',
    provider: 'openai',
    model: 'gpt-4o',
    usage: { inputTokens: 1000, outputTokens: 100 },
    ...over,
  });
  const seed = async () => {
    const project = `p-${randomUUID()}`;
    const events = [
      step({
        entityName: 'planner',
        environment: 'prod',
        serviceName: 'api',
        tags: ['beta', 'eu'],
        labels: { team: 'search', tier: 'gold' },
        durationMs: 120,
      }),
      step({
        entityType: 'workflow_step',
        entityName: 'fetch',
        environment: 'staging',
        tags: ['eu'],
        usage: { inputTokens: 500, outputTokens: 50, cacheReadTokens: 200 },
        labels: { team: 'ads' },
      }),
      step({ entityName: 'planner', labels: { team: 'search-infra' } }),
    ];
    await new EventPartitions(prisma).ensureFor(events.map((e) => new Date(e.occurredAt)));
    await insertStepEvents(
      prisma.sql,
      project,
      events.map((e) => ({
        event: e,
        occurredAt: new Date(e.occurredAt),
        cost: priceStep(e, new Date(e.occurredAt), []),
      })),
    );
    return project;
  };
  const names = [
    'mastra_model_duration_ms',
    'mastra_model_input_cache_read_tokens',
    'mastra_model_input_text_tokens',
    'mastra_model_output_text_tokens',
    'mastra_model_total_input_tokens',
    'mastra_model_total_output_tokens',
  ];

  it('lists the metric names and dimension values a project has, the same before and after projection', async () => {
    const project = await seed();
    const ask = async () => ({
      names: (await metricNamesOf(prisma, project)).rows,
      entityTypes: (await dimensionValuesOf(prisma, project, 'entity_type')).rows,
      entityNames: (await dimensionValuesOf(prisma, project, 'entity_name')).rows,
      agentNames: (await dimensionValuesOf(prisma, project, 'entity_name', 'agent')).rows,
      environments: (await dimensionValuesOf(prisma, project, 'environment')).rows,
      services: (await dimensionValuesOf(prisma, project, 'service_name')).rows,
    });
    const expected = {
      names,
      entityTypes: ['agent', 'workflow_step'],
      entityNames: ['fetch', 'planner'],
      agentNames: ['planner'],
      environments: ['prod', 'staging'],
      services: ['api'],
    };
    const tail = await metricNamesOf(prisma, project);
    expect(tail.lag.events).toBeGreaterThanOrEqual(3);
    expect(await ask()).toEqual(expected);
    await projectAll(async () => (await metricNamesOf(prisma, project)).lag.events);
    expect(await ask()).toEqual(expected);
  });

  it('lists tags, label keys and label values (with a prefix) from the log', async () => {
    const project = await seed();
    expect((await tagsOf(prisma, project)).rows).toEqual(['beta', 'eu']);
    expect((await tagsOf(prisma, project, 'workflow_step')).rows).toEqual(['eu']);
    expect((await labelKeysOf(prisma, project, id('mastra_model_total_input_tokens'))).rows).toEqual(['team', 'tier']);
    // Only the workflow step read from the cache: only its labels come with that metric.
    expect((await labelKeysOf(prisma, project, id('mastra_model_input_cache_read_tokens'))).rows).toEqual(['team']);
    expect((await labelValuesOf(prisma, project, id('mastra_model_total_input_tokens'), 'team')).rows).toEqual([
      'ads',
      'search',
      'search-infra',
    ]);
    expect(
      (await labelValuesOf(prisma, project, id('mastra_model_total_input_tokens'), 'team', 'search')).rows,
    ).toEqual(['search', 'search-infra']);
    expect((await labelValuesOf(prisma, project, id('mastra_model_total_input_tokens'), 'absent')).rows).toEqual([]);
  });

  it('knows nothing of another project', async () => {
    await seed();
    const other = `p-${randomUUID()}`;
    expect((await metricNamesOf(prisma, other)).rows).toEqual([]);
    expect((await dimensionValuesOf(prisma, other, 'entity_type')).rows).toEqual([]);
    expect((await tagsOf(prisma, other)).rows).toEqual([]);
  });
});
