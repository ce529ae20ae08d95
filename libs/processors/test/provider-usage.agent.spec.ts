import { Agent } from '@mastra/core/agent';
import { RequestContext } from '@mastra/core/request-context';
import { stepUsageEventSchema, problemsOf } from '@tollgate/contracts';
import { TollgateClient } from '@tollgate/sdk';
import { TollgateStepProcessor } from '@tollgate/sdk/mastra';
import { acceptAll, fakeService } from '../../sdk/src/testing/fake-service';
import { priceStep } from '../../ledger/src/pricing/price-step';
import { CostGuardProcessor } from '../src';
import type { StepUsageEvent } from '../src/tollgate/guard-client';
import { ANTHROPIC_MODEL, anthropicModel } from './support/anthropic-models';
import { InMemoryTollgate } from './support/in-memory-tollgate';

// The Anthropic step of the issue: 50 uncached + 10,000 cache-read input tokens, 20 output.
// Tollgate counts the cache inside the input total.
const EXPECTED_USAGE = { inputTokens: 10_050, outputTokens: 20, cacheReadTokens: 10_000 };
// claude-sonnet-4-20250514 in the catalog (@pydantic/genai-prices, id claude-sonnet-4-0), per
// million tokens: input $3, cache read $0.30, cache write $3.75, output $15. So, in micro-USD
// (1 token at $X / M = X micro-USD):
//   uncached   50 × 3    =   150
//   cache read 10,000 × 0.3 = 3,000
//   output     20 × 15   =   300
//   total                  3,450 micro-USD ($0.00345)
// Today's processors recorded 50 input of which 50 cache reads (15 + 300 = 315), or nothing.
const EXPECTED_MICROS = 3_450n;
const PRICED_AT = new Date('2026-03-01T00:00:00Z');

const cases = [
  ['v2', 'generate'],
  ['v2', 'stream'],
  ['v3', 'generate'],
  ['v3', 'stream'],
] as const;

function context() {
  const requestContext = new RequestContext();
  requestContext.set('mastra__resourceId', 'res-usage');
  return requestContext;
}

async function run(agent: Agent, mode: 'generate' | 'stream') {
  if (mode === 'generate')
    return (await agent.generate('What is in the cached document?', { requestContext: context() })).text;
  return (await agent.stream('What is in the cached document?', { requestContext: context() })).text;
}

/** The in-memory Tollgate, refusing what the service refuses: an event its schema rejects is not stored. */
function validatingTollgate() {
  const tollgate = new InMemoryTollgate({
    [`anthropic/${ANTHROPIC_MODEL}`]: { inputPerMillion: 3, outputPerMillion: 15 },
  });
  const refused: string[] = [];
  const record = tollgate.events.record;
  tollgate.events.record = async (event: StepUsageEvent) => {
    const parsed = stepUsageEventSchema.safeParse(event);
    if (!parsed.success) {
      const [first] = problemsOf(parsed.error);
      refused.push(`${first!.field} ${first!.reason}`);
      throw new Error(`400 ${first!.field} ${first!.reason}`);
    }
    return record(event);
  };
  return { tollgate, refused };
}

const price = (usage: typeof EXPECTED_USAGE) =>
  priceStep({ provider: 'anthropic', model: ANTHROPIC_MODEL, usage }, PRICED_AT, []);

describe('an Anthropic step with cache reads through a real Mastra Agent', () => {
  it('is priced by the service at 3,450 micro-USD when the cache is inside the input total', () => {
    expect(price(EXPECTED_USAGE)).toMatchObject({
      priced: true,
      source: 'catalog',
      currency: 'USD',
      costMicros: EXPECTED_MICROS,
      inputCostMicros: 3_150n,
      outputCostMicros: 300n,
    });
  });

  it.each(cases)(
    'CostGuardProcessor records 10,050 input tokens, 10,000 of them cache reads, and settles the reservation (%s model, %s)',
    async (spec, mode) => {
      const { tollgate, refused } = validatingTollgate();
      const costGuard = new CostGuardProcessor({ maxCost: 5, client: tollgate, logger: { warn: () => undefined } });
      const agent = new Agent({
        id: 'cached',
        name: 'cached',
        instructions: 'Answer from the document.',
        model: anthropicModel(spec) as never,
        inputProcessors: [costGuard],
      });

      expect(await run(agent, mode)).toBe('Cached answer.');

      expect(refused).toEqual([]);
      expect(tollgate.recorded.map((r) => r.event.usage)).toEqual([EXPECTED_USAGE]);
      expect(tollgate.recorded[0]!.event).toMatchObject({
        provider: 'anthropic',
        model: ANTHROPIC_MODEL,
        reservationId: expect.any(String),
      });
      expect(tollgate.open).toEqual([]);
      expect(price(tollgate.recorded[0]!.event.usage as typeof EXPECTED_USAGE)).toMatchObject({
        costMicros: EXPECTED_MICROS,
      });
    },
  );

  it.each(cases)("the SDK's TollgateStepProcessor records the same usage (%s model, %s)", async (spec, mode) => {
    const service = fakeService(acceptAll);
    const client = new TollgateClient({ baseUrl: 'http://tollgate.test', apiKey: 'tg_test', fetch: service.fetch });
    const errors: unknown[] = [];
    const steps = new TollgateStepProcessor({ client, entityName: 'cached', onError: (e) => errors.push(e) });
    const agent = new Agent({
      id: 'cached',
      name: 'cached',
      instructions: 'Answer from the document.',
      model: anthropicModel(spec) as never,
      inputProcessors: [steps],
      outputProcessors: [steps],
    });

    expect(await run(agent, mode)).toBe('Cached answer.');
    await client.events.flush();

    expect(errors).toEqual([]);
    const events = service.requests.filter((r) => r.path === '/v1/events').flatMap((r) => r.body.events);
    expect(events.map((e: { usage: unknown }) => e.usage)).toEqual([EXPECTED_USAGE]);
    expect(events[0]).toMatchObject({ provider: 'anthropic', model: ANTHROPIC_MODEL, resourceId: 'res-usage' });
    expect(price(events[0].usage)).toMatchObject({ costMicros: EXPECTED_MICROS });
    await client.shutdown();
  });
});
