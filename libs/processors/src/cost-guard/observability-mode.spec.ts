import { caught } from '../../test/support/messages';
import { InMemoryTollgate } from '../../test/support/in-memory-tollgate';
import { logger, stepArgs } from '../../test/support/priced-steps';
import { CostGuardProcessor } from './cost-guard.processor';

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
