import { Controller, Get, Param, Query, UseGuards } from '@nestjs/common';
import { idSchema, isoInstantSchema, shortText } from '@tollgate/contracts';
import { AuthGuard, CurrentPrincipal, Documented, RequireScope, ZodPipe, type Principal } from '@tollgate/platform';
import { z } from 'zod';
import type { StepCursor, StepFilter } from './read-steps.sql';
import { StepsReader } from './steps-reader';
import { latencyResponse, runResponse, stepsResponse } from './steps.schemas';

/** The cursor is opaque to clients: base64url of `<occurredAt epoch ms>.<log position>`. */
export const encodeCursor = (c: StepCursor) =>
  Buffer.from(`${c.occurredAt.getTime()}.${c.position}`).toString('base64url');

const cursorSchema = z
  .string({ error: 'must be a cursor this route returned (nextCursor)' })
  .max(64, 'must be a cursor this route returned (nextCursor)')
  .transform((s, ctx): StepCursor => {
    const m = /^(\d{1,15})\.(\d{1,19})$/.exec(
      /^[A-Za-z0-9_-]+$/.test(s) ? Buffer.from(s, 'base64url').toString('latin1') : '',
    );
    if (!m || BigInt(m[2]) > 2n ** 63n - 1n) {
      ctx.addIssue({ code: 'custom', message: 'must be a cursor this route returned (nextCursor)' });
      return z.NEVER;
    }
    return { occurredAt: new Date(Number(m[1])), position: BigInt(m[2]) };
  });

const instant = isoInstantSchema.transform((s) => new Date(s));
const boolText = z.enum(['true', 'false'], { error: 'must be true or false' }).transform((v) => v === 'true');
const limit = (max: number, dflt: number) =>
  z.coerce
    .number({ error: 'must be a number' })
    .int('must be an integer')
    .min(1, 'must be at least 1')
    .max(max, `must be at most ${max}`)
    .default(dflt);

const filterFields = {
  from: instant.optional(),
  to: instant.optional(),
  provider: shortText(128).optional(),
  model: shortText(256).optional(),
  entityName: idSchema.optional(),
  resourceId: idSchema.optional(),
  userId: idSchema.optional(),
  threadId: idSchema.optional(),
  traceId: idSchema.optional(),
  organizationId: idSchema.optional(),
  sessionId: idSchema.optional(),
  environment: shortText(128).optional(),
  tag: shortText(128).optional(),
};
const fromBeforeTo = [
  (q: { from?: Date; to?: Date }) => !q.from || !q.to || q.from <= q.to,
  { message: 'must not be before from', path: ['to'] as PropertyKey[] },
] as const;

export const stepsQuery = z
  .strictObject({
    ...filterFields,
    unpriced: boolText.optional(),
    cursor: cursorSchema.optional(),
    limit: limit(200, 50),
  })
  .refine(...fromBeforeTo);
export const latencyQuery = z.strictObject({ ...filterFields, limit: limit(100, 20) }).refine(...fromBeforeTo);
const runQuery = z.strictObject({ limit: limit(1000, 500) });

const filterOf = ({
  limit: _limit,
  cursor: _cursor,
  ...filter
}: z.infer<typeof latencyQuery> & { unpriced?: boolean; cursor?: StepCursor }): StepFilter => filter;

/**
 * The ledger itself, read-only: step events with their cost and reservation (newest first, paged
 * by cursor), a run's steps and guard events in order, and durationMs percentiles per model.
 */
@Controller('v1')
@UseGuards(AuthGuard)
export class StepsController {
  constructor(private readonly reader: StepsReader) {}

  @Get('steps')
  @RequireScope('read')
  @Documented({
    summary:
      'Step events, newest first, paged by cursor: scope ids, model, tokens, latency, cost now (after reprices), reservation and its settlement',
    tag: 'events',
    auth: 'read',
    query: stepsQuery,
    response: stepsResponse,
    responseDescription: '{ steps, nextCursor }: pass nextCursor as cursor for the next page; null on the last one',
  })
  async steps(@CurrentPrincipal() principal: Principal, @Query(new ZodPipe(stepsQuery)) q: z.infer<typeof stepsQuery>) {
    const { steps, next } = await this.reader.steps(principal.projectId, filterOf(q), q.limit, q.cursor);
    return { steps, nextCursor: next ? encodeCursor(next) : null };
  }

  @Get('steps/latency')
  @RequireScope('read')
  @Documented({
    summary:
      'durationMs p50/p95/max per provider and model over the whole range (the percentile rule of the metric routes), slowest first',
    tag: 'events',
    auth: 'read',
    query: latencyQuery,
    response: latencyResponse,
  })
  async latency(
    @CurrentPrincipal() principal: Principal,
    @Query(new ZodPipe(latencyQuery)) q: z.infer<typeof latencyQuery>,
  ) {
    return { models: await this.reader.latency(principal.projectId, filterOf(q), q.limit) };
  }

  @Get('runs/:traceId')
  @RequireScope('read')
  @Documented({
    summary:
      "A run (traceId): its steps oldest first with their reservations, and the guard's reservations and denials/warnings between them",
    tag: 'events',
    auth: 'read',
    query: runQuery,
    response: runResponse,
  })
  async run(
    @CurrentPrincipal() principal: Principal,
    @Param('traceId', new ZodPipe(idSchema, 'traceId')) traceId: string,
    @Query(new ZodPipe(runQuery)) q: z.infer<typeof runQuery>,
  ) {
    return { traceId, ...(await this.reader.run(principal.projectId, traceId, q.limit)) };
  }
}
