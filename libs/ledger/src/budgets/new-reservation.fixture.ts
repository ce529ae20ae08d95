import type { NewReservation } from './guard-decision';

/**
 * A reservation as the guard makes one, for specs: a gpt-4o step of 1,000 input and 200 output
 * tokens ($0.0045) held on `resource:r1` for a minute; `over` changes what a spec is about.
 */
export function newReservation(id: string, over: Partial<NewReservation> = {}): NewReservation {
  const scopeKeys = over.scopeKeys ?? ['resource:r1'];
  return {
    id,
    stepId: `step-${id}`,
    scopeKeys,
    contextKeys: [...scopeKeys, 'run:t1'],
    costMicros: 4500,
    costUnit: 'USD',
    inputTokens: 1000,
    outputTokens: 200,
    rawInputTokens: 1000,
    provider: 'openai',
    model: 'gpt-4o',
    createdAt: new Date(),
    expiresAt: new Date(Date.now() + 60_000),
    ...over,
  };
}
