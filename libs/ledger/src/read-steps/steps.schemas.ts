import { z } from 'zod';

// What GET /v1/steps, /v1/steps/latency and /v1/runs/:traceId answer, for the OpenAPI document.
const money = z.number().nullable();

export const stepReservationResponse = z
  .object({
    id: z.string(),
    status: z.enum(['open', 'settled', 'released', 'lapsed']).describe('Now'),
    reservedAt: z.string(),
    expiresAt: z.string(),
    closedAt: z.string().nullable().describe('When it was settled, released or lapsed'),
    reserved: z.object({
      cost: money.describe('Null when the estimate had no price'),
      costUnit: z.string().nullable(),
      inputTokens: z.number(),
      outputTokens: z.number(),
    }),
    settledByEventId: z
      .string()
      .nullable()
      .describe('The step event whose usage replaced the estimate (the first that named it)'),
    exceeded: z
      .boolean()
      .describe("This step's actual usage passed what was reserved (tokens, or cost in the same unit)"),
  })
  .nullable();

export const stepResponse = z.object({
  eventId: z.string(),
  occurredAt: z.string(),
  recordedAt: z.string(),
  scopes: z
    .record(z.string(), z.string())
    .describe('traceId, runId, spanId, threadId, resourceId, userId, organizationId, sessionId: those the step has'),
  entityType: z.string().nullable(),
  entityName: z.string().nullable(),
  provider: z.string().nullable(),
  model: z.string().nullable(),
  environment: z.string().nullable(),
  serviceName: z.string().nullable(),
  tags: z.array(z.string()),
  usage: z
    .object({
      inputTokens: z.number(),
      cacheReadTokens: z.number(),
      cacheWriteTokens: z.number(),
      cacheWrite1hTokens: z.number(),
      outputTokens: z.number(),
      reasoningTokens: z.number(),
      totalTokens: z.number(),
    })
    .describe(
      'inputTokens includes cacheReadTokens and cacheWriteTokens; cacheWriteTokens includes cacheWrite1hTokens (1-hour cache writes); outputTokens includes reasoningTokens',
    ),
  durationMs: z.number().nullable(),
  finishReason: z.string().nullable(),
  stepIndex: z.number().nullable(),
  cost: money.describe("The step's cost now: its own, or its latest reprice correction's; null when it has no price"),
  costUnit: z.string().nullable(),
  costSource: z.string().nullable(),
  repriced: z.boolean(),
  unpriced: z.boolean(),
  reservation: stepReservationResponse,
});

export const stepsResponse = z.object({
  steps: z.array(stepResponse).describe('Newest first (occurredAt, then log position)'),
  nextCursor: z.string().nullable().describe('Pass as cursor for the next (older) page; null on the last one'),
});

export const latencyResponse = z.object({
  models: z.array(
    z.object({
      provider: z.string().nullable(),
      model: z.string().nullable(),
      steps: z.number().describe('Steps that reported durationMs'),
      p50: z.number(),
      p95: z.number(),
      max: z.number(),
    }),
  ),
});

export const runResponse = z.object({
  traceId: z.string(),
  steps: z.array(stepResponse).describe('Oldest first'),
  guard: z
    .array(
      z.object({
        kind: z.enum(['decision', 'reservation']),
        eventId: z.string(),
        occurredAt: z.string(),
        entityName: z.string().nullable(),
        stepId: z.string().nullable(),
        decision: z.enum(['allow', 'deny']).optional(),
        violations: z.array(z.unknown()).optional(),
        warnings: z.array(z.unknown()).optional(),
        reservation: z
          .object({
            id: z.string(),
            cost: money,
            costUnit: z.string().nullable(),
            inputTokens: z.number(),
            outputTokens: z.number(),
            scopeKeys: z.array(z.string()),
            expiresAt: z.string(),
          })
          .optional(),
      }),
    )
    .describe('Reservations (BudgetReserved) and denials or warnings (GuardDecided), oldest first'),
  truncated: z.boolean().describe('A list was cut at limit'),
});
