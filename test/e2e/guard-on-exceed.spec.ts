import { randomUUID } from 'node:crypto';
import { call, createProject, type TestProject } from '../support/http';
import { startService, type RunningService } from '../support/service';

// gpt-4o in the catalog: $2.50 / M input, $10 / M output. A step of 1,000 input tokens and up to
// 1,000 output tokens is 2,500 + 10,000 micro-USD = $0.0125 at its worst; against $0.01 with
// nothing spent, the most output tokens that fit are 749 (2,500 + 7,490 = 9,990 < 10,000).
const ESTIMATE = { provider: 'openai', model: 'gpt-4o', inputTokens: 1000, maxOutputTokens: 1000 };

describe('POST /v1/guard/check with onExceed', () => {
  let svc: RunningService;
  let project: TestProject;
  beforeAll(async () => {
    svc = await startService();
    project = await createProject(svc.url);
  });
  afterAll(() => svc.close());

  const check = (body: Record<string, unknown>, p = project) =>
    call(svc.url, 'POST', '/v1/guard/check', { token: p.key, body });
  const step = (resourceId: string, over: Record<string, unknown> = {}) => ({
    context: { resourceId },
    limits: [{ scope: 'resource', window: '24h', maxCost: 0.01 }],
    estimate: ESTIMATE,
    reserve: true,
    stepId: `s-${randomUUID()}`,
    ...over,
  });

  it('given a step whose worst case does not fit, when it asks to shrink, then it is allowed with the most output tokens that fit, reserved at that size', async () => {
    const resourceId = `r-${randomUUID()}`;
    const body = step(resourceId, { onExceed: 'shrink', minOutputTokens: 100 });
    const res = await check(body);
    expect(res.status).toBe(200);
    const limitedBy = [
      {
        scope: 'resource',
        scopeKey: `resource:${resourceId}`,
        window: '24h',
        limitType: 'cost',
        usage: 0.0125,
        limit: 0.01,
        unit: 'USD',
        threshold: 'hard',
        source: 'request',
      },
    ];
    expect(res.body).toMatchObject({
      decision: 'allow',
      violations: [],
      adjust: { maxOutputTokens: 749, requestedMaxOutputTokens: 1000, limitedBy },
    });
    expect(res.body.reservation).toMatchObject({ estimatedCost: 0.00999, inputTokens: 1000, outputTokens: 749 });
    expect(res.body.estimate).toMatchObject({ cost: 0.00999, outputTokens: 749, inputTokens: 1000 });
    expect(res.body.warnings).toEqual([
      { ...limitedBy[0], reason: 'the step was shrunk to 749 output tokens (of 1000) to fit' },
    ]);

    // The next step sees the shrunk reservation: 10 micro-USD are left, not even the prompt fits.
    const next = await check(step(resourceId, { onExceed: 'shrink' }));
    expect(next.body.decision).toBe('deny');
    expect(next.body.violations[0]).toMatchObject({ usage: 0.02249, limit: 0.01 });

    // A retried check (same stepId) gets the same reservation back, and is told to shrink again.
    const retried = await check(body);
    expect(retried.body).toMatchObject({
      decision: 'allow',
      reservation: { id: res.body.reservation.id, outputTokens: 749 },
      adjust: { maxOutputTokens: 749, requestedMaxOutputTokens: 1000, limitedBy: [] },
    });
  });

  it('given no onExceed (or block), then the same step is denied as before', async () => {
    for (const over of [{}, { onExceed: 'block' }]) {
      const res = await check(step(`r-${randomUUID()}`, over));
      expect(res.body).toMatchObject({ decision: 'deny', violations: [{ usage: 0.0125, limit: 0.01 }] });
      expect(res.body.adjust).toBeUndefined();
      expect(res.body.reservation).toBeUndefined();
    }
  });

  it('given a floor above what fits, then the step is denied', async () => {
    const res = await check(step(`r-${randomUUID()}`, { onExceed: 'shrink', minOutputTokens: 750 }));
    expect(res.body.decision).toBe('deny');
  });

  it('rejects a malformed onExceed or floor with the field, storing nothing', async () => {
    const resourceId = `r-${randomUUID()}`;
    const cases: Array<[Record<string, unknown>, string, string]> = [
      [{ onExceed: 'throttle' }, 'onExceed', "must be 'block' or 'shrink'"],
      [{ onExceed: 'shrink', minOutputTokens: 1001 }, 'minOutputTokens', 'must be at most estimate.maxOutputTokens'],
      [{ onExceed: 'shrink', minOutputTokens: 0 }, 'minOutputTokens', 'must be at least 1'],
      [{ onExceed: 'shrink', minOutputTokens: 1.5 }, 'minOutputTokens', 'must be an integer'],
      [
        { onExceed: 'shrink', estimate: undefined, reserve: false },
        'estimate',
        "is required when onExceed is 'shrink'",
      ],
    ];
    for (const [over, field, says] of cases) {
      const res = await check(step(resourceId, over));
      expect([res.status, res.body.field, res.body.message]).toEqual([400, field, `${field} ${says}`]);
    }
    const stored = await svc.prisma.$queryRawUnsafe<{ n: number }[]>(
      `SELECT count(*)::int AS n FROM reservations WHERE project_id = $1 AND scope_keys @> ARRAY[$2]::text[]`,
      project.id,
      `resource:${resourceId}`,
    );
    expect(stored[0]!.n).toBe(0);
  });

  describe('policies', () => {
    const policy = (p: TestProject, name: string, body: Record<string, unknown>) =>
      call(svc.url, 'PUT', `/v1/policies/${name}`, {
        token: p.key,
        body: { scope: 'resource', window: '24h', maxCost: 0.01, ...body },
      });

    it("given a policy with onExceed 'block', then a step that asks to shrink is denied by it", async () => {
      const p = await createProject(svc.url);
      expect((await policy(p, 'hard-stop', { onExceed: 'block' })).body).toMatchObject({
        name: 'hard-stop',
        onExceed: 'block',
      });
      const res = await check({ ...step(`r-${randomUUID()}`, { onExceed: 'shrink' }), limits: [] }, p);
      expect(res.body).toMatchObject({ decision: 'deny', violations: [{ source: 'policy:hard-stop', usage: 0.0125 }] });
    });

    it('given a policy without onExceed, then it follows the request', async () => {
      const p = await createProject(svc.url);
      expect((await policy(p, 'daily', {})).body.onExceed).toBeUndefined();
      const res = await check({ ...step(`r-${randomUUID()}`, { onExceed: 'shrink' }), limits: [] }, p);
      expect(res.body.adjust).toMatchObject({ maxOutputTokens: 749, limitedBy: [{ source: 'policy:daily' }] });
    });

    it("given a policy with onExceed 'shrink', then it shrinks a step whose caller can apply it (it sent a floor), and denies one whose caller cannot", async () => {
      const p = await createProject(svc.url);
      await policy(p, 'soft-cap', { onExceed: 'shrink' });
      expect((await call(svc.url, 'GET', '/v1/policies', { token: p.key })).body.policies).toEqual([
        expect.objectContaining({ name: 'soft-cap', onExceed: 'shrink' }),
      ]);
      const capable = await check({ ...step(`r-${randomUUID()}`, { minOutputTokens: 10 }), limits: [] }, p);
      expect(capable.body.adjust).toMatchObject({ maxOutputTokens: 749, limitedBy: [{ source: 'policy:soft-cap' }] });
      const unaware = await check({ ...step(`r-${randomUUID()}`), limits: [] }, p);
      expect(unaware.body.decision).toBe('deny');
    });

    it('rejects an unknown onExceed on a policy with the field', async () => {
      const p = await createProject(svc.url);
      const res = await policy(p, 'bad', { onExceed: 'degrade' });
      expect([res.status, res.body.field, res.body.message]).toEqual([
        400,
        'onExceed',
        "onExceed must be 'block' or 'shrink'",
      ]);
      expect((await call(svc.url, 'GET', '/v1/policies', { token: p.key })).body.policies).toEqual([]);
    });
  });
});
