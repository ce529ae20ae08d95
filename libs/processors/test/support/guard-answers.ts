import type { GuardCheckResponse } from '../../src/tollgate/guard-client';

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
