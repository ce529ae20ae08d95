import type { StepUsageEvent } from '@tollgate/contracts';
import { EventPartitions, PrismaService } from '@tollgate/database';
import { randomUUID } from 'node:crypto';
import { TEST_DATABASE_URL } from '../../../../test/support/env';
import { insertStepEvents } from '../append-events/insert-step-events.sql';
import type { PricedCost } from '../pricing/price-step';
import { appendRepricedSteps, type CorrectionRow } from './append-repriced-steps.sql';
import { stepCostOf } from './reprice-decision';

const HOUR = 3_600_000;

/** What a correction stores (the StepRepriced event) and what it does to the guard's counters, in exact numbers. */
describe('appendRepricedSteps (real PostgreSQL)', () => {
  const prisma = new PrismaService(TEST_DATABASE_URL, 2);
  const hour = Math.floor(Date.now() / HOUR) * HOUR - 3 * HOUR;
  const at = new Date(hour + 25 * 60_000);
  const day = new Date(Math.floor(hour / (24 * HOUR)) * 24 * HOUR);
  beforeAll(() => new EventPartitions(prisma).ensureAhead(new Date(), 1));
  afterAll(() => prisma.onModuleDestroy());

  const step = (over: Partial<StepUsageEvent> = {}): StepUsageEvent => ({
    eventId: `e-${randomUUID()}`,
    occurredAt: at.toISOString(),
    traceId: 'trace-1',
    runId: 'run-1',
    userId: 'user-1',
    entityType: 'agent',
    entityName: 'planner',
    provider: 'acme',
    model: 'acme-large',
    environment: 'prod',
    labels: { team: 'search' },
    tags: ['beta'],
    usage: { inputTokens: 1000, outputTokens: 200, cacheReadTokens: 300 },
    ...over,
  });
  const ingest = async (projectId: string, e: StepUsageEvent, cost: PricedCost) =>
    (await insertStepEvents(prisma.sql, projectId, [{ event: e, occurredAt: new Date(e.occurredAt), cost }])).get(
      e.eventId,
    )!.position;
  const UNPRICED: PricedCost = { priced: false };
  const cost = (micros: number, currency = 'USD', priceId = 'override:a'): PricedCost => ({
    priced: true,
    costMicros: BigInt(micros),
    inputCostMicros: BigInt(micros - 1000),
    outputCostMicros: 1000n,
    currency,
    source: 'override',
    priceId,
  });
  const correction = (
    e: StepUsageEvent,
    position: string,
    old: PricedCost,
    now: PricedCost,
    sequence = 1,
  ): CorrectionRow => ({
    eventId: `tg:reprice:${e.eventId}:${sequence}`,
    stepEventId: e.eventId,
    stepPosition: position,
    occurredAt: at,
    sequence,
    old: stepCostOf(old),
    new: stepCostOf(now),
  });
  /** The non-zero counters, as `scope:id:granularity:bucket:unit` → [input, output, cost, unpriced, events]. */
  const counters = async (projectId: string) =>
    Object.fromEntries(
      (
        await prisma.sql.query<Record<string, string | Date>>(
          `SELECT scope, scope_id, granularity::text AS g, bucket_start, cost_unit, input_tokens::text, output_tokens::text,
                  cost_micros::text, unpriced_events::text, events::text
             FROM usage_counters WHERE project_id = $1 AND (input_tokens, output_tokens, cost_micros, unpriced_events, events) <> (0, 0, 0, 0, 0)`,
          projectId,
        )
      ).map((r) => [
        `${r.scope}:${r.scope_id}:${r.g}:${(r.bucket_start as Date).toISOString()}:${r.cost_unit}`,
        [r.input_tokens, r.output_tokens, r.cost_micros, r.unpriced_events, r.events].map(Number),
      ]),
    );
  const keys = (unit: string) => [
    `run:run-1:r:1970-01-01T00:00:00.000Z:${unit}`,
    `run:trace-1:r:1970-01-01T00:00:00.000Z:${unit}`,
    `user:user-1:d:${day.toISOString()}:${unit}`,
    `user:user-1:h:${new Date(hour).toISOString()}:${unit}`,
  ];
  const all = (unit: string, v: number[]) => Object.fromEntries(keys(unit).map((k) => [k, v]));

  it('stores the correction filed like its step, with its new cost and what it replaced', async () => {
    const project = `p-${randomUUID()}`;
    const e = step();
    const position = await ingest(project, e, cost(3600));
    const c = correction(e, position, cost(3600), cost(5000, 'EUR', 'override:b'));
    const appended = await appendRepricedSteps(prisma.sql, project, [c]);
    expect([...appended.keys()]).toEqual([c.eventId]);
    const rows = await prisma.sql.query<Record<string, unknown>>(
      `SELECT position::text, event_id, occurred_at, trace_id, run_id, user_id, thread_id, entity_type, entity_name, provider, model, environment,
              input_tokens::int, output_tokens::int, cache_read_tokens::int, labels, tags, cost_micros::int, input_cost_micros::int,
              output_cost_micros::int, cost_unit, cost_source, price_id, unpriced, data
         FROM events WHERE project_id = $1 AND type = 'StepRepriced'`,
      project,
    );
    expect(rows).toEqual([
      {
        position: appended.get(c.eventId),
        event_id: c.eventId,
        occurred_at: at,
        trace_id: 'trace-1',
        run_id: 'run-1',
        user_id: 'user-1',
        thread_id: null,
        entity_type: 'agent',
        entity_name: 'planner',
        provider: 'acme',
        model: 'acme-large',
        environment: 'prod',
        input_tokens: 1000,
        output_tokens: 200,
        cache_read_tokens: 300,
        labels: { team: 'search' },
        tags: ['beta'],
        cost_micros: 5000,
        input_cost_micros: 4000,
        output_cost_micros: 1000,
        cost_unit: 'EUR',
        cost_source: 'override',
        price_id: 'override:b',
        unpriced: false,
        data: {
          stepEventId: e.eventId,
          stepPosition: position,
          sequence: 1,
          old: {
            costMicros: 3600,
            inputCostMicros: 2600,
            outputCostMicros: 1000,
            costUnit: 'USD',
            priceId: 'override:a',
            source: 'override',
          },
          new: {
            costMicros: 5000,
            inputCostMicros: 4000,
            outputCostMicros: 1000,
            costUnit: 'EUR',
            priceId: 'override:b',
            source: 'override',
          },
        },
      },
    ]);
  });

  it('moves the step from its old unit to its new one in every hour, day and run counter', async () => {
    const project = `p-${randomUUID()}`;
    const e = step();
    const position = await ingest(project, e, cost(3600));
    expect(await counters(project)).toEqual(all('USD', [1000, 200, 3600, 0, 1]));
    await appendRepricedSteps(prisma.sql, project, [correction(e, position, cost(3600), cost(3000, 'EUR'))]);
    expect(await counters(project)).toEqual(all('EUR', [1000, 200, 3000, 0, 1]));
  });

  it('adds the difference in the same unit, and counts an unpriced step priced (and back) as such', async () => {
    const project = `p-${randomUUID()}`;
    const a = step();
    const b = step();
    const pa = await ingest(project, a, cost(3600));
    const pb = await ingest(project, b, UNPRICED);
    expect(await counters(project)).toEqual({
      ...all('USD', [1000, 200, 3600, 0, 1]),
      ...all('', [1000, 200, 0, 1, 1]),
    });
    // Both in one call: a costs more, b gets a price.
    await appendRepricedSteps(prisma.sql, project, [
      correction(a, pa, cost(3600), cost(5000)),
      correction(b, pb, UNPRICED, cost(2000)),
    ]);
    expect(await counters(project)).toEqual(all('USD', [2000, 400, 7000, 0, 2]));
    // a loses its price.
    await appendRepricedSteps(prisma.sql, project, [correction(a, pa, cost(5000), UNPRICED, 2)]);
    expect(await counters(project)).toEqual({
      ...all('USD', [1000, 200, 2000, 0, 1]),
      ...all('', [1000, 200, 0, 1, 1]),
    });
  });

  it('appends and applies a correction once: the same id again changes nothing', async () => {
    const project = `p-${randomUUID()}`;
    const e = step();
    const position = await ingest(project, e, cost(3600));
    const c = correction(e, position, cost(3600), cost(5000));
    expect((await appendRepricedSteps(prisma.sql, project, [c])).size).toBe(1);
    expect((await appendRepricedSteps(prisma.sql, project, [c])).size).toBe(0);
    expect(await counters(project)).toEqual(all('USD', [1000, 200, 5000, 0, 1]));
    const [{ n }] = await prisma.sql.query<{ n: string }>(
      `SELECT count(*) AS n FROM events WHERE project_id = $1 AND type = 'StepRepriced'`,
      project,
    );
    expect(Number(n)).toBe(1);
  });

  it('corrects only a step of its own project, and nothing for an empty list', async () => {
    const project = `p-${randomUUID()}`;
    const other = `p-${randomUUID()}`;
    const e = step();
    const position = await ingest(other, e, cost(3600));
    expect(
      (await appendRepricedSteps(prisma.sql, project, [correction(e, position, cost(3600), cost(5000))])).size,
    ).toBe(0);
    expect(await counters(project)).toEqual({});
    expect(await counters(other)).toEqual(all('USD', [1000, 200, 3600, 0, 1]));
    expect(await appendRepricedSteps(prisma.sql, project, [])).toEqual(new Map());
  });
});
