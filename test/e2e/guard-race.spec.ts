import { randomUUID } from 'node:crypto';
import { call, createProject } from '../support/http';
import { startService, type RunningService } from '../support/service';

/**
 * 64 simulated agents race one resource's $1.00 budget. Each step reserves an upper-bound
 * estimate, then posts its actual usage (here equal to the estimate, so what fits is exact):
 * gpt-4o, 4000 input + 2000 output tokens = $0.03 a step → 33 steps fit ($0.99), the 34th would
 * reach $1.02.
 */
describe('64 agents racing one budget', () => {
  let svc: RunningService;
  // Exactness is the point here, not latency: a loaded machine must not turn queueing into failMode answers.
  beforeAll(async () => (svc = await startService({ DATABASE_POOL_SIZE: '30', GUARD_TIMEOUT_MS: '20000' })));
  afterAll(() => svc.close());

  it('allows exactly the steps that fit and never commits more than the budget', async () => {
    const p = await createProject(svc.url);
    const resourceId = `r-${randomUUID()}`;
    const estimate = { provider: 'openai', model: 'gpt-4o', inputTokens: 4000, maxOutputTokens: 2000 };
    let allowed = 0;
    let denied = 0;
    const agent = async (n: number) => {
      for (let step = 0; ; step++) {
        const stepId = `agent-${n}-step-${step}`;
        const g = await call(svc.url, 'POST', '/v1/guard/check', {
          token: p.key,
          body: {
            context: { resourceId, traceId: `run-${n}` },
            limits: [{ scope: 'resource', window: '24h', maxCost: 1 }],
            estimate,
            reserve: true,
            stepId,
          },
        });
        expect(g.status).toBe(200);
        if (g.body.decision === 'deny') {
          denied += 1;
          return;
        }
        if (!g.body.reservation) throw new Error(`allowed without a reservation: ${JSON.stringify(g.body)}`);
        allowed += 1;
        const res = await call(svc.url, 'POST', '/v1/events', {
          token: p.key,
          body: {
            events: [
              {
                eventId: stepId,
                occurredAt: new Date().toISOString(),
                traceId: `run-${n}`,
                resourceId,
                entityType: 'agent',
                provider: 'openai',
                model: 'gpt-4o',
                usage: { inputTokens: 4000, outputTokens: 2000 },
                reservationId: g.body.reservation.id,
              },
            ],
          },
        });
        expect(res.body.accepted).toBe(1);
      }
    };
    await Promise.all(Array.from({ length: 64 }, (_, n) => agent(n)));

    expect(allowed).toBe(33);
    expect(denied).toBe(64);
    const [row] = await svc.prisma.$queryRawUnsafe<{ cost: bigint; n: bigint }[]>(
      `SELECT sum(cost_micros) AS cost, count(*) AS n FROM events WHERE project_id = $1 AND type = 'StepUsageRecorded'`,
      p.id,
    );
    expect(Number(row.n)).toBe(33);
    expect(Number(row.cost)).toBe(990_000);
    expect(Number(row.cost)).toBeLessThanOrEqual(1_000_000);
    const open = await svc.prisma.reservation.count({ where: { projectId: p.id, status: 'open' } });
    expect(open).toBe(0);
  });
});
