import { TollgateClient, type DroppedEvents } from '@tollgate/sdk';
import { createProject } from '../support/http';
import { startService, type RunningService } from '../support/service';
import { ApiProcess, buildService, countEvents, freePort, sleep } from './support';

const PRODUCERS = 8;
const PER_PRODUCER = 1250;

/** 8 producers recording 1250 events each, `pauseEvery` events then a pause, like agents would. */
async function produce(client: TollgateClient, runTag: string, pauseEvery: number, pauseMs: number): Promise<void> {
  await Promise.all(
    Array.from({ length: PRODUCERS }, async (_, p) => {
      for (let i = 0; i < PER_PRODUCER; i++) {
        client.events.record({
          traceId: `${runTag}-producer-${p}`,
          runId: `${runTag}-producer-${p}`,
          resourceId: `resource-${p % 3}`,
          entityType: 'agent',
          entityName: 'load-agent',
          provider: 'openai',
          model: 'gpt-4o-mini',
          stepIndex: i,
          usage: { inputTokens: 100 + i, outputTokens: 10 },
        });
        if ((i + 1) % pauseEvery === 0) await sleep(pauseMs);
      }
    }),
  );
}

describe('SDK end to end: events.record against the real service', () => {
  let svc: RunningService;
  beforeAll(async () => {
    svc = await startService();
  });
  afterAll(() => svc.close());

  it('stores exactly 10,000 events recorded by 8 concurrent producers', async () => {
    const project = await createProject(svc.url, ['ingest']);
    const drops: DroppedEvents[] = [];
    const client = new TollgateClient({ baseUrl: svc.url, apiKey: project.key, onDrop: (d) => drops.push(d) });
    await produce(client, 'steady', 100, 1);
    await client.shutdown();
    expect(drops).toEqual([]);
    expect(client.events.stats).toMatchObject({
      accepted: 10_000,
      duplicates: 0,
      rejected: 0,
      dropped: 0,
      buffered: 0,
    });
    expect(await countEvents(project.id)).toBe(10_000);
  });

  it('reports a rejected batch and an invalid event with the field to fix', async () => {
    const project = await createProject(svc.url, ['read']);
    const drops: DroppedEvents[] = [];
    const client = new TollgateClient({ baseUrl: svc.url, apiKey: project.key, onDrop: (d) => drops.push(d) });
    expect(() =>
      client.events.record({
        traceId: 't',
        entityType: 'agent',
        provider: 'openai',
        model: 'gpt-4o',
        usage: { inputTokens: 10, outputTokens: 20, reasoningTokens: 30 },
      }),
    ).toThrow(
      'Invalid step event: usage.reasoningTokens must not exceed outputTokens (it is a part of it, not added on top)',
    );
    client.events.record({
      traceId: 't',
      entityType: 'agent',
      provider: 'openai',
      model: 'gpt-4o',
      usage: { inputTokens: 10, outputTokens: 20 },
    });
    await client.shutdown();
    // A key without the ingest scope: refused for good, never retried.
    expect(drops).toHaveLength(1);
    expect(drops[0]).toMatchObject({ reason: 'unrecoverable', error: { status: 403, code: 'forbidden' } });
    expect(client.events.stats).toMatchObject({ requests: 1, dropped: 1 });
  });
});

describe('SDK end to end: the service restarts while agents record', () => {
  let api: ApiProcess;
  beforeAll(async () => {
    buildService();
    api = new ApiProcess(await freePort());
    await api.start();
  }, 120_000);
  afterAll(() => api.kill());

  it('stores exactly 10,000 events when the service is down for 3 s in the middle', async () => {
    const project = await createProject(api.url, ['ingest']);
    const drops: DroppedEvents[] = [];
    let retries = 0;
    const client = new TollgateClient({
      baseUrl: api.url,
      apiKey: project.key,
      flushIntervalMs: 200,
      onDrop: (d) => drops.push(d),
      onRetry: () => retries++,
    });
    // About 5 s of recording: 8 producers, 25 events every 100 ms each.
    const producing = produce(client, 'restart', 25, 100);
    await sleep(1500);
    await api.kill();
    const recordedBeforeOutage = client.events.stats.accepted;
    await sleep(3000);
    await api.start();
    await producing;
    await client.shutdown({ timeoutMs: 60_000 });
    expect(recordedBeforeOutage).toBeGreaterThan(0);
    expect(recordedBeforeOutage).toBeLessThan(10_000);
    expect(retries).toBeGreaterThan(0);
    expect(drops).toEqual([]);
    expect(client.events.stats).toMatchObject({ rejected: 0, dropped: 0, buffered: 0 });
    expect(client.events.stats.accepted + client.events.stats.duplicates).toBe(10_000);
    expect(await countEvents(project.id)).toBe(10_000);
  }, 120_000);
});
