import { MessageList } from '@mastra/core/agent/message-list';
import { RequestContext } from '@mastra/core/request-context';
import { TollgateClient } from '@tollgate/sdk';
import { getEncoding } from 'js-tiktoken';
import { randomUUID } from 'node:crypto';
import { call, createProject, type TestProject } from '../../../../test/support/http';
import { startService, type RunningService } from '../../../../test/support/service';
import { TOKENS_PER_CONVERSATION, TOKENS_PER_MESSAGE, TokenLimiterProcessor } from '../../src';
import { abort, text, uid } from '../support/messages';

const enc = getEncoding('o200k_base');
const exact = (s: string) => enc.encode(s, [], []).length;
const SYSTEM = 'You are terse.';
const systemCost = TOKENS_PER_MESSAGE + exact('system') + exact(SYSTEM);
/** The limit that leaves exactly `budget` tokens for conversation messages. */
const limitFor = (budget: number) => systemCost + TOKENS_PER_CONVERSATION + budget;

/** A user message of exactly `tokens` tokens, framing included. */
function sized(tokens: number) {
  const body = Array.from({ length: tokens - TOKENS_PER_MESSAGE - 1 }, () => ' a').join('');
  return text('user', body, uid());
}

describe('TokenLimiterProcessor with a guard: TollgateClient against the real service', () => {
  let svc: RunningService;
  let project: TestProject;
  let tollgate: TollgateClient;
  beforeAll(async () => {
    svc = await startService();
    project = await createProject(svc.url);
    tollgate = new TollgateClient({ baseUrl: svc.url, apiKey: project.key });
  });
  afterAll(async () => {
    await tollgate.shutdown();
    await svc.close();
  });

  /** Records `tokens` input tokens already used by the resource, and waits until they are stored. */
  async function used(resourceId: string, tokens: number) {
    tollgate.events.record({
      traceId: `t-${randomUUID()}`,
      resourceId,
      entityType: 'agent',
      provider: 'openai',
      model: 'gpt-4o',
      usage: { inputTokens: tokens, outputTokens: 0 },
    });
    await tollgate.flush();
  }

  /** Runs the limiter's step hook on a system message and three 20-token messages; returns how many it kept. */
  async function kept(limiter: TokenLimiterProcessor, resourceId: string) {
    const list = new MessageList();
    list.addSystem(SYSTEM);
    const history = [sized(20), sized(20), sized(20)];
    list.add(history as never, 'memory');
    const requestContext = new RequestContext();
    requestContext.set('mastra__resourceId', resourceId);
    await limiter.processInputStep({
      messages: [],
      messageList: list as never,
      abort,
      requestContext,
      stepNumber: 0,
      model: { provider: 'openai.chat', modelId: 'gpt-4o' },
    });
    const left = list.get.all.db().map((m) => m.id);
    expect(left).toEqual(history.slice(history.length - left.length).map((m) => m.id)); // the newest ones
    return left.length;
  }

  it('trims to what a project policy has left of its token budget', async () => {
    const name = `tokens-${randomUUID()}`;
    const policy = await call(svc.url, 'PUT', `/v1/policies/${name}`, {
      token: project.key,
      body: { scope: 'resource', window: '24h', maxTotalTokens: 1_000, entityName: 'limited' },
    });
    expect(policy.status).toBe(200);
    const resourceId = `r-${randomUUID()}`;
    await used(resourceId, 1_000 - limitFor(40)); // leaves room for two 20-token messages
    const limiter = new TokenLimiterProcessor({
      limit: limitFor(100),
      guard: { client: tollgate, context: { entityName: 'limited' } },
    });
    expect(await kept(limiter, resourceId)).toBe(2);
    // The policy names its agent: another agent's steps are not capped by it.
    const other = new TokenLimiterProcessor({
      limit: limitFor(100),
      guard: { client: tollgate, context: { entityName: 'other' } },
    });
    expect(await kept(other, resourceId)).toBe(3);
    // A dry run: nothing was reserved or audited.
    const rows = await svc.prisma.$queryRawUnsafe<{ n: number }[]>(
      `SELECT count(*)::int AS n FROM events WHERE project_id = $1 AND type <> 'StepUsageRecorded'`,
      project.id,
    );
    expect(rows[0]!.n).toBe(0);
  });

  it("trims to what a request limit has left, counting other steps' open reservations", async () => {
    const resourceId = `r-${randomUUID()}`;
    await used(resourceId, 500);
    // Another agent's step is in flight: its reservation holds 100 input + 200 output tokens on the
    // resource (a reservation holds the scopes its check had a limit on).
    const reserved = await tollgate.guard.check({
      context: { resourceId, traceId: `t-${randomUUID()}` },
      limits: [{ scope: 'resource', window: '1h', maxTotalTokens: 1_000_000 }],
      estimate: { provider: 'openai', model: 'gpt-4o', inputTokens: 100, maxOutputTokens: 200 },
      reserve: true,
      stepId: `s-${randomUUID()}`,
    });
    expect(reserved.reservation).toBeDefined();
    const maxTotalTokens = 800 + limitFor(20); // 500 used + 300 reserved: room for one message
    const limiter = new TokenLimiterProcessor({
      limit: limitFor(100),
      guard: { client: tollgate, limits: [{ scope: 'resource', window: '1h', maxTotalTokens }] },
    });
    expect(await kept(limiter, resourceId)).toBe(1);
    // Released, those 300 tokens are free again.
    await tollgate.guard.release(reserved.reservation!.id);
    expect(await kept(limiter, resourceId)).toBe(3);
  });

  it('a budget already spent leaves no message: the step is aborted, never sent empty', async () => {
    const resourceId = `r-${randomUUID()}`;
    await used(resourceId, 2_000);
    const limiter = new TokenLimiterProcessor({
      limit: limitFor(100),
      guard: { client: tollgate, limits: [{ scope: 'resource', maxInputTokens: 2_000 }] },
    });
    await expect(kept(limiter, resourceId)).rejects.toThrow(
      'TokenLimiterProcessor: System messages alone exceed token limit',
    );
  });
});
