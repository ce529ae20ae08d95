import { MessageList } from '@mastra/core/agent/message-list';
import { RequestContext } from '@mastra/core/request-context';
import { getEncoding } from 'js-tiktoken';
import { CostGuardProcessor } from '../../src/cost-guard/cost-guard.processor';
import type { CostGuardStepArgs } from '../../src/cost-guard/mastra-args';
import type { CostGuardOptions } from '../../src/cost-guard/options';
import { TOKENS_PER_CONVERSATION, TOKENS_PER_MESSAGE } from '../../src/token-count/message-token-counter';
import type { TollgateGuardClient } from '../../src/tollgate/guard-client';
import { abort, text } from './messages';

// The cost guard specs' step: a system message and a question on gpt-4o (at most 500 output
// tokens) for resource r1, with gpt-4o priced so that every cost is exact in micro-units.

const enc = getEncoding('o200k_base');
const exact = (s: string) => enc.encode(s, [], []).length;
// $2 per million input tokens, $10 per million output tokens: tokens × rate = micro-units.
export const PRICES = { 'openai/gpt-4o': { inputPerMillion: 2, outputPerMillion: 10 } };
export const micros = (input: number, output: number) => input * 2 + output * 10;
export const cost = (input: number, output: number) => micros(input, output) / 1e6;
/** `usd` dollars already spent plus a step, as Tollgate sums them: in whole micro-units. */
export const plus = (usd: number, input: number, output: number) =>
  (Math.round(usd * 1e6) + micros(input, output)) / 1e6;

const SYSTEM = 'You are a careful assistant.';
const QUESTION = 'What does the invoice say?';
export const promptTokens =
  TOKENS_PER_CONVERSATION +
  (TOKENS_PER_MESSAGE + exact('system') + exact(SYSTEM)) +
  (TOKENS_PER_MESSAGE + exact('user') + exact(QUESTION));

function context(entries: Record<string, string>) {
  const rc = new RequestContext();
  for (const [k, v] of Object.entries(entries)) rc.set(k, v);
  return rc;
}

export function stepArgs(
  overrides: Partial<CostGuardStepArgs> & { ids?: Record<string, string> } = {},
): CostGuardStepArgs {
  const list = new MessageList();
  list.addSystem(SYSTEM);
  list.add(text('user', QUESTION) as never, 'input');
  const { ids = { mastra__resourceId: 'r1' }, ...rest } = overrides;
  return {
    messageList: list as never,
    abort,
    requestContext: context(ids),
    state: {},
    stepNumber: 0,
    steps: [],
    model: { provider: 'openai.chat', modelId: 'gpt-4o' },
    modelSettings: { maxOutputTokens: 500 },
    agent: { id: 'support', name: 'Support' },
    ...rest,
  };
}

export const logger = () => ({ warn: jest.fn() });
export const guard = (tollgate: TollgateGuardClient, options: Partial<CostGuardOptions> = {}) =>
  new CostGuardProcessor({ maxCost: 1, client: tollgate, logger: logger(), ...options });
export const finish = (input: number, output: number) => [
  {
    type: 'finish',
    payload: { output: { usage: { inputTokens: input, outputTokens: output, totalTokens: input + output } } },
  },
];
