import { metricsToStepEvents, type MastraMetricLike } from './metrics-to-events';

const base = {
  traceId: 'trace-1',
  runId: 'run-1',
  resourceId: 'res-1',
  threadId: 'th-1',
  entityType: 'agent',
  entityName: 'support',
  provider: 'openai',
  model: 'gpt-4o',
  timestamp: new Date('2026-12-01T10:00:00Z'),
};
const metric = (name: string, value: number, extra: Partial<MastraMetricLike> = {}): MastraMetricLike => ({
  ...base,
  name,
  value,
  ...extra,
});

describe('metricsToStepEvents', () => {
  it('makes one step event per model span, with the usage of its token metrics and a span-derived id', () => {
    const events = metricsToStepEvents([
      metric('mastra_model_total_input_tokens', 1000, { spanId: 'span-a' }),
      metric('mastra_model_total_output_tokens', 200, { spanId: 'span-a' }),
      metric('mastra_model_input_cache_read_tokens', 400, { spanId: 'span-a' }),
      metric('mastra_model_output_reasoning_tokens', 50, { spanId: 'span-a' }),
      metric('mastra_model_duration_ms', 812, { spanId: 'span-a' }),
      metric('mastra_model_total_input_tokens', 10, { spanId: 'span-b', timestamp: new Date('2026-12-01T10:00:01Z') }),
      metric('mastra_model_total_output_tokens', 1, { spanId: 'span-b', timestamp: new Date('2026-12-01T10:00:02Z') }),
      metric('mastra_agent_duration_ms', 2000, { spanId: 'span-root' }),
      metric('mastra_tool_duration_ms', 5, { spanId: 'span-tool' }),
    ]);
    expect(events).toEqual([
      {
        eventId: 'mastra:trace-1/span-a',
        occurredAt: '2026-12-01T10:00:00.000Z',
        traceId: 'trace-1',
        spanId: 'span-a',
        runId: 'run-1',
        threadId: 'th-1',
        resourceId: 'res-1',
        entityType: 'agent',
        entityName: 'support',
        provider: 'openai',
        model: 'gpt-4o',
        usage: { inputTokens: 1000, outputTokens: 200, cacheReadTokens: 400, reasoningTokens: 50 },
        durationMs: 812,
      },
      expect.objectContaining({
        eventId: 'mastra:trace-1/span-b',
        occurredAt: '2026-12-01T10:00:02.000Z',
        usage: { inputTokens: 10, outputTokens: 1 },
      }),
    ]);
  });

  it('fills required fields Mastra left empty', () => {
    const [event] = metricsToStepEvents([
      metric('mastra_model_total_input_tokens', 100, {
        spanId: 's',
        provider: null,
        model: null,
        entityType: null,
        traceId: null,
        runId: 'run-9',
      }),
      metric('mastra_model_input_cache_read_tokens', 40, {
        spanId: 's',
        provider: null,
        model: null,
        entityType: null,
        traceId: null,
        runId: 'run-9',
      }),
    ]);
    expect(event).toMatchObject({
      traceId: 'run-9',
      provider: 'unknown',
      model: 'unknown',
      entityType: 'agent',
      usage: { inputTokens: 100, outputTokens: 0, cacheReadTokens: 40 },
    });
  });

  it('counts cache reads above the input total inside it (Mastra over an AI SDK 5 Anthropic model leaves them out), instead of cutting them to fit', () => {
    // The step: 50 uncached and 10,000 cache-read tokens; Mastra's total says 50.
    const [event] = metricsToStepEvents([
      metric('mastra_model_total_input_tokens', 50, {
        spanId: 's',
        provider: 'anthropic',
        model: 'claude-sonnet-4-20250514',
      }),
      metric('mastra_model_total_output_tokens', 20, {
        spanId: 's',
        provider: 'anthropic',
        model: 'claude-sonnet-4-20250514',
      }),
      metric('mastra_model_input_cache_read_tokens', 10_000, {
        spanId: 's',
        provider: 'anthropic',
        model: 'claude-sonnet-4-20250514',
      }),
      metric('mastra_model_input_cache_write_tokens', 0, {
        spanId: 's',
        provider: 'anthropic',
        model: 'claude-sonnet-4-20250514',
      }),
    ]);
    expect(event!.usage).toEqual({ inputTokens: 10_050, outputTokens: 20, cacheReadTokens: 10_000 });
  });

  it('counts reasoning above the output total inside it (Mastra over an AI SDK 5 Gemini model leaves the thoughts out)', () => {
    const [event] = metricsToStepEvents([
      metric('mastra_model_total_input_tokens', 900, { spanId: 's', provider: 'google', model: 'gemini-2.5-flash' }),
      metric('mastra_model_total_output_tokens', 42, { spanId: 's', provider: 'google', model: 'gemini-2.5-flash' }),
      metric('mastra_model_output_reasoning_tokens', 120, {
        spanId: 's',
        provider: 'google',
        model: 'gemini-2.5-flash',
      }),
    ]);
    expect(event!.usage).toEqual({ inputTokens: 900, outputTokens: 162, reasoningTokens: 120 });
  });
});
