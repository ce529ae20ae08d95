import { randomUUID } from 'node:crypto';
import { MetricsProjector } from '@tollgate/usage-metrics';
import { call, createProject, stepEvent, type TestProject } from '../../support/http';
import { startService, type RunningService } from '../../support/service';

const TOKENS = ['mastra_model_total_input_tokens', 'mastra_model_total_output_tokens'];

/**
 * A model without a price is never invisible: beside every cost, the metric answers say how many
 * steps had none and how many tokens they used — from the log before the projection ran, and from
 * the rollups after.
 */
describe('unpriced usage in metric answers', () => {
  let svc: RunningService;
  let project: TestProject;
  let projector: MetricsProjector;
  const resourceId = `unpriced-${randomUUID()}`;
  const filters = { resourceId };

  beforeAll(async () => {
    svc = await startService();
    projector = svc.app.get(MetricsProjector);
    project = await createProject(svc.url);
    const at = new Date(Date.now() - 60_000).toISOString();
    // gpt-4o at the catalog's $2.50 / $10 per million: $2.00 + $1.00. acme-unknown has no price.
    const events = [
      stepEvent({ resourceId, occurredAt: at, usage: { inputTokens: 400_000, outputTokens: 100_000 } }),
      stepEvent({ resourceId, occurredAt: at, usage: { inputTokens: 200_000, outputTokens: 50_000 } }),
      stepEvent({
        resourceId,
        occurredAt: at,
        provider: 'acme',
        model: 'acme-unknown',
        usage: { inputTokens: 1_500_000, outputTokens: 100 },
      }),
      stepEvent({
        resourceId,
        occurredAt: at,
        provider: 'acme',
        model: 'acme-unknown',
        usage: { inputTokens: 500_000, outputTokens: 10 },
      }),
    ];
    const res = await call(svc.url, 'POST', '/v1/events', { token: project.key, body: { events } });
    expect(res.body.accepted).toBe(4);
  });
  afterAll(() => svc.close());

  const post = async (route: string, body: unknown) => {
    const res = await call(svc.url, 'POST', `/api/observability/metrics/${route}`, { token: project.key, body });
    expect(res.status).toBe(200);
    return res.body;
  };

  async function expectUnpricedCounted() {
    expect(await post('aggregate', { name: TOKENS, aggregation: 'sum', filters })).toMatchObject({
      value: 2_750_110,
      estimatedCost: 3,
      costUnit: 'USD',
      unpricedSteps: 2,
      unpricedTokens: 2_000_110,
    });
    // The step counter of the dashboard: one record per step.
    expect(
      await post('aggregate', { name: ['mastra_model_total_input_tokens'], aggregation: 'count', filters }),
    ).toMatchObject({ value: 4, unpricedSteps: 2, unpricedTokens: 2_000_000 });

    const { groups } = await post('breakdown', {
      name: TOKENS,
      groupBy: ['provider', 'model'],
      aggregation: 'sum',
      filters,
    });
    expect(groups).toEqual([
      {
        dimensions: { provider: 'acme', model: 'acme-unknown' },
        value: 2_000_110,
        estimatedCost: null,
        costUnit: null,
        unpricedSteps: 2,
        unpricedTokens: 2_000_110,
      },
      {
        dimensions: { provider: 'openai', model: 'gpt-4o' },
        value: 750_000,
        estimatedCost: 3,
        costUnit: 'USD',
        unpricedSteps: 0,
        unpricedTokens: 0,
      },
    ]);

    const { series } = await post('timeseries', { name: TOKENS, interval: '1d', aggregation: 'sum', filters });
    expect(series).toHaveLength(1);
    expect(series[0].points).toHaveLength(1);
    expect(series[0].points[0]).toMatchObject({
      value: 2_750_110,
      estimatedCost: 3,
      unpricedSteps: 2,
      unpricedTokens: 2_000_110,
    });

    // Several metrics, none a total: the steps are counted once however many of their records match.
    expect(
      await post('aggregate', {
        name: ['mastra_model_input_text_tokens', 'mastra_model_output_text_tokens'],
        aggregation: 'sum',
        filters,
      }),
    ).toMatchObject({
      value: 2_750_110,
      unpricedSteps: 2,
      unpricedTokens: 2_000_110,
    });
    // Durations are not tokens.
    expect(
      await post('aggregate', { name: ['mastra_model_duration_ms'], aggregation: 'count', filters }),
    ).toMatchObject({ unpricedTokens: 0 });
  }

  it('answers the priced cost exactly and the unpriced steps and tokens, from the log', async () => {
    await expectUnpricedCounted();
  });

  it('answers the same from the rollups once the projection caught up', async () => {
    for (;;) if ((await projector.catchUp({ batchSize: 1000 })).caughtUp) break;
    expect((await post('aggregate', { name: TOKENS, aggregation: 'sum', filters })).lag.events).toBe(0);
    await expectUnpricedCounted();
    // The project cube (no scope filter) counts them too.
    const { groups } = await post('breakdown', { name: TOKENS, groupBy: ['model'], aggregation: 'sum' });
    expect(groups.find((g: any) => g.dimensions.model === 'acme-unknown')).toMatchObject({
      estimatedCost: null,
      unpricedSteps: 2,
      unpricedTokens: 2_000_110,
    });
  });
});
