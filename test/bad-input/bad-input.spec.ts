import { randomUUID } from 'node:crypto';
import { TEST_ADMIN_TOKEN } from '../support/env';
import { call, createProject, type TestProject } from '../support/http';
import { startService, type RunningService } from '../support/service';
import { generate, type BadRequest, type EndpointSpec } from './generate';

/** What the service answered to one malformed request, as the suite judges it. */
type Outcome = '4xx' | '200 all rejected' | '5xx' | 'accepted';

const TABLES = ['events', 'event_ids', 'reservations', 'policies', 'price_overrides', 'projects', 'api_keys'];

async function snapshot(svc: RunningService): Promise<Record<string, number>> {
  const parts = TABLES.map((t) => `(SELECT count(*) FROM ${t})::int AS "${t}"`);
  parts.push(`(SELECT count(*) FROM reservations WHERE status = 'open')::int AS "open reservations"`);
  parts.push(`(SELECT coalesce(max(position), 0) FROM events)::text AS "last event position"`);
  // A refused settings change changes nothing either.
  parts.push(`(SELECT md5(string_agg(concat_ws('|', id, unpriced_policy, unpriced_fallback::text, cost_unit, exchange_rates::text), ',' ORDER BY id)) FROM projects) AS "project settings"`);
  const [row] = await svc.prisma.$queryRawUnsafe<Record<string, number>[]>(`SELECT ${parts.join(', ')}`);
  return row;
}

function specs(project: TestProject, reservationId: string): EndpointSpec[] {
  const now = new Date().toISOString();
  return [
    {
      name: 'POST /v1/events',
      method: 'POST',
      url: () => '/v1/events',
      params: {},
      idParams: [],
      body: {
        events: [
          {
            eventId: `bad-input-${randomUUID()}`,
            occurredAt: now,
            traceId: 'trace-1',
            spanId: 'span-1',
            runId: 'run-1',
            threadId: 'thread-1',
            resourceId: 'resource-1',
            userId: 'user-1',
            organizationId: 'org-1',
            sessionId: 'session-1',
            entityType: 'agent',
            entityName: 'support-agent',
            provider: 'openai',
            model: 'gpt-4o',
            usage: { inputTokens: 1000, outputTokens: 200, cacheReadTokens: 100, cacheWriteTokens: 100, reasoningTokens: 50, audioInputTokens: 10, imageInputTokens: 10 },
            cost: { amount: 0.01, currency: 'USD', source: 'provider' },
            durationMs: 1200,
            finishReason: 'stop',
            stepIndex: 3,
            reservationId: 'res-unknown',
            labels: { team: 'core' },
            tags: ['prod'],
            environment: 'production',
            serviceName: 'agents',
          },
        ],
      },
      required: [['events'], ['events', 0, 'eventId'], ['events', 0, 'occurredAt'], ['events', 0, 'traceId'], ['events', 0, 'entityType'], ['events', 0, 'provider'], ['events', 0, 'model'], ['events', 0, 'usage'], ['events', 0, 'usage', 'inputTokens'], ['events', 0, 'usage', 'outputTokens']],
      reals: [['events', 0, 'cost', 'amount'], ['events', 0, 'durationMs']],
      timestamps: [['events', 0, 'occurredAt']],
      records: [['events', 0, 'labels']],
      freeText: ['eventId', 'traceId', 'spanId', 'runId', 'threadId', 'resourceId', 'userId', 'organizationId', 'sessionId', 'entityType', 'entityName', 'provider', 'model', 'finishReason', 'reservationId', 'environment', 'serviceName']
        .map((k) => ['events', 0, k] as (string | number)[])
        .concat([['events', 0, 'cost', 'source'], ['events', 0, 'labels', 'team'], ['events', 0, 'tags', 0]]),
    },
    {
      name: 'POST /v1/guard/check',
      method: 'POST',
      url: () => '/v1/guard/check',
      params: {},
      idParams: [],
      body: {
        context: { traceId: 'trace-1', runId: 'run-1', threadId: 'thread-1', resourceId: 'resource-1', userId: 'user-1', organizationId: 'org-1', sessionId: 'session-1', entityType: 'agent', entityName: 'support-agent' },
        limits: [{ scope: 'resource', window: '24h', maxCost: 5, costUnit: 'USD', maxTotalTokens: 100000, maxInputTokens: 90000, maxOutputTokens: 10000, warnAtPercent: 80 }],
        estimate: { provider: 'openai', model: 'gpt-4o', inputTokens: 1000, maxOutputTokens: 500 },
        reserve: true,
        stepId: 'step-1',
        failMode: 'open',
        dryRun: false,
      },
      required: [['context'], ['limits', 0, 'scope'], ['estimate'], ['stepId'], ['estimate', 'provider'], ['estimate', 'model'], ['estimate', 'inputTokens'], ['estimate', 'maxOutputTokens']],
      reals: [['limits', 0, 'maxCost'], ['limits', 0, 'warnAtPercent']],
      timestamps: [],
      freeText: [...['traceId', 'runId', 'threadId', 'resourceId', 'userId', 'organizationId', 'sessionId', 'entityType', 'entityName'].map((k) => ['context', k]), ['estimate', 'provider'], ['estimate', 'model'], ['stepId']],
    },
    {
      name: 'PUT /v1/policies/:name',
      method: 'PUT',
      url: (p) => `/v1/policies/${p.name}`,
      params: { name: 'bad-input-policy' },
      idParams: ['name'],
      body: { scope: 'resource', window: '24h', maxCost: 5, maxTotalTokens: 100000, maxInputTokens: 90000, maxOutputTokens: 10000, warnAtPercent: 80, strategy: 'block', entityName: 'support-agent' },
      required: [['scope']],
      reals: [['maxCost'], ['warnAtPercent']],
      timestamps: [],
      freeText: [['entityName']],
    },
    {
      name: 'PUT /v1/prices/:provider/:model',
      method: 'PUT',
      url: (p) => `/v1/prices/${p.provider}/${p.model}`,
      params: { provider: 'acme', model: 'acme-large' },
      idParams: ['provider', 'model'],
      body: { effectiveFrom: '2026-01-01T00:00:00Z', currency: 'USD', inputPerMillion: 2.5, outputPerMillion: 10, cacheReadPerMillion: 1.25, cacheWritePerMillion: 3 },
      required: [['inputPerMillion'], ['outputPerMillion']],
      reals: [['inputPerMillion'], ['outputPerMillion'], ['cacheReadPerMillion'], ['cacheWritePerMillion']],
      timestamps: [['effectiveFrom']],
      freeText: [],
    },
    {
      name: 'POST /v1/admin/projects',
      method: 'POST',
      url: () => '/v1/admin/projects',
      params: {},
      idParams: [],
      body: { name: 'bad input project', unpricedPolicy: 'deny', id: `bad-input-${randomUUID().slice(0, 8)}` },
      required: [['name']],
      reals: [],
      timestamps: [],
      freeText: [['name']],
    },
    {
      name: 'PATCH /v1/admin/projects/:id',
      method: 'PATCH',
      url: (p) => `/v1/admin/projects/${p.projectId}`,
      params: { projectId: project.id },
      idParams: ['projectId'],
      body: { unpricedPolicy: 'fallback', unpricedFallback: { inputPerMillion: 3, outputPerMillion: 15, currency: 'USD' }, costUnit: 'USD', exchangeRates: { EUR: 1.1, JPY: 0.0067 } },
      required: [],
      reals: [['unpricedFallback', 'inputPerMillion'], ['unpricedFallback', 'outputPerMillion'], ['exchangeRates', 'EUR'], ['exchangeRates', 'JPY']],
      timestamps: [],
      freeText: [],
    },
    {
      name: 'POST /v1/admin/projects/:id/keys',
      method: 'POST',
      url: (p) => `/v1/admin/projects/${p.projectId}/keys`,
      params: { projectId: project.id },
      idParams: ['projectId'],
      body: { scopes: ['ingest', 'read'], name: 'bad input key' },
      required: [['scopes']],
      reals: [],
      timestamps: [],
      freeText: [['name']],
    },
    {
      name: 'POST /v1/guard/reservations/:id/release',
      method: 'POST',
      url: (p) => `/v1/guard/reservations/${p.id}/release`,
      params: { id: reservationId },
      idParams: ['id'],
      body: {},
      required: [],
      reals: [],
      timestamps: [],
      freeText: [],
    },
  ];
}

async function send(base: string, c: BadRequest, token: string): Promise<{ status: number; body: any }> {
  const headers: Record<string, string> = { authorization: `Bearer ${token}` };
  if (c.contentType !== undefined) headers['content-type'] = c.contentType;
  // A Buffer body: fetch adds no content type of its own, and sends the bytes as they are.
  const res = await fetch(base + c.path, { method: c.method, headers, body: c.body === undefined ? undefined : Buffer.from(c.body) });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    /* keep the text */
  }
  return { status: res.status, body };
}

describe('bad input: every malformed request is refused with its field, nothing is stored, the service stays up', () => {
  let svc: RunningService;
  let project: TestProject;

  beforeAll(async () => {
    svc = await startService({ RATE_LIMIT_PER_KEY_PER_SECOND: '0' });
    project = await createProject(svc.url);
  });
  afterAll(() => svc.close());

  it('refuses at least 1,000 malformed requests per endpoint', async () => {
    const reserved = await call(svc.url, 'POST', '/v1/guard/check', {
      token: project.key,
      body: { context: { resourceId: 'r' }, estimate: { provider: 'openai', model: 'gpt-4o', inputTokens: 10, maxOutputTokens: 10 }, reserve: true, stepId: 'bad-input-reservation' },
    });
    expect(reserved.body.reservation?.id).toBeDefined();
    const cases = specs(project, reserved.body.reservation.id).flatMap(generate);

    const before = await snapshot(svc);
    const tally = new Map<string, Map<string, Record<Outcome, number>>>();
    const problems: string[] = [];
    let healthChecks = 0;
    let next = 0;
    const worker = async () => {
      while (next < cases.length) {
        const i = next++;
        const c = cases[i];
        const token = / \/v1\/admin/.test(c.endpoint) ? TEST_ADMIN_TOKEN : project.key;
        const res = await send(svc.url, c, token);
        let outcome: Outcome;
        let field: string | undefined;
        if (res.status >= 500) outcome = '5xx';
        else if (res.status >= 400) {
          outcome = '4xx';
          field = res.body?.field;
          if (typeof field !== 'string' || !field || typeof res.body?.message !== 'string') problems.push(`${c.endpoint} ${c.category} ${c.what}: ${res.status} without a field: ${JSON.stringify(res.body).slice(0, 200)}`);
        } else if (c.endpoint === 'POST /v1/events' && res.status === 200 && res.body.accepted === 0 && res.body.duplicates === 0 && res.body.results.every((r: any) => r.status === 'rejected' && r.field)) {
          outcome = '200 all rejected';
          field = res.body.results[0].field;
        } else outcome = 'accepted';
        if (outcome === '5xx' || outcome === 'accepted') problems.push(`${c.endpoint} ${c.category} ${c.what}: ${outcome} ${res.status} ${JSON.stringify(res.body).slice(0, 200)}`);
        else if (c.field && field !== c.field) problems.push(`${c.endpoint} ${c.category} ${c.what}: named ${field}, expected ${c.field} (${JSON.stringify(res.body).slice(0, 160)})`);
        const byCategory = tally.get(c.endpoint) ?? new Map();
        tally.set(c.endpoint, byCategory);
        const counts = byCategory.get(c.category) ?? { '4xx': 0, '200 all rejected': 0, '5xx': 0, accepted: 0 };
        byCategory.set(c.category, counts);
        counts[outcome]++;
        if (i % 500 === 0) {
          healthChecks++;
          const ready = await call(svc.url, 'GET', '/health/ready');
          if (ready.status !== 200) problems.push(`not ready after case ${i}: ${JSON.stringify(ready.body)}`);
        }
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
    const after = await snapshot(svc);
    const ready = await call(svc.url, 'GET', '/health/ready');

    const lines = ['', 'endpoint | category | requests | 4xx | 200 all rejected | 5xx | accepted'];
    for (const [endpoint, byCategory] of tally) {
      let total = 0;
      for (const [category, n] of byCategory) {
        const sum = n['4xx'] + n['200 all rejected'] + n['5xx'] + n.accepted;
        total += sum;
        lines.push(`${endpoint} | ${category} | ${sum} | ${n['4xx']} | ${n['200 all rejected']} | ${n['5xx']} | ${n.accepted}`);
      }
      lines.push(`${endpoint} | TOTAL | ${total}`);
    }
    lines.push(`requests: ${cases.length}; readiness checks during the run: ${healthChecks}, all ok: ${!problems.some((p) => p.startsWith('not ready'))}; ready at the end: ${ready.status}`);
    lines.push(`rows before: ${JSON.stringify(before)}`, `rows after:  ${JSON.stringify(after)}`);
    if (problems.length) lines.push(`${problems.length} problems:`, ...problems.slice(0, 60));
    process.stdout.write(lines.join('\n') + '\n');

    for (const [, byCategory] of tally) {
      const total = [...byCategory.values()].reduce((n, c) => n + c['4xx'] + c['200 all rejected'] + c['5xx'] + c.accepted, 0);
      expect(total).toBeGreaterThanOrEqual(1000);
    }
    expect(tally.size).toBe(8);
    expect(problems).toEqual([]);
    expect(after).toEqual(before);
    expect(ready.status).toBe(200);
  }, 600_000);

  it('stores injection strings in free-text fields verbatim, as data', async () => {
    const { INJECTIONS } = await import('./generate');
    const events = INJECTIONS.map((s, i) => ({ eventId: `inj-${i}-${randomUUID()}`, occurredAt: new Date().toISOString(), traceId: s, resourceId: s, userId: s, entityType: 'agent', entityName: s, provider: s, model: s, labels: { [s]: s }, tags: [s], usage: { inputTokens: 1, outputTokens: 1 } }));
    const res = await call(svc.url, 'POST', '/v1/events', { token: project.key, body: { events } });
    expect(res.body.accepted).toBe(INJECTIONS.length);
    const rows = await svc.prisma.$queryRawUnsafe<any[]>(`SELECT event_id, trace_id, resource_id, user_id, entity_name, provider, model, data FROM events WHERE project_id = $1 AND event_id LIKE 'inj-%' ORDER BY event_id`, project.id);
    expect(rows).toHaveLength(INJECTIONS.length);
    for (const row of rows) {
      const s = INJECTIONS[Number(row.event_id.split('-')[1])];
      expect([row.trace_id, row.resource_id, row.user_id, row.entity_name, row.provider, row.model]).toEqual([s, s, s, s, s, s]);
    }
    // The tables the strings name are intact.
    const [{ n }] = await svc.prisma.$queryRawUnsafe<{ n: number }[]>('SELECT count(*)::int AS n FROM api_keys');
    expect(n).toBeGreaterThan(0);
  });
});
