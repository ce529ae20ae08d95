import { randomUUID } from 'node:crypto';
import { TEST_ADMIN_TOKEN } from '../support/env';
import { call, createProject, type TestProject } from '../support/http';
import { startService, type RunningService } from '../support/service';

/** POST /v1/estimate: a step's cost before it is made, priced exactly as the guard reserves it. */
describe('POST /v1/estimate', () => {
  let svc: RunningService;
  let project: TestProject;
  beforeAll(async () => {
    svc = await startService();
    project = await createProject(svc.url);
  });
  afterAll(() => svc.close());

  const estimate = (body: unknown, p = project) => call(svc.url, 'POST', '/v1/estimate', { token: p.key, body });

  it('prices given input tokens with the catalog (gpt-4o: 1000 in × $2.50/M + 200 out × $10/M = $0.0045)', async () => {
    const res = await estimate({ provider: 'openai', model: 'gpt-4o', inputTokens: 1000, maxOutputTokens: 200 });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      provider: 'openai',
      model: 'gpt-4o',
      countedInputTokens: 1000,
      counted: 'given',
      cost: 0.0045,
      costUnit: 'USD',
      priced: true,
      priceId: expect.stringContaining('gpt-4o'),
      inputTokens: 1000,
      outputTokens: 200,
      inputTokensMargin: 1,
      tier: null,
    });
  });

  it('names the tier of a tiered catalog price the held input falls in (gemini-2.5-pro: above 200,000 input tokens, $2.50 / $15 instead of $1.25 / $10)', async () => {
    // 100,000 held × 1.25 (Gemini's margin) = 125,000: base tier, 125,000 × 1.25 + 1,000 × 10 = 166,250 micro-USD.
    const base = await estimate({
      provider: 'google',
      model: 'gemini-2.5-pro',
      inputTokens: 100_000,
      maxOutputTokens: 1000,
    });
    expect(base.body).toMatchObject({
      inputTokens: 125_000,
      inputTokensMargin: 1.25,
      cost: 0.16625,
      costUnit: 'USD',
      tier: { inputTokensAbove: 0 },
    });
    // 180,000 × 1.25 = 225,000 held: the margin takes the worst case past the tier, 225,000 × 2.5 + 1,000 × 15 = 577,500.
    const long = await estimate({
      provider: 'google',
      model: 'gemini-2.5-pro',
      inputTokens: 180_000,
      maxOutputTokens: 1000,
    });
    expect(long.body).toMatchObject({ inputTokens: 225_000, cost: 0.5775, tier: { inputTokensAbove: 200_000 } });
  });

  it('counts messages with o200k, and holds a Claude step with the margin its tokenizer needs', async () => {
    const messages = [
      { role: 'system', content: 'You are terse.' },
      { role: 'user', content: 'hello world' },
    ];
    const openai = await estimate({ provider: 'openai', model: 'gpt-4o', messages, maxOutputTokens: 0 });
    // 3 per request + (3 + "system" 1 + "You are terse." 4) + (3 + "user" 1 + "hello world" 2) = 17
    expect(openai.body).toMatchObject({
      counted: 'o200k',
      countedInputTokens: 17,
      inputTokens: 17,
      inputTokensMargin: 1,
    });
    const claude = await estimate({ provider: 'anthropic', model: 'claude-sonnet-4-5', messages, maxOutputTokens: 0 });
    expect(claude.body).toMatchObject({
      counted: 'o200k',
      countedInputTokens: 17,
      inputTokensMargin: 1.35,
      inputTokens: 23,
    });
    // The guard reserves the same.
    const check = await call(svc.url, 'POST', '/v1/guard/check', {
      token: project.key,
      body: {
        context: { resourceId: `r-${randomUUID()}` },
        estimate: { provider: 'anthropic', model: 'claude-sonnet-4-5', inputTokens: 17, maxOutputTokens: 0 },
        dryRun: true,
      },
    });
    expect(check.body.estimate).toEqual({
      cost: claude.body.cost,
      costUnit: claude.body.costUnit,
      priced: true,
      priceId: claude.body.priceId,
      inputTokens: 23,
      outputTokens: 0,
      inputTokensMargin: 1.35,
    });
  });

  it('says an unknown model has no price, or prices it at the project fallback rate', async () => {
    const p = await createProject(svc.url);
    const unknown = { provider: 'acme', model: 'acme-9', inputTokens: 1000, maxOutputTokens: 1000 };
    expect((await estimate(unknown, p)).body).toMatchObject({ cost: null, costUnit: null, priced: false });
    await call(svc.url, 'PATCH', `/v1/admin/projects/${p.id}`, {
      token: TEST_ADMIN_TOKEN,
      body: { unpricedPolicy: 'fallback', unpricedFallback: { inputPerMillion: 1, outputPerMillion: 4 } },
    });
    // 1350 held input (margin 1.35 for an unknown family) × $1/M + 1000 × $4/M = $0.00535
    expect((await estimate(unknown, p)).body).toMatchObject({
      cost: 0.00535,
      costUnit: 'USD',
      priced: false,
      fallback: 'project',
      inputTokens: 1350,
    });
  });

  it("answers a read key (the dashboard's) as well as a guard key, not an ingest-only key", async () => {
    const body = { provider: 'openai', model: 'gpt-4o', inputTokens: 1000, maxOutputTokens: 200 };
    const reader = await createProject(svc.url, ['read']);
    expect((await estimate(body, reader)).body).toMatchObject({ cost: 0.0045 });
    const ingester = await createProject(svc.url, ['ingest']);
    const refused = await estimate(body, ingester);
    expect(refused.status).toBe(403);
    expect(refused.body.message).toBe("This key lacks the 'guard' or 'read' scope (it has: ingest)");
  });

  it('refuses a request with neither or both of inputTokens and messages, naming the field', async () => {
    for (const body of [
      { provider: 'openai', model: 'gpt-4o', maxOutputTokens: 1 },
      {
        provider: 'openai',
        model: 'gpt-4o',
        maxOutputTokens: 1,
        inputTokens: 1,
        messages: [{ role: 'user', content: 'x' }],
      },
    ]) {
      const res = await estimate(body);
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({
        field: 'inputTokens',
        message: expect.stringContaining('exactly one of inputTokens and messages'),
      });
    }
  });
});
