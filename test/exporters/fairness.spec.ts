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

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/**
 * One tenant's slow sinks must not take another tenant's deliveries hostage: the exports queue
 * is shared (EXPORTS_CONCURRENCY jobs at a time), and a project gets at most its share of it
 * while another project has work.
 */
describe('export delivery is fair across projects', () => {
  let svc: RunningService;
  const receivers: Receiver[] = [];
  let releaseSlow: () => void = () => undefined;
  const slowAnswered = new Promise<void>((r) => (releaseSlow = r));

  beforeAll(async () => {
    svc = await startServiceWithWorker({ EXPORTS_CONCURRENCY: '4' });
  });
  afterAll(async () => {
    releaseSlow();
    await svc.close();
    await Promise.all(receivers.map((r) => r.close()));
  });

  const api = (project: TestProject, method: string, path: string, body?: unknown) =>
    call(svc.url, method, path, { token: project.key, body });
  const ingest = async (project: TestProject, count: number) => {
    const res = await api(project, 'POST', '/v1/events', { events: Array.from({ length: count }, () => stepEvent()) });
    expect(res.body.accepted).toBe(count);
  };

  /** A fresh project with a 100-event backlog; the time from creating its exporter to the last event at a fast receiver. */
  async function deliveryTime(): Promise<number> {
    const sink = await startReceiver();
    receivers.push(sink);
    const project = await createProject(svc.url);
    await ingest(project, 100);
    const started = Date.now();
    const put = await api(
      project,
      'PUT',
      '/v1/exporters/billing',
      webhookExporter(sink.url, { startFrom: 'beginning', batch: { maxEvents: 10, maxWaitMs: 0 } }),
    );
    expect(put.status).toBe(200);
    await eventually(() => new Set(acceptedEventIds(sink)).size === 100, 'the backlog delivered', 15_000);
    return Date.now() - started;
  }

  it("keeps another project's delivery time within 1.5x of its time alone while one tenant has six slow sinks", async () => {
    await deliveryTime(); // warm-up: connections, prepared statements
    const alone = median([await deliveryTime(), await deliveryTime(), await deliveryTime()]);

    // Tenant A: six exporters whose receivers hold every request until the test ends.
    const noisy = await createProject(svc.url);
    await ingest(noisy, 5);
    const slow: Receiver[] = [];
    for (let i = 0; i < 6; i++) {
      const sink = await startReceiver(async () => {
        await slowAnswered;
        return 200;
      });
      receivers.push(sink);
      slow.push(sink);
      const put = await api(
        noisy,
        'PUT',
        `/v1/exporters/slow-${i}`,
        webhookExporter(sink.url, { startFrom: 'beginning', timeoutMs: 10_000 }),
      );
      expect(put.status).toBe(200);
    }
    const open = () => slow.reduce((n, s) => n + s.requests.length, 0);
    await eventually(() => open() >= 2, "tenant A's slow requests in progress");

    const loaded = median([await deliveryTime(), await deliveryTime(), await deliveryTime()]);
    const held = open();
    process.stdout.write(
      `fairness: another project's 100-event delivery alone ${alone} ms, with 6 slow sinks of one tenant ${loaded} ms (${(loaded / alone).toFixed(2)}x); slow requests held: ${held}\n`,
    );
    // Tenant A still had sinks running (it was not simply shut out).
    expect(held).toBeGreaterThanOrEqual(2);
    expect(loaded).toBeLessThanOrEqual(alone * 1.5);
  }, 90_000);
});
