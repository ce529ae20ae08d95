import { randomUUID } from 'node:crypto';
import { call, createProject, type TestProject } from '../support/http';
import { startService, type RunningService } from '../support/service';

/**
 * The most common concurrency there is: many agents, each its own run, on budgets they share,
 * through two API replicas. 96 agents on 3 resources under one organization reserve against both
 * budgets before every step, then settle the step (its actual usage at or below the estimate) or
 * release it, until both budgets deny. Denials fire `BudgetExhausted` alerts, after which ingest
 * decides alerts in its own transaction: a guard batch that wrote an alert state before its hold
 * totals deadlocked with those settlements (500s, and once a reservation held that no caller got).
 */
const AGENTS = 96;
const RESOURCES = 3;
const ROUNDS = 3;
const ESTIMATE = { provider: 'openai', model: 'gpt-4o', inputTokens: 400, maxOutputTokens: 200 };
// gpt-4o: 400 input × $2.50/M + 200 output × $10/M = $0.003 a step at most.
const RESOURCE_LIMIT = 0.3;
const ORGANIZATION_LIMIT = 0.75;

describe('a storm of agents with their own runs on shared budgets, across two replicas', () => {
  let services: RunningService[];
  beforeAll(async () => {
    // Exactness and status codes are the point here: a loaded machine must not turn queueing into failMode answers.
    const env = { DATABASE_POOL_SIZE: '20', GUARD_TIMEOUT_MS: '20000' };
    services = [await startService(env), await startService(env)];
  });
  afterAll(() => Promise.all(services.map((s) => s.close())));

  it('never answers 5xx but busy, never overspends, and leaves no reservation no caller received', async () => {
    const p = await createProject(services[0].url);
    const statuses = new Map<number, number>();
    const received = new Set<string>();
    for (let round = 0; round < ROUNDS; round++) {
      const organizationId = `org-${randomUUID()}`;
      const resources = Array.from({ length: RESOURCES }, () => `res-${randomUUID()}`);
      await Promise.all(
        Array.from({ length: AGENTS }, (_, n) =>
          agent(p, services[n % services.length].url, {
            runId: `run-${round}-${n}-${randomUUID()}`,
            resourceId: resources[n % RESOURCES],
            organizationId,
            settleEvery: 1 + (n % 3),
            statuses,
            received,
          }),
        ),
      );
      const spent = (column: string, id: string) =>
        services[0].prisma.sql
          .query<{ micros: string | null }>(
            `SELECT sum(cost_micros)::text AS micros FROM events
              WHERE project_id = $1 AND type = 'StepUsageRecorded' AND ${column} = $2`,
            p.id,
            id,
          )
          .then(([r]) => Number(r.micros ?? 0));
      expect(await spent('organization_id', organizationId)).toBeLessThanOrEqual(ORGANIZATION_LIMIT * 1e6);
      for (const resourceId of resources)
        expect(await spent('resource_id', resourceId)).toBeLessThanOrEqual(RESOURCE_LIMIT * 1e6);
    }
    const codes = Object.fromEntries(statuses);
    expect(Object.keys(codes).filter((c) => Number(c) >= 500 && c !== '503')).toEqual([]);
    expect(codes[200]).toBeGreaterThan(AGENTS * ROUNDS);
    const stored = await services[0].prisma.sql.query<{ id: string }>(
      'SELECT id FROM reservations WHERE project_id = $1',
      p.id,
    );
    expect(stored.filter((r) => !received.has(r.id))).toEqual([]);
  }, 300_000);
});

interface Agent {
  runId: string;
  resourceId: string;
  organizationId: string;
  /** Every settleEvery-th step is released instead of settled. */
  settleEvery: number;
  statuses: Map<number, number>;
  received: Set<string>;
}

async function agent(p: TestProject, url: string, a: Agent): Promise<void> {
  const count = (status: number) => a.statuses.set(status, (a.statuses.get(status) ?? 0) + 1);
  const context = { traceId: a.runId, resourceId: a.resourceId, organizationId: a.organizationId };
  for (let step = 0; step < 200; step++) {
    const stepId = `${a.runId}-${step}`;
    const g = await call(url, 'POST', '/v1/guard/check', {
      token: p.key,
      body: {
        context,
        limits: [
          { scope: 'resource', window: '24h', maxCost: RESOURCE_LIMIT },
          { scope: 'organization', window: '24h', maxCost: ORGANIZATION_LIMIT },
        ],
        estimate: ESTIMATE,
        reserve: true,
        stepId,
      },
    });
    count(g.status);
    if (g.status === 503 || (g.status === 200 && g.body.reason === 'busy')) continue;
    if (g.status !== 200) return;
    if (g.body.decision === 'deny') return;
    const reservation = g.body.reservation as { id: string };
    a.received.add(reservation.id);
    const settled = step % a.settleEvery === 0;
    const write = settled
      ? call(url, 'POST', '/v1/events', {
          token: p.key,
          body: {
            events: [
              {
                eventId: stepId,
                occurredAt: new Date().toISOString(),
                ...context,
                entityType: 'agent',
                provider: 'openai',
                model: 'gpt-4o',
                // At or below the estimate: 400 in, 100–200 out.
                usage: { inputTokens: 400, outputTokens: 100 + (step % 3) * 50 },
                reservationId: reservation.id,
              },
            ],
          },
        })
      : call(url, 'POST', `/v1/guard/reservations/${reservation.id}/release`, { token: p.key, body: {} });
    count((await write).status);
  }
}
