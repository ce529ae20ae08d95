import { TollgateClient, TollgateError, type FlushResult } from '@tollgate/sdk';
import { TEST_ADMIN_TOKEN } from '../support/env';
import { call, createProject } from '../support/http';
import { startService, type RunningService } from '../support/service';
import { countEvents } from './support';

const step = (i: number, extra: Record<string, unknown> = {}) => ({
  traceId: `trace-${i}`,
  entityType: 'agent',
  entityName: 'support',
  provider: 'openai',
  model: 'gpt-4o',
  usage: { inputTokens: 100 + i, outputTokens: 10 },
  ...extra,
});

describe('SDK: a wrong or revoked key never drops events silently', () => {
  let svc: RunningService;
  let warn: jest.SpyInstance;
  beforeAll(async () => {
    svc = await startService();
  });
  afterAll(() => svc.close());
  beforeEach(() => {
    warn = jest.spyOn(console, 'warn').mockImplementation(() => {});
  });
  afterEach(() => warn.mockRestore());

  it('a wrong key: flush() says nothing was delivered and why, and the first 401 is a console warning', async () => {
    const project = await createProject(svc.url, ['ingest']);
    const client = new TollgateClient({ baseUrl: svc.url, apiKey: `${project.key}x` });
    for (let i = 0; i < 3; i++) client.events.record(step(i));
    const first: FlushResult = await client.flush();
    expect(first).toEqual({
      delivered: 0,
      accepted: 0,
      duplicates: 0,
      rejected: 0,
      dropped: 3,
      droppedBy: { unrecoverable: 3 },
      pending: 0,
      ok: false,
      error: expect.any(TollgateError),
    });
    expect(first.error).toMatchObject({ code: 'unauthorized', status: 401 });
    expect(warn).toHaveBeenCalledTimes(1);
    expect(warn.mock.calls[0][0]).toMatch(
      /^\[tollgate\] POST \/v1\/events failed with 401 unauthorized: .*check the apiKey given to TollgateClient\. 3 event\(s\) dropped/,
    );
    expect(warn.mock.calls[0][0]).not.toContain(project.key);
    // Later batches are dropped too, and said so by flush(); the warning is not repeated.
    client.events.record(step(4));
    expect(await client.flush()).toMatchObject({
      delivered: 0,
      dropped: 1,
      ok: false,
      error: { code: 'unauthorized' },
    });
    expect(warn).toHaveBeenCalledTimes(1);
    await client.shutdown();
    expect(await countEvents(project.id)).toBe(0);
  });

  it('a key revoked while the client runs: an error event to the listener (no console warning), and flush() tells delivered from dropped', async () => {
    const project = await createProject(svc.url, ['ingest']);
    const errors: TollgateError[] = [];
    const client = new TollgateClient({ baseUrl: svc.url, apiKey: project.key }).on('error', (e) => errors.push(e));
    for (let i = 0; i < 2; i++) client.events.record(step(i));
    expect(await client.flush()).toEqual({
      delivered: 2,
      accepted: 2,
      duplicates: 0,
      rejected: 0,
      dropped: 0,
      droppedBy: {},
      pending: 0,
      ok: true,
    });

    const revoked = await call(svc.url, 'DELETE', `/v1/admin/projects/${project.id}/keys/${project.keyId}`, {
      token: TEST_ADMIN_TOKEN,
    });
    expect(revoked.status).toBeLessThan(300);
    for (let i = 2; i < 5; i++) client.events.record(step(i));
    const after = await client.shutdown();
    expect(after).toMatchObject({
      delivered: 0,
      dropped: 3,
      droppedBy: { unrecoverable: 3 },
      ok: false,
      error: { code: 'unauthorized', status: 401 },
    });
    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(TollgateError);
    expect(errors[0]).toMatchObject({ code: 'unauthorized', status: 401 });
    expect(warn).not.toHaveBeenCalled();
    expect(await countEvents(project.id)).toBe(2);
  });

  it('a key without the ingest scope: a 403 error event, and the stats agree with flush()', async () => {
    const project = await createProject(svc.url, ['read']);
    const errors: TollgateError[] = [];
    const client = new TollgateClient({ baseUrl: svc.url, apiKey: project.key });
    client.on('error', (e) => errors.push(e));
    client.events.record(step(1));
    const result = await client.flush();
    expect(result).toMatchObject({ delivered: 0, dropped: 1, ok: false, error: { code: 'forbidden', status: 403 } });
    expect(errors.map((e) => [e.code, e.status])).toEqual([['forbidden', 403]]);
    expect(client.events.stats).toMatchObject({ accepted: 0, dropped: 1, buffered: 0 });
    expect(warn).not.toHaveBeenCalled();
    await client.shutdown();
  });

  it('flush() counts each event once: what the timer delivered before the call, and a duplicate', async () => {
    const project = await createProject(svc.url, ['ingest']);
    const client = new TollgateClient({ baseUrl: svc.url, apiKey: project.key, flushIntervalMs: 10 });
    client.events.record(step(1, { eventId: 'evt-once-1' }));
    client.events.record(step(2, { eventId: 'evt-once-2' }));
    // Delivered by the interval flush before flush() is called.
    for (let i = 0; i < 100 && client.events.stats.accepted < 2; i++) await new Promise((r) => setTimeout(r, 10));
    client.events.record(step(1, { eventId: 'evt-once-1' }));
    expect(await client.flush()).toEqual({
      delivered: 3,
      accepted: 2,
      duplicates: 1,
      rejected: 0,
      dropped: 0,
      droppedBy: {},
      pending: 0,
      ok: true,
    });
    expect(await client.flush()).toMatchObject({ delivered: 0, dropped: 0, ok: true });
    await client.shutdown();
  });
});

describe("SDK: metric queries and discovery under Mastra's client names", () => {
  let svc: RunningService;
  beforeAll(async () => {
    svc = await startService();
  });
  afterAll(() => svc.close());

  it('getEntityTypes, getEntityNames, getServiceNames, getEnvironments, getTags, getMetricNames, getMetricAggregate … answer as the short names do', async () => {
    const project = await createProject(svc.url, ['ingest', 'read']);
    const client = new TollgateClient({ baseUrl: svc.url, apiKey: project.key });
    client.events.record(step(1, { serviceName: 'billing', environment: 'production', tags: ['beta'] }));
    client.events.record(
      step(2, {
        entityType: 'tool',
        entityName: 'lookup',
        serviceName: 'billing',
        environment: 'staging',
        tags: ['beta', 'eu'],
      }),
    );
    expect(await client.flush()).toMatchObject({ delivered: 2, ok: true });
    const m = client.metrics;
    // Answers carry the projection's lag beside Mastra's fields; the values are what matters here.
    const values = async <T extends object>(p: Promise<T>) => {
      const { lag: _lag, ...rest } = (await p) as T & { lag?: unknown };
      return rest;
    };
    expect(await values(m.getEntityTypes())).toEqual({ entityTypes: ['agent', 'tool'] });
    expect(await values(m.discovery.getEntityTypes({}))).toEqual({ entityTypes: ['agent', 'tool'] });
    expect(await values(m.getEntityNames({ entityType: 'tool' }))).toEqual({ names: ['lookup'] });
    expect(await values(m.getServiceNames())).toEqual({ serviceNames: ['billing'] });
    expect(await values(m.getEnvironments())).toEqual({ environments: ['production', 'staging'] });
    expect(await values(m.getTags())).toEqual({ tags: ['beta', 'eu'] });
    expect(await values(m.getTags({ entityType: 'agent' }))).toEqual(
      await values(m.discovery.tags({ entityType: 'agent' })),
    );
    expect(await values(m.getMetricNames({ prefix: 'mastra_model_' }))).toEqual(
      await values(m.discovery.metricNames({ prefix: 'mastra_model_' })),
    );
    expect(await values(m.getMetricLabelKeys({ metricName: 'mastra_model_total_input_tokens' }))).toEqual(
      await values(m.discovery.metricLabelKeys({ metricName: 'mastra_model_total_input_tokens' })),
    );
    const request = {
      name: ['mastra_model_total_input_tokens'],
      aggregation: 'sum' as const,
      filters: { entityName: 'support' },
    };
    expect(await values(m.getMetricAggregate(request))).toEqual(await values(m.aggregate(request)));
    await client.shutdown();
  });
});
