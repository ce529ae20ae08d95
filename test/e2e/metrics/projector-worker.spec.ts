import type { INestApplicationContext } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import { createWorkerApp } from '../../../apps/worker/src/bootstrap';
import { call, createProject, stepEvent } from '../../support/http';
import { startService, testConfig, type RunningService } from '../../support/service';

describe('the rollup projector in the worker', () => {
  let svc: RunningService;
  let worker: INestApplicationContext;

  beforeAll(async () => {
    const QUEUE_PREFIX = `tollgate-test-${randomBytes(4).toString('hex')}`;
    svc = await startService({ QUEUE_PREFIX });
    worker = await createWorkerApp(testConfig({ QUEUE_PREFIX }));
    await worker.init();
  });
  afterAll(async () => {
    await worker?.close();
    await svc?.close();
  });

  it('is woken by ingest through BullMQ and brings the rollups up to the log', async () => {
    const project = await createProject(svc.url);
    const events = Array.from({ length: 30 }, (_, i) =>
      stepEvent({
        usage: { inputTokens: 100 + i, outputTokens: 10 },
        resourceId: 'r-worker',
        occurredAt: new Date(Date.now() - i * 3_600_000).toISOString(),
      }),
    );
    expect((await call(svc.url, 'POST', '/v1/events', { token: project.key, body: { events } })).body.accepted).toBe(
      30,
    );
    const ask = () =>
      call(svc.url, 'POST', '/api/observability/metrics/aggregate', {
        token: project.key,
        body: { name: ['mastra_model_total_input_tokens'], aggregation: 'sum', filters: { resourceId: 'r-worker' } },
      });
    // Exact at once (the tail is read from the log), then the lag drains as the worker projects.
    expect((await ask()).body.value).toBe(30 * 100 + 435);
    let reply = await ask();
    for (let i = 0; i < 100 && reply.body.lag.events > 0; i++) {
      await new Promise((r) => setTimeout(r, 200));
      reply = await ask();
    }
    expect(reply.body).toMatchObject({ value: 3435, lag: { events: 0 } });
    const [rollup] = await svc.prisma.$queryRawUnsafe<{ n: number }[]>(
      `SELECT sum(count)::int AS n FROM metric_rollups WHERE project_id = $1 AND granularity = 'd' AND name = 1`,
      project.id,
    );
    expect(rollup.n).toBe(30);
  }, 60_000);
});
