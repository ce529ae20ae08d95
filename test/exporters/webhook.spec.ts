import { verifyWebhook } from '@tollgate/exporters';
import type { z } from 'zod';
import {
  deadLettersResponse,
  exporterResponse,
  exportersResponse,
  putExporterResponse,
  replayResponse,
  retryResponse,
} from '../../libs/exporters/src/exporter/exporter-settings';
import { call, createProject, stepEvent, type TestProject } from '../support/http';
import type { RunningService } from '../support/service';
import {
  acceptedEventIds,
  eventually,
  startReceiver,
  startServiceWithWorker,
  webhookExporter,
  type Receiver,
} from './support';

describe('webhook exporter, end to end', () => {
  let svc: RunningService;
  const receivers: Receiver[] = [];
  beforeAll(async () => {
    svc = await startServiceWithWorker();
  });
  afterAll(async () => {
    await svc.close();
    await Promise.all(receivers.map((r) => r.close()));
  });

  const receiver = async (answer?: Parameters<typeof startReceiver>[0]) => {
    const r = await startReceiver(answer);
    receivers.push(r);
    return r;
  };
  const api = (project: TestProject, method: string, path: string, body?: unknown) =>
    call(svc.url, method, path, { token: project.key, body });
  /** The answer is what the OpenAPI document says: it parses with the route's strict response schema, to itself. */
  const documented = (schema: z.ZodType, reply: { body: unknown }) => {
    const parsed = schema.safeParse(reply.body);
    expect(parsed.success ? [] : parsed.error.issues).toEqual([]);
    expect(parsed.data).toEqual(reply.body);
  };
  const ingest = async (project: TestProject, count: number, overrides: Record<string, unknown> = {}) => {
    const events = Array.from({ length: count }, () => stepEvent(overrides));
    const res = await api(project, 'POST', '/v1/events', { events });
    expect(res.body.accepted).toBe(count);
    return events.map((e) => e.eventId as string);
  };

  it('delivers every event in signed batches, and GET shows the state without the secrets', async () => {
    const sink = await receiver();
    const project = await createProject(svc.url);
    const put = await api(
      project,
      'PUT',
      '/v1/exporters/billing',
      webhookExporter(sink.url, { headers: { authorization: 'Bearer sink-token-123' } }),
    );
    expect(put.status).toBe(200);
    expect(put.body.created).toBe(true);
    expect(JSON.stringify(put.body)).not.toMatch(/whsec-test|sink-token-123/);
    expect(put.body.secrets).toEqual({ signingSecret: true, headers: ['authorization'] });
    documented(putExporterResponse, put);

    const ids = [...(await ingest(project, 25)), ...(await ingest(project, 25)), ...(await ingest(project, 25))];
    await eventually(() => new Set(acceptedEventIds(sink)).size === 75, 'all 75 events at the receiver');

    expect(acceptedEventIds(sink).sort()).toEqual([...ids].sort());
    for (const req of sink.requests) {
      expect(
        verifyWebhook(
          'whsec-test-0123456789',
          req.body,
          String(req.headers['x-tollgate-timestamp']),
          String(req.headers['x-tollgate-signature']),
        ),
      ).toBe(true);
      expect(
        verifyWebhook(
          'another-secret-0000000',
          req.body,
          String(req.headers['x-tollgate-timestamp']),
          String(req.headers['x-tollgate-signature']),
        ),
      ).toBe(false);
      expect(req.headers.authorization).toBe('Bearer sink-token-123');
      expect(req.headers['idempotency-key']).toBe(req.json.batchId);
      expect(req.json.events.length).toBeLessThanOrEqual(20);
      expect(req.json.exporter).toBe('billing');
    }
    const first = sink.requests[0].json.events[0];
    expect(first).toMatchObject({
      type: 'StepUsageRecorded',
      projectId: project.id,
      provider: 'openai',
      model: 'gpt-4o',
      usage: { inputTokens: 1000, outputTokens: 200 },
    });
    // gpt-4o: 1000 input at $2.50/M + 200 output at $10/M.
    expect(first.cost).toMatchObject({ micros: 4500, inputMicros: 2500, outputMicros: 2000, currency: 'USD' });

    const state = await eventually(async () => {
      const g = await api(project, 'GET', '/v1/exporters/billing');
      return g.body.lag?.events === 0 && g.body.inFlightBatch === null ? g : null;
    }, 'lag 0');
    const [last] = await svc.prisma.$queryRawUnsafe<{ tx: string; position: bigint }[]>(
      'SELECT tx::text AS tx, position FROM events WHERE project_id = $1 ORDER BY tx DESC, position DESC LIMIT 1',
      project.id,
    );
    expect(state.body.checkpoint).toEqual({ tx: last.tx, position: String(last.position) });
    expect(state.body.status).toBe('active');
    expect(state.body.deadLetters).toEqual({ batches: 0, events: 0 });
  });

  it('retries a receiver that fails 3 times: every event arrives, duplicates only from the retried batch', async () => {
    const sink = await receiver((n) => (n < 3 ? 503 : 200));
    const project = await createProject(svc.url);
    await api(
      project,
      'PUT',
      '/v1/exporters/flaky',
      webhookExporter(sink.url, { batch: { maxEvents: 10, maxWaitMs: 50 } }),
    );
    const ids = await ingest(project, 30);
    await eventually(() => new Set(acceptedEventIds(sink)).size === 30, 'all 30 events accepted');

    // Accepted requests carry each event exactly once.
    expect(acceptedEventIds(sink).sort()).toEqual([...ids].sort());
    // The failed requests were attempts of one batch, re-sent whole under the same idempotency key.
    const failed = sink.requests.filter((r) => r.status === 503);
    expect(failed).toHaveLength(3);
    const key = failed[0].headers['idempotency-key'];
    const retried = sink.requests.filter((r) => r.headers['idempotency-key'] === key);
    expect(retried.map((r) => r.status)).toEqual([503, 503, 503, 200]);
    const eventsOf = (r: { json: any }) => r.json.events.map((e: { eventId: string }) => e.eventId);
    for (const r of retried) expect(eventsOf(r)).toEqual(eventsOf(retried[0]));
    // Every event seen more than once is in that batch.
    const seen = new Map<string, number>();
    for (const r of sink.requests) for (const id of eventsOf(r)) seen.set(id, (seen.get(id) ?? 0) + 1);
    const duplicated = [...seen]
      .filter(([, n]) => n > 1)
      .map(([id]) => id)
      .sort();
    expect(duplicated).toEqual([...eventsOf(retried[0])].sort());
  });

  it('dead-letters a batch the receiver rejects with 400 without retrying it, and delivers it when retried from the API', async () => {
    let accept = false;
    const sink = await receiver(() => (accept ? 200 : 400));
    const project = await createProject(svc.url);
    await api(
      project,
      'PUT',
      '/v1/exporters/strict',
      webhookExporter(sink.url, { batch: { maxEvents: 100, maxWaitMs: 50 } }),
    );
    const ids = await ingest(project, 5);

    const dead = await eventually(async () => {
      const d = await api(project, 'GET', '/v1/exporters/strict/dead-letters');
      return d.body.deadLetters.length === 1 ? d.body.deadLetters[0] : null;
    }, 'one dead letter');
    expect(dead).toMatchObject({ status: 'dead', events: 5, attempts: 1 });
    expect(dead.lastError).toContain('answered 400');
    expect(sink.requests).toHaveLength(1);
    documented(deadLettersResponse, await api(project, 'GET', '/v1/exporters/strict/dead-letters'));
    const state = await api(project, 'GET', '/v1/exporters/strict');
    documented(exporterResponse, state);
    expect(state.body).toMatchObject({ status: 'active', deadLetters: { batches: 1, events: 5 }, lag: { events: 0 } });

    accept = true;
    const retry = await api(project, 'POST', `/v1/exporters/strict/dead-letters/${dead.id}/retry`);
    expect(retry.status).toBe(202);
    expect(retry.body).toEqual({ retrying: [dead.id] });
    documented(retryResponse, retry);
    await eventually(() => acceptedEventIds(sink).length === 5, 'the retried batch delivered');
    expect(acceptedEventIds(sink).sort()).toEqual([...ids].sort());
    expect(sink.requests[1].headers['idempotency-key']).toBe(dead.id);
    await eventually(
      async () => (await api(project, 'GET', '/v1/exporters/strict/dead-letters')).body.deadLetters.length === 0,
      'dead-letter set empty',
    );
  });

  it('pauses an exporter that keeps failing, shows why, and resumes where it stopped', async () => {
    let accept = false;
    const sink = await receiver(() => (accept ? 200 : 401));
    const project = await createProject(svc.url);
    await api(
      project,
      'PUT',
      '/v1/exporters/locked',
      webhookExporter(sink.url, { batch: { maxEvents: 2, maxWaitMs: 50 }, pauseAfterFailures: 2 }),
    );
    const ids = await ingest(project, 6);

    const paused = await eventually(async () => {
      const g = await api(project, 'GET', '/v1/exporters/locked');
      return g.body.status === 'paused' ? g.body : null;
    }, 'paused');
    expect(paused.pausedReason).toMatch(
      /^2 batches in a row failed and were dead-lettered; last error: POST .* answered 401/,
    );
    expect(paused.deadLetters).toEqual({ batches: 2, events: 4 });
    expect(paused.lag.events).toBe(2);
    expect(sink.requests).toHaveLength(2);

    accept = true;
    const resumed = await api(project, 'POST', '/v1/exporters/locked/resume');
    expect(resumed.body).toMatchObject({ status: 'active', pausedReason: null });
    documented(exporterResponse, resumed);
    await eventually(() => acceptedEventIds(sink).length === 2, 'the remaining batch');
    expect(acceptedEventIds(sink)).toEqual(ids.slice(4));

    const retry = await api(project, 'POST', '/v1/exporters/locked/dead-letters/retry');
    expect(retry.body.retrying).toHaveLength(2);
    documented(retryResponse, retry);
    await eventually(() => acceptedEventIds(sink).length === 6, 'every event');
    expect(acceptedEventIds(sink).sort()).toEqual([...ids].sort());
  });

  it('replays from a position or a time, and never moves the checkpoint forward', async () => {
    const sink = await receiver();
    const project = await createProject(svc.url);
    await api(project, 'PUT', '/v1/exporters/replayed', webhookExporter(sink.url));
    const ids = await ingest(project, 10);
    await eventually(() => acceptedEventIds(sink).length === 10, 'first delivery');
    const positions = new Map<string, number>(
      sink.requests.flatMap((r) => r.json.events.map((e: any) => [e.eventId, Number(e.position)] as [string, number])),
    );

    const from = positions.get(ids[6])!;
    const replay = await api(project, 'POST', '/v1/exporters/replayed/replay', { fromPosition: from });
    expect(replay.status).toBe(200);
    expect(replay.body.replay).toEqual({ rewound: true });
    documented(replayResponse, replay);
    await eventually(() => acceptedEventIds(sink).length === 14, 'replayed events');
    expect(acceptedEventIds(sink).slice(10)).toEqual(ids.slice(6));

    const byTime = await api(project, 'POST', '/v1/exporters/replayed/replay', {
      fromTime: new Date(Date.now() - 3600_000).toISOString(),
    });
    expect(byTime.body.replay).toEqual({ rewound: true });
    await eventually(() => acceptedEventIds(sink).length === 24, 'replayed by time');

    const ahead = await api(project, 'POST', '/v1/exporters/replayed/replay', { fromPosition: from + 1_000_000 });
    expect(ahead.body.replay).toEqual({ rewound: false });
    const both = await api(project, 'POST', '/v1/exporters/replayed/replay', {
      fromPosition: 1,
      fromTime: new Date().toISOString(),
    });
    expect(both.status).toBe(400);
    expect(both.body.field).toBe('fromPosition');
  });

  it('validates the configuration, needs the admin scope, and deletes', async () => {
    const project = await createProject(svc.url);
    const bad = await api(project, 'PUT', '/v1/exporters/x', {
      type: 'webhook',
      url: 'ftp://example.com',
      signingSecret: 'whsec-test-0123456789',
    });
    expect(bad.status).toBe(400);
    expect(bad.body.field).toBe('url');
    const short = await api(project, 'PUT', '/v1/exporters/x', {
      type: 'webhook',
      url: 'http://127.0.0.1:9/',
      signingSecret: 'short',
    });
    expect(short.body.field).toBe('signingSecret');
    const badName = await api(project, 'PUT', '/v1/exporters/Bad%20Name', webhookExporter('http://127.0.0.1:9/'));
    expect(badName.body.field).toBe('name');

    const reader = await createProject(svc.url, ['read', 'ingest']);
    expect((await api(reader, 'GET', '/v1/exporters')).status).toBe(403);

    expect((await api(project, 'PUT', '/v1/exporters/gone', webhookExporter('http://127.0.0.1:9/'))).status).toBe(200);
    expect((await api(project, 'GET', '/v1/exporters')).body.exporters.map((e: any) => e.name)).toEqual(['gone']);
    const paused = await api(project, 'POST', '/v1/exporters/gone/pause');
    expect(paused.body).toMatchObject({ status: 'paused', pausedReason: 'paused through the API' });
    documented(exporterResponse, paused);
    const otlp = await api(project, 'PUT', '/v1/exporters/traces', { type: 'otlp', endpoint: 'http://127.0.0.1:9' });
    documented(putExporterResponse, otlp);
    const slack = await api(project, 'PUT', '/v1/exporters/chat', { type: 'slack', url: 'http://127.0.0.1:9/hook' });
    expect(slack.body.secrets).toEqual({ signingSecret: false, headers: [], url: true });
    documented(putExporterResponse, slack);
    const all = await api(project, 'GET', '/v1/exporters');
    expect(all.body.exporters.map((e: any) => e.name)).toEqual(['chat', 'gone', 'traces']);
    documented(exportersResponse, all);
    expect((await api(project, 'DELETE', '/v1/exporters/chat')).status).toBe(204);
    expect((await api(project, 'DELETE', '/v1/exporters/traces')).status).toBe(204);
    expect((await api(project, 'DELETE', '/v1/exporters/gone')).status).toBe(204);
    expect((await api(project, 'GET', '/v1/exporters/gone')).status).toBe(404);
  });

  it('serves the service metrics in Prometheus text', async () => {
    const project = await createProject(svc.url);
    const sink = await receiver();
    await api(project, 'PUT', '/v1/exporters/metered', webhookExporter(sink.url));
    await ingest(project, 3);
    await eventually(() => acceptedEventIds(sink).length === 3, 'delivery');
    const res = await fetch(`${svc.url}/metrics`);
    const text = await res.text();
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    for (const name of [
      'tollgate_ingest_events_total',
      'tollgate_ingest_batch_duration_seconds_bucket',
      'tollgate_guard_check_duration_seconds',
      'tollgate_guard_decisions_total',
      'tollgate_projection_lag_events',
      'tollgate_exporter_batches_total',
      'tollgate_queue_job_failures_total',
    ])
      expect(text).toContain(name);
    // Summed over tenants by default (per project and exporter only with METRICS_TENANT_LABELS=on: test/e2e/exposure.spec.ts).
    expect(text).not.toContain(project.id);
    expect(text).toMatch(/^tollgate_exporter_lag_events \d+$/m);
    expect(text).toMatch(/^tollgate_exporter_dead_letter_batches \d+$/m);
    expect(text).toMatch(/tollgate_queue_jobs\{queue="exports",state="failed"\} \d+/);
    expect(text).toMatch(/tollgate_db_pool_connections\{state="total"\} [1-9]/);
    expect(text).toMatch(/tollgate_db_pool_connections\{state="waiting"\} \d+/);
    expect(Number(/^tollgate_ingest_events_total (\d+)$/m.exec(text)?.[1])).toBeGreaterThanOrEqual(3);
    expect(
      Number(/^tollgate_exporter_events_delivered_total\{type="webhook"\} (\d+)$/m.exec(text)?.[1]),
    ).toBeGreaterThanOrEqual(3);
    expect(text).toMatch(/^tollgate_ingest_batch_duration_seconds_count\{status="200"\} [1-9]/m);
  });
});

describe('exporter secrets without TOLLGATE_SECRET_KEY', () => {
  it('refuses an exporter with secrets and says which setting is missing', async () => {
    const { startService } = await import('../support/service');
    const svc = await startService();
    try {
      const project = await createProject(svc.url);
      const res = await call(svc.url, 'PUT', '/v1/exporters/billing', {
        token: project.key,
        body: webhookExporter('http://127.0.0.1:9/'),
      });
      expect(res.status).toBe(501);
      expect(res.body.code).toBe('not_configured');
      expect(res.body.message).toContain('TOLLGATE_SECRET_KEY');
      const otlp = await call(svc.url, 'PUT', '/v1/exporters/traces', {
        token: project.key,
        body: { type: 'otlp', endpoint: 'http://127.0.0.1:9' },
      });
      expect(otlp.status).toBe(200);
      expect(otlp.body.secrets).toBeNull();
    } finally {
      await svc.close();
    }
  });
});
