import { spawn } from 'node:child_process';
import * as crypto from 'node:crypto';
import { join } from 'node:path';
import { MetricsProjector } from '@tollgate/usage-metrics';
import { hashSecret, parseKey } from '@tollgate/platform';
import { TEST_ADMIN_TOKEN, TEST_DATABASE_URL, TEST_REDIS_URL } from '../support/env';
import { call, createProject, stepEvent, type TestProject } from '../support/http';
import { startService, type RunningService } from '../support/service';
import { buildService, freePort, sleep } from '../sdk/support';

/** Everything of one project a request of another project could read or change, as one comparable value. */
async function projectState(svc: RunningService, projectId: string): Promise<unknown> {
  const q = (sql: string) => svc.prisma.$queryRawUnsafe<any[]>(sql, projectId);
  return JSON.stringify({
    events: await q(
      `SELECT position::text, event_id, type, input_tokens::text, output_tokens::text, cost_micros::text, data FROM events WHERE project_id = $1 ORDER BY position`,
    ),
    reservations: await q(`SELECT id, status, closed_at FROM reservations WHERE project_id = $1 ORDER BY id`),
    policies: await q(
      `SELECT name, max_total_tokens::text, updated_at FROM policies WHERE project_id = $1 ORDER BY name`,
    ),
    prices: await q(
      `SELECT id, provider, model, input_per_million::text FROM price_overrides WHERE project_id = $1 ORDER BY id`,
    ),
    keys: await q(`SELECT id, revoked_at, scopes FROM api_keys WHERE project_id = $1 ORDER BY id`),
    exporters: await q(
      `SELECT id, name, type, settings, secrets, status, paused_reason, checkpoint_tx, checkpoint_position::text, in_flight_batch, updated_at FROM exporters WHERE project_id = $1 ORDER BY id`,
    ),
    exportBatches: await q(
      `SELECT b.id, b.status, b.attempts, b.job_id, b.from_position::text, b.to_position::text FROM export_batches b JOIN exporters x ON x.id = b.exporter_id WHERE x.project_id = $1 ORDER BY b.id`,
    ),
    rollups: await q(
      `SELECT r.name, r.bucket_start, r.count::text, r.sum::text FROM metric_rollups r WHERE r.project_id = $1 ORDER BY 1, 2, 3, 4`,
    ),
  });
}

describe('security', () => {
  let svc: RunningService;
  beforeAll(async () => {
    // Exporters with a signing secret need the key that seals secrets at rest.
    svc = await startService({ TOLLGATE_SECRET_KEY: 'security-spec-secret-key-0123456789' });
  });
  afterAll(() => svc.close());

  describe('project isolation: a key of project A with the ids of project B', () => {
    let a: TestProject;
    let b: TestProject;
    let bReservation: string;
    // B's figures are unusual numbers, so any of them in an answer to A is a leak. (Names A sent
    // itself, like B's policy name, may come back: A can have its own policy of that name.)
    const B_INPUT = 777_771;
    const B_MARKERS = [
      '777771',
      '777772',
      '777773',
      'b-entity-777774',
      'b-service-777775',
      'b-env-777776',
      'b-tag-777777',
      'bkey777778',
      'b-value-777779',
      'b-receiver-777780',
      'b-header-777781',
    ];
    const shared = { resourceId: 'shared-resource', userId: 'shared-user', traceId: 'shared-trace' };
    let bEvent: Record<string, any>;
    let bBatch: string;
    const TOTALS = ['mastra_model_total_input_tokens', 'mastra_model_total_output_tokens'];
    const onShared = { resourceId: shared.resourceId };

    beforeAll(async () => {
      a = await createProject(svc.url);
      b = await createProject(svc.url);
      B_MARKERS.push(b.id);
      bEvent = stepEvent({ ...shared, usage: { inputTokens: B_INPUT, outputTokens: 777_772 } });
      expect(
        (await call(svc.url, 'POST', '/v1/events', { token: b.key, body: { events: [bEvent] } })).body.accepted,
      ).toBe(1);
      const reserve = await call(svc.url, 'POST', '/v1/guard/check', {
        token: b.key,
        body: {
          context: shared,
          estimate: { provider: 'openai', model: 'gpt-4o', inputTokens: 10, maxOutputTokens: 10 },
          reserve: true,
          stepId: 'b-step',
        },
      });
      bReservation = reserve.body.reservation.id;
      // A denial, so B has a GuardDecided audit entry.
      await call(svc.url, 'POST', '/v1/guard/check', {
        token: b.key,
        body: { context: shared, limits: [{ scope: 'resource', window: '24h', maxTotalTokens: 1 }] },
      });
      expect(
        (
          await call(svc.url, 'PUT', '/v1/policies/b-only-policy', {
            token: b.key,
            body: { scope: 'resource', maxTotalTokens: 777_773 },
          })
        ).status,
      ).toBe(200);
      expect(
        (
          await call(svc.url, 'PUT', '/v1/prices/acme/b-only-model', {
            token: b.key,
            body: { inputPerMillion: 7, outputPerMillion: 7 },
          })
        ).status,
      ).toBe(200);
      // Dimensions only B has (A's first row copies bEvent, so they go on a second event of B).
      const bOnly = stepEvent({
        ...shared,
        entityName: 'b-entity-777774',
        serviceName: 'b-service-777775',
        environment: 'b-env-777776',
        tags: ['b-tag-777777'],
        labels: { bkey777778: 'b-value-777779' },
        usage: { inputTokens: 777_771, outputTokens: 777_772 },
      });
      expect(
        (await call(svc.url, 'POST', '/v1/events', { token: b.key, body: { events: [bOnly] } })).body.accepted,
      ).toBe(1);
      // B's events go into the rollups (no worker here: the projector runs in the test); A's come after, from the log.
      const projector = svc.app.get(MetricsProjector);
      for (;;) if ((await projector.catchUp()).caughtUp) break;
      const exporter = {
        type: 'webhook',
        url: 'http://127.0.0.1:9/b-receiver-777780',
        signingSecret: 'whsec-b-0123456789',
        headers: { 'x-b': 'b-header-777781' },
        startFrom: 'beginning',
      };
      expect(
        (await call(svc.url, 'PUT', '/v1/exporters/b-only-exporter', { token: b.key, body: exporter })).status,
      ).toBe(200);
      // A dead-lettered batch of B's exporter, so a retry by id has something of B's to aim at.
      bBatch = `xb_${crypto.randomBytes(10).toString('hex')}`;
      await svc.prisma.$executeRawUnsafe(
        `INSERT INTO export_batches (id, exporter_id, status, from_tx, from_position, to_tx, to_position, log_rows, event_count, attempts, last_error, failed_at)
         SELECT $1, id, 'dead', '0', 0, '0', 0, 0, 0, 8, 'b-receiver-777780 refused', now() FROM exporters WHERE project_id = $2 AND name = 'b-only-exporter'`,
        bBatch,
        b.id,
      );
    });

    type Row = {
      route: string;
      method: string;
      path: () => string;
      body?: () => unknown;
      token?: () => string;
      expect: (status: number, body: any) => void;
    };
    const rows: Row[] = [
      {
        route: 'POST /v1/events (B’s event id)',
        method: 'POST',
        path: () => '/v1/events',
        body: () => ({ events: [{ ...bEvent, usage: { inputTokens: 1, outputTokens: 1 } }] }),
        expect: (s, body) => expect([s, body.results[0].status]).toEqual([200, 'accepted']),
      },
      {
        route: 'POST /v1/guard/check (B’s scope ids)',
        method: 'POST',
        path: () => '/v1/guard/check',
        body: () => ({
          context: shared,
          limits: [
            { scope: 'resource', window: '24h', maxTotalTokens: 1_000_000_000 },
            { scope: 'user', window: '24h', maxTotalTokens: 1_000_000_000 },
          ],
        }),
        expect: (s, body) => {
          expect(s).toBe(200);
          // A sees its own one event above (2 tokens), never B's.
          expect(body.usage['resource:shared-resource@24h']).toMatchObject({ totalTokens: 2, reservedInputTokens: 0 });
          expect(body.usage['user:shared-user@24h']).toMatchObject({ totalTokens: 2 });
        },
      },
      {
        route: 'POST /v1/guard/reservations/:id/release (B’s reservation)',
        method: 'POST',
        path: () => `/v1/guard/reservations/${bReservation}/release`,
        body: () => ({}),
        expect: (s, body) => expect([s, body.field]).toEqual([404, 'id']),
      },
      {
        route: 'GET /v1/guard/decisions (B’s scope)',
        method: 'GET',
        path: () => '/v1/guard/decisions?scopeKey=resource:shared-resource',
        expect: (s, body) => expect([s, body.decisions]).toEqual([200, []]),
      },
      {
        route: 'GET /v1/policies',
        method: 'GET',
        path: () => '/v1/policies',
        expect: (s, body) => expect([s, body.policies]).toEqual([200, []]),
      },
      {
        route: 'DELETE /v1/policies/:name (B’s policy)',
        method: 'DELETE',
        path: () => '/v1/policies/b-only-policy',
        expect: (s) => expect(s).toBe(404),
      },
      {
        route: 'PUT /v1/policies/:name (B’s policy name)',
        method: 'PUT',
        path: () => '/v1/policies/b-only-policy',
        body: () => ({ scope: 'resource', maxTotalTokens: 5 }),
        expect: (s, body) => expect([s, body.maxTotalTokens]).toEqual([200, 5]),
      },
      {
        route: 'PUT /v1/prices/:provider/:model (B’s model)',
        method: 'PUT',
        path: () => '/v1/prices/acme/b-only-model',
        body: () => ({ inputPerMillion: 1, outputPerMillion: 1 }),
        expect: (s, body) => expect([s, body.inputPerMillion]).toEqual([200, 1]),
      },
      {
        route: 'GET /v1/prices',
        method: 'GET',
        path: () => '/v1/prices',
        expect: (s, body) => expect([s, body.prices.map((p: any) => p.inputPerMillion)]).toEqual([200, [1]]),
      },
      // Admin routes take the operator's token, never a project key, whatever its scopes.
      {
        route: 'GET /v1/admin/projects/:B/keys',
        method: 'GET',
        path: () => `/v1/admin/projects/${b.id}/keys`,
        expect: (s) => expect(s).toBe(401),
      },
      {
        route: 'POST /v1/admin/projects/:B/keys',
        method: 'POST',
        path: () => `/v1/admin/projects/${b.id}/keys`,
        body: () => ({ scopes: ['admin'] }),
        expect: (s) => expect(s).toBe(401),
      },
      {
        route: 'DELETE /v1/admin/projects/:B/keys/:key',
        method: 'DELETE',
        path: () => `/v1/admin/projects/${b.id}/keys/${b.keyId}`,
        expect: (s) => expect(s).toBe(401),
      },
      {
        route: 'DELETE /v1/admin/projects/:A/keys/:B’s key (admin token, wrong project)',
        method: 'DELETE',
        path: () => `/v1/admin/projects/${a.id}/keys/${b.keyId}`,
        token: () => TEST_ADMIN_TOKEN,
        expect: (s, body) => expect([s, body.field]).toEqual([404, 'keyId']),
      },
      // Metric queries with B's scope ids: A's one event of row 1 (1 + 1 tokens), never B's 777,771 + 777,772.
      {
        route: 'POST /api/observability/metrics/aggregate (B’s resource)',
        method: 'POST',
        path: () => '/api/observability/metrics/aggregate',
        body: () => ({ name: TOTALS, aggregation: 'sum', filters: onShared }),
        expect: (s, body) => expect([s, body.value]).toEqual([200, 2]),
      },
      {
        route: 'POST /api/observability/metrics/breakdown (B’s resource)',
        method: 'POST',
        path: () => '/api/observability/metrics/breakdown',
        body: () => ({ name: TOTALS, aggregation: 'sum', groupBy: ['resourceId', 'entityName'], filters: onShared }),
        expect: (s, body) =>
          expect([s, body.groups.map((g: any) => [g.dimensions, g.value])]).toEqual([
            200,
            [[{ resourceId: shared.resourceId, entityName: 'support-agent' }, 2]],
          ]),
      },
      {
        route: 'POST /api/observability/metrics/timeseries (B’s resource)',
        method: 'POST',
        path: () => '/api/observability/metrics/timeseries',
        body: () => ({ name: TOTALS, aggregation: 'sum', interval: '1h', filters: onShared }),
        expect: (s, body) =>
          expect([s, body.series.flatMap((x: any) => x.points.map((p: any) => p.value))]).toEqual([200, [2]]),
      },
      {
        route: 'POST /api/observability/metrics/percentiles (B’s resource)',
        method: 'POST',
        path: () => '/api/observability/metrics/percentiles',
        body: () => ({
          name: 'mastra_model_total_input_tokens',
          percentiles: [0.5, 0.99],
          interval: '1d',
          filters: onShared,
        }),
        expect: (s, body) =>
          expect([s, body.series.map((x: any) => x.points.map((p: any) => p.value))]).toEqual([200, [[1], [1]]]),
      },
      {
        route: 'GET /api/observability/discovery/metric-names',
        method: 'GET',
        path: () => '/api/observability/discovery/metric-names',
        expect: (s, body) => expect([s, body.names.length > 0]).toEqual([200, true]),
      },
      {
        route: 'GET /api/observability/discovery/metric-label-keys',
        method: 'GET',
        path: () => '/api/observability/discovery/metric-label-keys?metricName=mastra_model_total_input_tokens',
        expect: (s, body) => expect([s, body.keys]).toEqual([200, []]),
      },
      {
        route: 'GET /api/observability/discovery/metric-label-values (B’s label key)',
        method: 'GET',
        path: () =>
          '/api/observability/discovery/metric-label-values?metricName=mastra_model_total_input_tokens&labelKey=bkey777778',
        expect: (s, body) => expect([s, body.values]).toEqual([200, []]),
      },
      {
        route: 'GET /api/observability/discovery/entity-types',
        method: 'GET',
        path: () => '/api/observability/discovery/entity-types',
        expect: (s, body) => expect([s, body.entityTypes]).toEqual([200, ['agent']]),
      },
      {
        route: 'GET /api/observability/discovery/entity-names',
        method: 'GET',
        path: () => '/api/observability/discovery/entity-names',
        expect: (s, body) => expect([s, body.names]).toEqual([200, ['support-agent']]),
      },
      {
        route: 'GET /api/observability/discovery/service-names',
        method: 'GET',
        path: () => '/api/observability/discovery/service-names',
        expect: (s, body) => expect([s, body.serviceNames]).toEqual([200, []]),
      },
      {
        route: 'GET /api/observability/discovery/environments',
        method: 'GET',
        path: () => '/api/observability/discovery/environments',
        expect: (s, body) => expect([s, body.environments]).toEqual([200, []]),
      },
      {
        route: 'GET /api/observability/discovery/tags',
        method: 'GET',
        path: () => '/api/observability/discovery/tags',
        expect: (s, body) => expect([s, body.tags]).toEqual([200, []]),
      },
      // Exporters by B's exporter name and batch id: A has none of that name until its own PUT.
      {
        route: 'GET /v1/exporters',
        method: 'GET',
        path: () => '/v1/exporters',
        expect: (s, body) => expect([s, body.exporters]).toEqual([200, []]),
      },
      {
        route: 'GET /v1/exporters/:name (B’s exporter)',
        method: 'GET',
        path: () => '/v1/exporters/b-only-exporter',
        expect: (s, body) => expect([s, body.field]).toEqual([404, 'name']),
      },
      {
        route: 'POST /v1/exporters/:name/replay (B’s exporter)',
        method: 'POST',
        path: () => '/v1/exporters/b-only-exporter/replay',
        body: () => ({ fromPosition: 0 }),
        expect: (s, body) => expect([s, body.field]).toEqual([404, 'name']),
      },
      {
        route: 'POST /v1/exporters/:name/pause (B’s exporter)',
        method: 'POST',
        path: () => '/v1/exporters/b-only-exporter/pause',
        body: () => ({}),
        expect: (s, body) => expect([s, body.field]).toEqual([404, 'name']),
      },
      {
        route: 'POST /v1/exporters/:name/resume (B’s exporter)',
        method: 'POST',
        path: () => '/v1/exporters/b-only-exporter/resume',
        body: () => ({}),
        expect: (s, body) => expect([s, body.field]).toEqual([404, 'name']),
      },
      {
        route: 'GET /v1/exporters/:name/dead-letters (B’s exporter)',
        method: 'GET',
        path: () => '/v1/exporters/b-only-exporter/dead-letters',
        expect: (s, body) => expect([s, body.field]).toEqual([404, 'name']),
      },
      {
        route: 'POST /v1/exporters/:name/dead-letters/retry (B’s exporter)',
        method: 'POST',
        path: () => '/v1/exporters/b-only-exporter/dead-letters/retry',
        body: () => ({}),
        expect: (s, body) => expect([s, body.field]).toEqual([404, 'name']),
      },
      {
        route: 'POST /v1/exporters/:name/dead-letters/:batchId/retry (B’s exporter and batch)',
        method: 'POST',
        path: () => `/v1/exporters/b-only-exporter/dead-letters/${bBatch}/retry`,
        body: () => ({}),
        expect: (s, body) => expect([s, body.field]).toEqual([404, 'name']),
      },
      {
        route: 'DELETE /v1/exporters/:name (B’s exporter)',
        method: 'DELETE',
        path: () => '/v1/exporters/b-only-exporter',
        expect: (s, body) => expect([s, body.field]).toEqual([404, 'name']),
      },
      {
        route: 'PUT /v1/exporters/:name (B’s exporter name)',
        method: 'PUT',
        path: () => '/v1/exporters/b-only-exporter',
        body: () => ({ type: 'webhook', url: 'http://127.0.0.1:9/a-receiver', signingSecret: 'whsec-a-0123456789' }),
        // A gets its own exporter of that name, starting from now: nothing of B's log, config or checkpoint.
        expect: (s, body) =>
          expect([s, body.created, body.settings.url, body.secrets]).toEqual([
            200,
            true,
            'http://127.0.0.1:9/a-receiver',
            { signingSecret: true, headers: [] },
          ]),
      },
      {
        route: 'GET /v1/exporters/:name/dead-letters (A’s exporter of B’s name)',
        method: 'GET',
        path: () => '/v1/exporters/b-only-exporter/dead-letters',
        expect: (s, body) => expect([s, body.deadLetters]).toEqual([200, []]),
      },
      {
        route: 'POST /v1/exporters/:name/dead-letters/:batchId/retry (B’s batch on A’s exporter)',
        method: 'POST',
        path: () => `/v1/exporters/b-only-exporter/dead-letters/${bBatch}/retry`,
        body: () => ({}),
        expect: (s, body) => expect([s, body.field]).toEqual([404, 'batchId']),
      },
      {
        route: 'POST /v1/exporters/:name/replay (A’s exporter of B’s name, from 0)',
        method: 'POST',
        path: () => '/v1/exporters/b-only-exporter/replay',
        body: () => ({ fromPosition: 0 }),
        expect: (s, body) => expect([s, body.settings.url]).toEqual([200, 'http://127.0.0.1:9/a-receiver']),
      },
    ];

    let before: unknown;
    beforeAll(async () => {
      before = await projectState(svc, b.id);
    });

    for (const row of rows) {
      it(`${row.route}: never B's data, never a change to B`, async () => {
        const res = await call(svc.url, row.method, row.path(), {
          token: row.token ? row.token() : a.key,
          body: row.body?.(),
        });
        row.expect(res.status, res.body);
        const text = JSON.stringify(res.body ?? '');
        for (const marker of B_MARKERS) expect(text).not.toContain(marker);
        expect(await projectState(svc, b.id)).toEqual(before);
      });
    }
  });

  describe('keys', () => {
    it('are stored as a SHA-256 hash of the secret; no column holds the key or its secret', async () => {
      const p = await createProject(svc.url);
      const { secret } = parseKey(p.key)!;
      const [row] = await svc.prisma.$queryRawUnsafe<any[]>('SELECT * FROM api_keys WHERE id = $1', p.keyId);
      expect(row.secret_hash).toBe(hashSecret(secret));
      const everything = JSON.stringify(row, (_, v) => (typeof v === 'bigint' ? String(v) : v));
      expect(everything).not.toContain(secret);
      const listed = await call(svc.url, 'GET', `/v1/admin/projects/${p.id}/keys`, { token: TEST_ADMIN_TOKEN });
      expect(JSON.stringify(listed.body)).not.toContain(secret);
    });

    it('stop working with the very next request once revoked', async () => {
      const p = await createProject(svc.url);
      expect((await call(svc.url, 'GET', '/v1/policies', { token: p.key })).status).toBe(200);
      expect(
        (await call(svc.url, 'DELETE', `/v1/admin/projects/${p.id}/keys/${p.keyId}`, { token: TEST_ADMIN_TOKEN }))
          .status,
      ).toBe(200);
      const after = await call(svc.url, 'GET', '/v1/policies', { token: p.key });
      expect(after.status).toBe(401);
      expect(after.body).toMatchObject({ code: 'unauthorized', field: 'authorization' });
    });
  });

  describe('rate limits per key, shared through Redis by every API replica', () => {
    it('lets exactly the burst through across two API instances, then 429 with Retry-After; other keys are not affected', async () => {
      // One request per 10 s with a burst of 10: within this test exactly 10 requests fit, however fast they come.
      const env = {
        RATE_LIMIT_PER_KEY_PER_SECOND: '0.1',
        RATE_LIMIT_BURST: '10',
        QUEUE_PREFIX: `tollgate-rate-${crypto.randomBytes(4).toString('hex')}`,
      };
      const one = await startService(env);
      const two = await startService(env);
      try {
        const p = await createProject(one.url);
        const other = await createProject(one.url);
        const replies = [];
        for (let i = 0; i < 30; i++)
          replies.push(await call(i % 2 ? two.url : one.url, 'GET', '/v1/policies', { token: p.key }));
        const ok = replies.filter((r) => r.status === 200).length;
        const limited = replies.filter((r) => r.status === 429);
        expect([ok, limited.length]).toEqual([10, 20]);
        // Each instance refused requests: the count is shared, not per process.
        expect(new Set(replies.map((r, i) => (r.status === 429 ? i % 2 : -1)).filter((x) => x >= 0))).toEqual(
          new Set([0, 1]),
        );
        for (const r of limited) {
          expect(r.body).toMatchObject({ statusCode: 429, code: 'rate_limited' });
          const retryAfter = Number(r.headers.get('retry-after'));
          expect(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 10).toBe(true);
        }
        expect((await call(two.url, 'GET', '/v1/policies', { token: other.key })).status).toBe(200);
      } finally {
        await one.close();
        await two.close();
      }
    });

    it('fails open when Redis cannot be reached: ingest keeps committing', async () => {
      const p = await createProject(svc.url, ['ingest']);
      const noRedis = await startService({
        REDIS_URL: 'redis://127.0.0.1:1',
        RATE_LIMIT_PER_KEY_PER_SECOND: '0.1',
        RATE_LIMIT_BURST: '1',
      });
      try {
        for (let i = 0; i < 3; i++) {
          const res = await call(noRedis.url, 'POST', '/v1/events', { token: p.key, body: { events: [stepEvent()] } });
          expect([res.status, res.body.accepted]).toEqual([200, 1]);
        }
      } finally {
        await noRedis.close();
      }
    });
  });

  describe('request limits', () => {
    let p: TestProject;
    beforeAll(async () => {
      p = await createProject(svc.url, ['ingest']);
    });

    it('refuses a body over 1 MiB with 413, and a batch of 1001 events with 400 on events; stores none', async () => {
      const big = await call(svc.url, 'POST', '/v1/events', {
        token: p.key,
        body: {
          events: [
            stepEvent({ labels: { big: 'x'.repeat(1000) }, traceId: 'big' }),
            ...Array.from({ length: 999 }, () => stepEvent({ traceId: 'big', labels: { pad: 'y'.repeat(1000) } })),
          ],
        },
      });
      expect([big.status, big.body.field]).toEqual([413, '(body)']);
      const many = await call(svc.url, 'POST', '/v1/events', {
        token: p.key,
        body: {
          events: Array.from({ length: 1001 }, () =>
            stepEvent({ traceId: 'many', usage: { inputTokens: 1, outputTokens: 1 } }),
          ),
        },
      });
      expect([many.status, many.body.field]).toEqual([400, 'events']);
      const exactly = await call(svc.url, 'POST', '/v1/events', {
        token: p.key,
        body: {
          events: Array.from({ length: 1000 }, () =>
            stepEvent({ traceId: 'exact', usage: { inputTokens: 1, outputTokens: 1 } }),
          ),
        },
      });
      expect(exactly.body.accepted).toBe(1000);
      const [{ n }] = await svc.prisma.$queryRawUnsafe<{ n: number }[]>(
        `SELECT count(*)::int AS n FROM events WHERE project_id = $1 AND trace_id IN ('big', 'many')`,
        p.id,
      );
      expect(n).toBe(0);
    });
  });

  describe('logs', () => {
    it('never contain a key, on success or on any kind of auth failure (API as a child process at the most verbose level)', async () => {
      buildService();
      const port = await freePort();
      const url = `http://127.0.0.1:${port}`;
      let output = '';
      const child = spawn(process.execPath, [join(__dirname, '../../dist/apps/api/src/main.js')], {
        env: {
          ...process.env,
          DATABASE_URL: TEST_DATABASE_URL,
          REDIS_URL: TEST_REDIS_URL,
          PORT: String(port),
          HOST: '127.0.0.1',
          TOLLGATE_ADMIN_TOKEN: TEST_ADMIN_TOKEN,
          LOG_LEVEL: 'verbose',
          QUEUE_PREFIX: `tollgate-logs-${crypto.randomBytes(4).toString('hex')}`,
          RATE_LIMIT_PER_KEY_PER_SECOND: '1',
          RATE_LIMIT_BURST: '3',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      child.stdout!.on('data', (d) => (output += String(d)));
      child.stderr!.on('data', (d) => (output += String(d)));
      try {
        for (
          let i = 0;
          i < 300 &&
          !(await fetch(`${url}/health/ready`).then(
            (r) => r.ok,
            () => false,
          ));
          i++
        )
          await sleep(100);
        const p = await createProject(url);
        const { id, secret } = parseKey(p.key)!;
        const revoked = await createProject(url);
        await call(url, 'DELETE', `/v1/admin/projects/${revoked.id}/keys/${revoked.keyId}`, {
          token: TEST_ADMIN_TOKEN,
        });
        const attempts: [string, Record<string, string>, string?][] = [
          ['valid', { authorization: `Bearer ${p.key}` }],
          ['wrong secret', { authorization: `Bearer tg_${id}_${'A'.repeat(43)}` }],
          ['revoked', { authorization: `Bearer ${revoked.key}` }],
          ['not bearer', { authorization: `Basic ${p.key}` }],
          ['key with trailing junk', { authorization: `Bearer ${p.key}xx` }],
          ['key in a query string', {}, `?key=${p.key}`],
          ['key as the admin token', { authorization: `Bearer ${p.key}` }, 'admin'],
        ];
        for (const [, headers, extra] of attempts) {
          const path = extra === 'admin' ? '/v1/admin/projects' : `/v1/policies${extra ?? ''}`;
          await fetch(url + path, {
            method: extra === 'admin' ? 'POST' : 'GET',
            headers: { ...headers, 'content-type': 'application/json' },
            body: extra === 'admin' ? '{"name":"x"}' : undefined,
          });
        }
        // Past the rate limit (429), a bad body (400) and an ingest (200), with the key.
        for (let i = 0; i < 6; i++) await call(url, 'GET', '/v1/policies', { token: p.key });
        await call(url, 'POST', '/v1/events', { token: p.key, raw: '{"events":[{"a":1,"a":2}]}' });
        await sleep(300);
        expect(output).toContain('"status":401');
        expect(output).toContain('"status":429');
        for (const s of [p.key, secret, revoked.key, parseKey(revoked.key)!.secret]) expect(output).not.toContain(s);
      } finally {
        child.kill('SIGKILL');
      }
    }, 120_000);
  });
});
