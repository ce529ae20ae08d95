import { TollgateClient, type GuardCheckResponse } from '@tollgate/sdk';
import {
  TollgateGuardDeniedError,
  isTollgateGuardDenied,
  tollgateMiddleware,
  type TollgateMiddlewareOptions,
} from '@tollgate/sdk/ai-sdk';
import { generateText, streamText, wrapLanguageModel } from 'ai';
import { MockLanguageModelV3, convertArrayToReadableStream } from 'ai/test';
import {
  generateText as generateText5,
  streamText as streamText5,
  wrapLanguageModel as wrapLanguageModel5,
} from 'ai-v5';
import { MockLanguageModelV2, convertArrayToReadableStream as toStream5 } from 'ai-v5/test';
import { randomUUID } from 'node:crypto';
import { createProject, type TestProject } from '../support/http';
import { startService, type RunningService } from '../support/service';

/**
 * @tollgate/sdk/ai-sdk against the real service, through the AI SDK's own `wrapLanguageModel`,
 * `generateText` and `streamText`, in AI SDK 6 (LanguageModelV3, `ai`) and AI SDK 5
 * (LanguageModelV2, `ai-v5`), with the SDKs' mock models.
 *
 * gpt-4o: $2.50 / M input, $10 / M output.
 */
const PROVIDER = 'openai.chat';
const MODEL = 'gpt-4o';
// 4,000 characters: with its JSON, an estimate of ~1,010 input tokens at 4 characters a token.
const PROMPT = 'Summarize the ticket. '.repeat(182);

const V3_USAGE = {
  inputTokens: { total: 1000, noCache: 600, cacheRead: 400, cacheWrite: 0 },
  outputTokens: { total: 150, text: 130, reasoning: 20 },
};
const V2_USAGE = {
  inputTokens: 1000,
  outputTokens: 150,
  totalTokens: 1150,
  cachedInputTokens: 400,
  reasoningTokens: 20,
};
const V3_FINISH = { unified: 'stop', raw: 'stop' };

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function v3Model(opts: { delayMs?: number; fail?: Error } = {}) {
  const calls = { generate: 0, stream: 0 };
  const model = new MockLanguageModelV3({
    provider: PROVIDER,
    modelId: MODEL,
    doGenerate: async () => {
      calls.generate++;
      if (opts.delayMs) await sleep(opts.delayMs);
      if (opts.fail) throw opts.fail;
      return {
        content: [{ type: 'text', text: 'Done.' }],
        finishReason: V3_FINISH,
        usage: V3_USAGE,
        warnings: [],
      } as never;
    },
    doStream: async () => {
      calls.stream++;
      if (opts.delayMs) await sleep(opts.delayMs);
      if (opts.fail) throw opts.fail;
      return {
        stream: convertArrayToReadableStream([
          { type: 'stream-start', warnings: [] },
          { type: 'text-start', id: 't' },
          { type: 'text-delta', id: 't', delta: 'Do' },
          { type: 'text-delta', id: 't', delta: 'ne.' },
          { type: 'text-end', id: 't' },
          { type: 'finish', finishReason: V3_FINISH, usage: V3_USAGE },
        ]),
      } as never;
    },
  });
  return { model, calls };
}

function v2Model() {
  return new MockLanguageModelV2({
    provider: PROVIDER,
    modelId: MODEL,
    doGenerate: async () => ({
      content: [{ type: 'text', text: 'Done.' }],
      finishReason: 'stop',
      usage: V2_USAGE,
      warnings: [],
    }),
    doStream: async () => ({
      stream: toStream5([
        { type: 'stream-start', warnings: [] },
        { type: 'text-start', id: 't' },
        { type: 'text-delta', id: 't', delta: 'Done.' },
        { type: 'text-end', id: 't' },
        { type: 'finish', finishReason: 'stop', usage: V2_USAGE },
      ]),
    }),
  });
}

describe('@tollgate/sdk/ai-sdk: the guard and the ledger as an AI SDK middleware', () => {
  let svc: RunningService;
  let project: TestProject;
  let client: TollgateClient;

  beforeAll(async () => {
    svc = await startService();
  });
  afterAll(() => svc.close());
  beforeEach(async () => {
    project = await createProject(svc.url, ['ingest', 'guard', 'read']);
    client = new TollgateClient({ baseUrl: svc.url, apiKey: project.key });
  });
  afterEach(() => client.shutdown());

  const middleware = (extra: Partial<TollgateMiddlewareOptions> = {}) =>
    tollgateMiddleware({ client, entityName: 'ticket-bot', ...extra });
  const steps = () =>
    svc.prisma.$queryRawUnsafe<any[]>(
      `SELECT run_id, resource_id, entity_name, provider, model, input_tokens::int, output_tokens::int, cache_read_tokens::int, reasoning_tokens::int, finish_reason, reservation_id, cost_micros::int
         FROM events WHERE project_id = $1 AND type = 'StepUsageRecorded' ORDER BY position`,
      project.id,
    );
  const reservations = () =>
    svc.prisma.$queryRawUnsafe<{ id: string; status: string; output_tokens: number }[]>(
      'SELECT id, status, output_tokens::int FROM reservations WHERE project_id = $1 ORDER BY created_at',
      project.id,
    );
  const recordedCostMicros = async () => {
    const [row] = await svc.prisma.$queryRawUnsafe<{ cost: bigint | null }[]>(
      `SELECT sum(cost_micros) AS cost FROM events WHERE project_id = $1 AND type = 'StepUsageRecorded'`,
      project.id,
    );
    return Number(row.cost ?? 0);
  };
  // 1000 input (400 of them cache reads at $1.25 / M) and 150 output: 600 × 2.5 + 400 × 1.25 + 150 × 10 micro-dollars.
  const STEP_MICROS = 1500 + 500 + 1500;
  const expectedStep = (resourceId: string, reservationId: string) => ({
    resource_id: resourceId,
    entity_name: 'ticket-bot',
    provider: 'openai',
    model: MODEL,
    input_tokens: 1000,
    output_tokens: 150,
    cache_read_tokens: 400,
    reasoning_tokens: 20,
    finish_reason: 'stop',
    reservation_id: reservationId,
  });

  describe.each([
    ['AI SDK 6 (LanguageModelV3)', 'v3'],
    ['AI SDK 5 (LanguageModelV2)', 'v2'],
  ] as const)('%s', (_name, spec) => {
    const run = async (mode: 'generate' | 'stream', resourceId: string) => {
      const providerOptions = { tollgate: { resourceId } };
      if (spec === 'v3') {
        const model = wrapLanguageModel({ model: v3Model().model, middleware: middleware() });
        if (mode === 'generate')
          return (await generateText({ model, prompt: PROMPT, maxOutputTokens: 200, providerOptions })).text;
        return await streamText({ model, prompt: PROMPT, maxOutputTokens: 200, providerOptions }).text;
      }
      const model = wrapLanguageModel5({ model: v2Model(), middleware: middleware() });
      if (mode === 'generate')
        return (await generateText5({ model, prompt: PROMPT, maxOutputTokens: 200, providerOptions })).text;
      return await streamText5({ model, prompt: PROMPT, maxOutputTokens: 200, providerOptions }).text;
    };

    it.each(['generate', 'stream'] as const)(
      '%s: reserves before the call, records the real usage normalized, and the event settles the reservation',
      async (mode) => {
        const resourceId = `res-${randomUUID()}`;
        expect(await run(mode, resourceId)).toBe('Done.');
        const result = await client.flush();
        expect(result).toMatchObject({ delivered: 1, accepted: 1, rejected: 0, dropped: 0, ok: true });
        const [reservation, ...more] = await reservations();
        expect(more).toEqual([]);
        expect(reservation).toMatchObject({ status: 'settled', output_tokens: 200 });
        const rows = await steps();
        expect(rows).toEqual([
          { ...expectedStep(resourceId, reservation.id), run_id: expect.any(String), cost_micros: STEP_MICROS },
        ]);
      },
    );
  });

  it('denies a call over budget with a typed error before the model is called, reserving nothing', async () => {
    const { model: mock, calls } = v3Model();
    const model = wrapLanguageModel({
      model: mock,
      middleware: middleware({ limits: [{ scope: 'resource', window: '24h', maxCost: 0.001 }] }),
    });
    const resourceId = `res-${randomUUID()}`;
    const error = await generateText({
      model,
      prompt: PROMPT,
      maxOutputTokens: 200,
      providerOptions: { tollgate: { resourceId } },
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TollgateGuardDeniedError);
    expect(isTollgateGuardDenied(error)).toBe(true);
    const denied = error as TollgateGuardDeniedError;
    expect(denied).toMatchObject({
      name: 'TollgateGuardDeniedError',
      code: 'guard_denied',
      decision: { decision: 'deny' },
    });
    expect(denied.violations).toEqual([
      expect.objectContaining({
        scope: 'resource',
        scopeKey: `resource:${resourceId}`,
        window: '24h',
        limitType: 'cost',
        limit: 0.001,
        threshold: 'hard',
      }),
    ]);
    expect(denied.message).toMatch(
      new RegExp(`^Tollgate denied the model call: resource:${resourceId}@24h cost would reach`),
    );

    // Streaming: the same error, as the stream's error, and the model is not called either.
    const errors: unknown[] = [];
    const streamed = streamText({
      model,
      prompt: PROMPT,
      maxOutputTokens: 200,
      providerOptions: { tollgate: { resourceId } },
      onError: ({ error }) => void errors.push(error),
    });
    await streamed.consumeStream();
    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(TollgateGuardDeniedError);
    expect(calls).toEqual({ generate: 0, stream: 0 });
    expect(await reservations()).toEqual([]);
  });

  it('releases the reservation when the model call fails, and when a stream is aborted before its end', async () => {
    const failing = wrapLanguageModel({
      model: v3Model({ fail: new Error('provider down') }).model,
      middleware: middleware(),
    });
    await expect(generateText({ model: failing, prompt: PROMPT, maxOutputTokens: 200, maxRetries: 0 })).rejects.toThrow(
      'provider down',
    );

    // A stream that stalls after its first delta until the caller aborts it, and then errors as a
    // provider's fetch does.
    const slow = new MockLanguageModelV3({
      provider: PROVIDER,
      modelId: MODEL,
      doStream: async ({ abortSignal }) =>
        ({
          stream: new ReadableStream({
            start(c) {
              c.enqueue({ type: 'stream-start', warnings: [] });
              c.enqueue({ type: 'text-start', id: 't' });
              c.enqueue({ type: 'text-delta', id: 't', delta: 'Par' });
              abortSignal?.addEventListener('abort', () =>
                c.error(new DOMException('The operation was aborted.', 'AbortError')),
              );
            },
          }),
        }) as never,
    });
    const abort = new AbortController();
    const streamed = streamText({
      model: wrapLanguageModel({ model: slow, middleware: middleware() }),
      prompt: PROMPT,
      maxOutputTokens: 200,
      abortSignal: abort.signal,
      onError: () => {},
    });
    for await (const delta of streamed.textStream) {
      expect(delta).toBe('Par');
      abort.abort();
    }
    for (let i = 0; i < 50 && (await reservations()).some((r) => r.status === 'open'); i++) await sleep(20);
    expect((await reservations()).map((r) => r.status)).toEqual(['released', 'released']);
    await client.flush();
    expect(await steps()).toEqual([]);
  });

  it('caps a call that sets no maxOutputTokens at the reserved defaultMaxOutputTokens', async () => {
    const { model: mock } = v3Model();
    const model = wrapLanguageModel({ model: mock, middleware: middleware({ defaultMaxOutputTokens: 300 }) });
    await generateText({ model, prompt: PROMPT });
    expect(mock.doGenerateCalls[0].maxOutputTokens).toBe(300);
    await client.flush();
    expect(await reservations()).toEqual([expect.objectContaining({ status: 'settled', output_tokens: 300 })]);
  });

  it.each(['generate', 'stream'] as const)(
    "%s with onExceed 'shrink': a call that fits only with fewer output tokens runs with the guard's cap, reserved as such",
    async (mode) => {
      const { model: mock } = v3Model();
      const decisions: GuardCheckResponse[] = [];
      const mw = middleware({
        limits: [{ scope: 'resource', window: '24h', maxCost: 0.004 }],
        onExceed: 'shrink',
        minOutputTokens: 50,
        onDecision: (d) => void decisions.push(d),
      });
      const model = wrapLanguageModel({ model: mock, middleware: mw });
      const providerOptions = { tollgate: { resourceId: `res-${randomUUID()}` } };
      if (mode === 'generate')
        expect((await generateText({ model, prompt: PROMPT, maxOutputTokens: 200, providerOptions })).text).toBe(
          'Done.',
        );
      else
        expect(await streamText({ model, prompt: PROMPT, maxOutputTokens: 200, providerOptions }).text).toBe('Done.');
      expect(decisions).toHaveLength(1);
      const adjust = decisions[0].adjust!;
      expect(decisions[0].decision).toBe('allow');
      expect(adjust.requestedMaxOutputTokens).toBe(200);
      expect(adjust.maxOutputTokens).toBeGreaterThanOrEqual(50);
      expect(adjust.maxOutputTokens).toBeLessThan(200);
      const sent = mode === 'generate' ? mock.doGenerateCalls : mock.doStreamCalls;
      expect(sent.map((c) => c.maxOutputTokens)).toEqual([adjust.maxOutputTokens]);
      await client.flush();
      expect(await reservations()).toEqual([
        expect.objectContaining({ status: 'settled', output_tokens: adjust.maxOutputTokens }),
      ]);
      expect((await recordedCostMicros()) / 1e6).toBeLessThanOrEqual(0.004);
    },
  );

  it('32 concurrent calls, generate and stream, on one budget: the budget ends ≤ 1.00×, every denial typed', async () => {
    const resourceId = `res-${randomUUID()}`;
    const maxCost = 0.03;
    const mw = middleware({ limits: [{ scope: 'resource', window: '24h', maxCost }], context: { resourceId } });
    // Each call takes 100 ms, so that the checks of all 32 meet reservations still open.
    const model = wrapLanguageModel({ model: v3Model({ delayMs: 100 }).model, middleware: mw });
    const outcomes: unknown[] = await Promise.all(
      Array.from({ length: 32 }, async (_, i) => {
        try {
          if (i % 2 === 0) return (await generateText({ model, prompt: PROMPT, maxOutputTokens: 200 })).text;
          let failure: unknown;
          const text = await Promise.resolve(
            streamText({ model, prompt: PROMPT, maxOutputTokens: 200, onError: ({ error }) => void (failure = error) })
              .text,
          ).catch((e: unknown) => {
            throw failure ?? e;
          });
          if (failure) throw failure;
          return text;
        } catch (err) {
          return err;
        }
      }),
    );
    const allowed = outcomes.filter((o) => o === 'Done.').length;
    const denied = outcomes.filter((o) => o instanceof TollgateGuardDeniedError).length;
    expect(allowed + denied).toBe(32);
    expect(allowed).toBeGreaterThan(0);
    expect(denied).toBeGreaterThan(0);
    const result = await client.flush();
    expect(result).toMatchObject({ delivered: allowed, dropped: 0, ok: true });
    const spent = await recordedCostMicros();
    expect(spent).toBe(allowed * STEP_MICROS);
    expect(spent / 1e6).toBeLessThanOrEqual(maxCost);
    const held = await reservations();
    expect(held).toHaveLength(allowed);
    expect(held.every((r) => r.status === 'settled')).toBe(true);
  }, 60_000);
});
