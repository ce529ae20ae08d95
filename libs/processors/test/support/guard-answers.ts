import { RequestContext } from '@mastra/core/request-context';
import type {
  GuardCheckRequest,
  GuardCheckResponse,
  StepUsageEvent,
  TollgateGuardClient,
} from '../../src/tollgate/guard-client';
import type { CostGuardStepArgs } from '../../src/cost-guard/mastra-args';
import { abort } from './messages';

/** A guard answer: allow with nothing found, unless `over` says otherwise. */
export const answer = (over: Partial<GuardCheckResponse> = {}): GuardCheckResponse => ({
  decision: 'allow',
  violations: [],
  warnings: [],
  skipped: [],
  usage: {},
  asOf: new Date().toISOString(),
  ...over,
});

/** An allow holding reservation `id`. */
export const reserved = (id: string, over: Partial<GuardCheckResponse> = {}) =>
  answer({
    reservation: {
      id,
      estimatedCost: 0.001,
      costUnit: 'USD',
      inputTokens: 10,
      outputTokens: 100,
      expiresAt: new Date(Date.now() + 60_000).toISOString(),
    },
    ...over,
  });

/** `processLLMResponse` args of a step that ended for `reason`, having used 10 input and 20 output tokens. */
export const finished = (stepNumber: number, state: Record<string, unknown>, reason: 'tool-calls' | 'stop') => ({
  stepNumber,
  state,
  chunks: [
    {
      type: 'finish',
      payload: { stepResult: { reason }, output: { usage: { inputTokens: 10, outputTokens: 20, totalTokens: 30 } } },
    },
  ],
});

/** A deferred promise, resolved by the spec. */
export function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/**
 * A client that answers checks from a script (then allows), logging every call. Its flushes land
 * at once, or with `holdFlushes` when the spec resolves their `deliveries`.
 */
export function scriptedClient(answers: GuardCheckResponse[], { holdFlushes = false } = {}) {
  const log: string[] = [];
  const checks: GuardCheckRequest[] = [];
  const recorded: StepUsageEvent[] = [];
  const deliveries: Array<ReturnType<typeof deferred>> = [];
  const client: TollgateGuardClient = {
    guard: {
      check: async (request) => {
        checks.push(request);
        log.push(`check ${request.stepId}${request.tentative ? ' (ahead)' : ''}`);
        return answers.shift() ?? answer();
      },
      release: async (id) => void log.push(`release ${id}`),
    },
    events: {
      record: (event) => {
        recorded.push(event);
        log.push(`record ${event.stepIndex}`);
      },
      flush: () => {
        const d = deferred();
        deliveries.push(d);
        log.push('flush');
        if (!holdFlushes) d.resolve();
        return d.promise.then(() => void log.push('landed'));
      },
    },
  };
  return { client, log, checks, recorded, deliveries };
}

/** `processInputStep` args of step `stepNumber` of a run on resource r1, gpt-4o, 500 output tokens at most. */
export function stepArgs(
  state: Record<string, unknown>,
  stepNumber: number,
  messages: CostGuardStepArgs['messages'] = [],
): CostGuardStepArgs {
  const requestContext = new RequestContext();
  requestContext.set('mastra__resourceId', 'r1');
  return {
    messages,
    systemMessages: [],
    abort,
    requestContext,
    state,
    stepNumber,
    steps: [],
    model: { provider: 'openai.chat', modelId: 'gpt-4o' },
    modelSettings: { maxOutputTokens: 500 },
  };
}
