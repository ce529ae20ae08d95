// A limit against usage, the way the guard decides it (committed + reserved; reached at >=).
import { STEPS, TOKENS } from './api.js';

export const LIMIT_TYPES = [
  { type: 'cost', field: 'maxCost', label: 'cost', names: TOKENS, pick: (p) => p.estimatedCost },
  { type: 'totalTokens', field: 'maxTotalTokens', label: 'total tokens', names: TOKENS, pick: (p) => p.value },
  { type: 'inputTokens', field: 'maxInputTokens', label: 'input tokens', names: STEPS, pick: (p) => p.value },
  {
    type: 'outputTokens',
    field: 'maxOutputTokens',
    label: 'output tokens',
    names: ['mastra_model_total_output_tokens'],
    pick: (p) => p.value,
  },
];

/** The guard's usage view of one scope/window, for one limit type. */
export function usageFor(type, u) {
  if (!u) return 0;
  switch (type) {
    case 'cost':
      return u.estimatedCost + u.reservedCost;
    case 'totalTokens':
      return u.totalTokens + u.reservedInputTokens + u.reservedOutputTokens;
    case 'inputTokens':
      return u.inputTokens + u.reservedInputTokens;
    case 'outputTokens':
      return u.outputTokens + u.reservedOutputTokens;
  }
}

/** ok / soft (at or past warnAtPercent) / hard (at or past the limit). */
export function statusOf(used, limit, warnAtPercent) {
  if (used >= limit) return 'hard';
  if (warnAtPercent !== undefined && used >= (limit * warnAtPercent) / 100) return 'soft';
  return 'ok';
}

export const SCOPE_FILTER = {
  run: 'traceId',
  thread: 'threadId',
  resource: 'resourceId',
  user: 'userId',
  organization: 'organizationId',
  session: 'sessionId',
};
