import { randomUUID } from 'node:crypto';
import { call, createProject, stepEvent, type TestProject } from '../support/http';
import { startService, type RunningService } from '../support/service';

/**
 * A step sent with its provider's own usage object (`providerUsage`) is read the way the provider
 * means it and billed at the catalog's published rates (per million tokens, so tokens × rate is
 * micro-USD). Each fixture is a documented response shape; each bill is worked out by hand.
 */
const FIXTURES = [
  {
    name: 'OpenAI Chat Completions, gpt-4o, a cache hit: cached_tokens are inside prompt_tokens',
    provider: 'openai',
    model: 'gpt-4o',
    providerUsage: {
      format: 'openai',
      usage: {
        prompt_tokens: 2006,
        completion_tokens: 300,
        total_tokens: 2306,
        prompt_tokens_details: { cached_tokens: 1920, audio_tokens: 0 },
        completion_tokens_details: {
          reasoning_tokens: 0,
          audio_tokens: 0,
          accepted_prediction_tokens: 0,
          rejected_prediction_tokens: 0,
        },
      },
    },
    // $2.50 input, $1.25 cached, $10 output: 86 × 2.5 + 1,920 × 1.25 + 300 × 10 = 215 + 2,400 + 3,000.
    stored: {
      input_tokens: 2006,
      output_tokens: 300,
      cache_read_tokens: 1920,
      cache_write_tokens: 0,
      reasoning_tokens: 0,
    },
    micros: 5615,
  },
  {
    name: 'OpenAI Responses, o4-mini, reasoning and a cache hit: both inside their totals',
    provider: 'openai',
    model: 'o4-mini',
    providerUsage: {
      format: 'openai',
      usage: {
        input_tokens: 5000,
        input_tokens_details: { cached_tokens: 4000 },
        output_tokens: 1200,
        output_tokens_details: { reasoning_tokens: 1000 },
        total_tokens: 6200,
      },
    },
    // $1.10 input, $0.275 cached, $4.40 output: 1,000 × 1.1 + 4,000 × 0.275 + 1,200 × 4.4 = 1,100 + 1,100 + 5,280.
    stored: {
      input_tokens: 5000,
      output_tokens: 1200,
      cache_read_tokens: 4000,
      cache_write_tokens: 0,
      reasoning_tokens: 1000,
    },
    micros: 7480,
  },
  {
    name: 'Anthropic Messages, claude-sonnet-4, cache read and 5-minute cache write: input_tokens leaves both out',
    provider: 'anthropic',
    model: 'claude-sonnet-4-20250514',
    providerUsage: {
      format: 'anthropic',
      usage: {
        input_tokens: 50,
        cache_creation_input_tokens: 2000,
        cache_read_input_tokens: 10000,
        output_tokens: 400,
        cache_creation: { ephemeral_5m_input_tokens: 2000, ephemeral_1h_input_tokens: 0 },
        service_tier: 'standard',
      },
    },
    // $3 input, $3.75 cache write, $0.30 cache read, $15 output: 150 + 7,500 + 3,000 + 6,000.
    stored: {
      input_tokens: 12050,
      output_tokens: 400,
      cache_read_tokens: 10000,
      cache_write_tokens: 2000,
      reasoning_tokens: 0,
    },
    micros: 16650,
  },
  {
    name: 'Anthropic Messages, claude-sonnet-4, 5-minute and 1-hour cache writes: each at its own rate',
    provider: 'anthropic',
    model: 'claude-sonnet-4-20250514',
    providerUsage: {
      format: 'anthropic',
      usage: {
        input_tokens: 100,
        cache_creation_input_tokens: 1000,
        cache_read_input_tokens: 0,
        output_tokens: 200,
        cache_creation: { ephemeral_5m_input_tokens: 600, ephemeral_1h_input_tokens: 400 },
        service_tier: 'standard',
      },
    },
    // $3 input, $3.75 5-minute write, $6 1-hour write, $15 output: 300 + 2,250 + 2,400 + 3,000.
    stored: {
      input_tokens: 1100,
      output_tokens: 200,
      cache_read_tokens: 0,
      cache_write_tokens: 1000,
      cache_write_1h_tokens: 400,
      reasoning_tokens: 0,
    },
    micros: 7950,
  },
  {
    name: 'Gemini, gemini-2.5-flash, implicit cache and thinking: cached inside the prompt, thoughts outside the candidates',
    provider: 'google',
    model: 'gemini-2.5-flash',
    providerUsage: {
      format: 'gemini',
      usage: {
        promptTokenCount: 10000,
        cachedContentTokenCount: 8000,
        candidatesTokenCount: 500,
        thoughtsTokenCount: 1500,
        totalTokenCount: 12000,
        promptTokensDetails: [{ modality: 'TEXT', tokenCount: 10000 }],
      },
    },
    // $0.30 input, $0.03 cached, $2.50 output (thoughts included): 2,000 × 0.3 + 8,000 × 0.03 + 2,000 × 2.5 = 600 + 240 + 5,000.
    stored: {
      input_tokens: 10000,
      output_tokens: 2000,
      cache_read_tokens: 8000,
      cache_write_tokens: 0,
      reasoning_tokens: 1500,
    },
    micros: 5840,
  },
  {
    name: 'Bedrock Converse, Claude 3.5 Sonnet, cache read and write: inputTokens leaves both out',
    provider: 'amazon-bedrock',
    model: 'anthropic.claude-3-5-sonnet-20240620-v1:0',
    providerUsage: {
      format: 'bedrock',
      usage: {
        inputTokens: 100,
        outputTokens: 300,
        totalTokens: 5400,
        cacheReadInputTokens: 4000,
        cacheWriteInputTokens: 1000,
      },
    },
    // $3 input, $0.30 cache read, $3.75 cache write, $15 output: 300 + 1,200 + 3,750 + 4,500.
    stored: {
      input_tokens: 5100,
      output_tokens: 300,
      cache_read_tokens: 4000,
      cache_write_tokens: 1000,
      reasoning_tokens: 0,
    },
    micros: 9750,
  },
  {
    name: 'AI SDK 5 (V2), an Anthropic model: inputTokens is Anthropic’s (uncached only), cache reads beside it',
    provider: 'anthropic',
    model: 'claude-sonnet-4-20250514',
    providerUsage: {
      format: 'ai-sdk',
      specVersion: 'v2',
      usage: { inputTokens: 50, outputTokens: 20, totalTokens: 70, cachedInputTokens: 10000 },
      providerMetadata: { anthropic: { cacheCreationInputTokens: 0 } },
    },
    // 50 × 3 + 10,000 × 0.3 + 20 × 15 = 150 + 3,000 + 300.
    stored: {
      input_tokens: 10050,
      output_tokens: 20,
      cache_read_tokens: 10000,
      cache_write_tokens: 0,
      reasoning_tokens: 0,
    },
    micros: 3450,
  },
  {
    name: 'AI SDK 6 (V3), the same step: inputTokens.total includes the cache reads',
    provider: 'anthropic',
    model: 'claude-sonnet-4-20250514',
    providerUsage: {
      format: 'ai-sdk',
      usage: {
        inputTokens: { total: 10050, noCache: 50, cacheRead: 10000, cacheWrite: 0 },
        outputTokens: { total: 20, text: 20, reasoning: 0 },
      },
    },
    stored: {
      input_tokens: 10050,
      output_tokens: 20,
      cache_read_tokens: 10000,
      cache_write_tokens: 0,
      reasoning_tokens: 0,
    },
    micros: 3450,
  },
] as const;

describe('POST /v1/events with the provider’s own usage (providerUsage)', () => {
  let svc: RunningService;
  let project: TestProject;
  beforeAll(async () => {
    svc = await startService();
    project = await createProject(svc.url);
  });
  afterAll(() => svc.close());

  const ingest = (events: unknown[]) => call(svc.url, 'POST', '/v1/events', { token: project.key, body: { events } });
  const stored = async (eventId: string) =>
    (
      await svc.prisma.$queryRawUnsafe<Record<string, unknown>[]>(
        `SELECT input_tokens::int, output_tokens::int, cache_read_tokens::int, cache_write_tokens::int, cache_write_1h_tokens::int, reasoning_tokens::int, cost_micros::int, cost_source, data
           FROM events WHERE project_id = $1 AND event_id = $2 AND type = 'StepUsageRecorded'`,
        project.id,
        eventId,
      )
    )[0];

  it.each(FIXTURES)('$name', async (f) => {
    const { usage: _usage, ...rest } = stepEvent({
      provider: f.provider,
      model: f.model,
      resourceId: `r-${randomUUID()}`,
    });
    const event: Record<string, any> = { ...rest, providerUsage: f.providerUsage };
    const res = await ingest([event]);
    expect(res.status).toBe(200);
    expect(res.body.results[0]).toMatchObject({ status: 'accepted' });
    const row = await stored(event.eventId);
    expect(row).toMatchObject({ ...f.stored, cost_micros: f.micros, cost_source: 'catalog' });
    // The provider's object is kept as it was sent, beside the usage read from it.
    expect(row.data).toEqual({ providerUsage: f.providerUsage });
  });

  it('refuses usage and providerUsage together, neither, an unknown format, and a count that is not a number — storing none of them', async () => {
    const { usage, ...base } = stepEvent({ provider: 'openai', model: 'gpt-4o' });
    const openai = { format: 'openai', usage: { prompt_tokens: 10, completion_tokens: 2 } };
    const cases: [Record<string, unknown>, string, string][] = [
      [
        { ...base, usage, providerUsage: openai },
        'events[0].providerUsage',
        'must not be sent with usage: send one of them',
      ],
      [{ ...base }, 'events[0].usage', 'is required (or providerUsage: the provider’s usage object and its format)'],
      [
        { ...base, providerUsage: { ...openai, format: 'cohere' } },
        'events[0].providerUsage.format',
        'must be one of openai, anthropic, gemini, bedrock, ai-sdk',
      ],
      [
        { ...base, providerUsage: { format: 'openai', usage: { prompt_tokens: '10', completion_tokens: 2 } } },
        'events[0].providerUsage.usage.prompt_tokens',
        'is a token count: must be a number',
      ],
      [
        { ...base, providerUsage: { format: 'anthropic', usage: { input_tokens: -5, output_tokens: 2 } } },
        'events[0].providerUsage.usage.input_tokens',
        'must be a finite number, not negative',
      ],
      [
        { ...base, providerUsage: { format: 'openai', usage: [1, 2] } },
        'events[0].providerUsage.usage',
        'must be an object',
      ],
      [{ ...base, providerUsage: { ...openai, extra: 1 } }, 'events[0].providerUsage.extra', 'is not a known field'],
    ];
    for (const [event, field, reason] of cases) {
      const eventId = `evt-${randomUUID()}`;
      const res = await ingest([{ ...event, eventId }]);
      expect([res.status, res.body.results?.[0]]).toEqual([
        200,
        { index: 0, eventId, status: 'rejected', field, reason },
      ]);
      expect(await stored(eventId)).toBeUndefined();
    }
  });
});
