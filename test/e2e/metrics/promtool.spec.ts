import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { call, createProject, stepEvent } from '../../support/http';
import { startService, type RunningService } from '../../support/service';

/**
 * GET /metrics as Prometheus's own linter reads it: `promtool check metrics` (Debian's `prometheus`
 * package; .ci/run installs it) on a real scrape, with and without tenant labels, after ingest, a
 * guard check and an exporter so that labelled series have samples. Any problem it reports fails.
 */
function promtool(exposition: string): { status: number | null; output: string } {
  const run = spawnSync('promtool', ['check', 'metrics'], { input: exposition, encoding: 'utf8' });
  if (run.error) throw new Error(`promtool: ${run.error.message} (apt-get install -y prometheus provides it)`);
  return { status: run.status, output: `${run.stdout}${run.stderr}`.trim() };
}

const METRICS_TOKEN = 'metrics-token-0123456789abcdef';
let plain: RunningService;
let tenant: RunningService;

beforeAll(async () => {
  [plain, tenant] = await Promise.all([startService(), startService({ METRICS_TOKEN, METRICS_TENANT_LABELS: 'on' })]);
});
afterAll(async () => {
  await plain?.close();
  await tenant?.close();
});

async function busyScrape(svc: RunningService, token?: string): Promise<string> {
  const project = await createProject(svc.url, ['ingest', 'guard', 'read', 'admin']);
  const resourceId = `r-${randomUUID()}`;
  expect(
    (await call(svc.url, 'POST', '/v1/events', { token: project.key, body: { events: [stepEvent()] } })).status,
  ).toBe(200);
  const check = await call(svc.url, 'POST', '/v1/guard/check', {
    token: project.key,
    body: {
      context: { resourceId },
      limits: [{ scope: 'resource', window: '24h', maxCost: 1 }],
      estimate: { provider: 'openai', model: 'gpt-4o', inputTokens: 10, maxOutputTokens: 10 },
    },
  });
  expect(check.status).toBe(200);
  const exporter = await call(svc.url, 'PUT', '/v1/exporters/promtool', {
    token: project.key,
    body: { type: 'otlp', endpoint: 'http://127.0.0.1:9' },
  });
  expect(exporter.status).toBe(200);
  const scrape = await call(svc.url, 'GET', '/metrics', { token });
  expect(scrape.status).toBe(200);
  return scrape.body as string;
}

it('promtool finds no problem in the exposition without tenant labels', async () => {
  const text = await busyScrape(plain);
  expect(text).toMatch(/^tollgate_guard_decisions_total\{outcome="allow"\} \d+$/m);
  expect(promtool(text)).toEqual({ status: 0, output: '' });
});

it('promtool finds no problem in the exposition with tenant labels', async () => {
  const text = await busyScrape(tenant, METRICS_TOKEN);
  expect(text).toMatch(/^tollgate_exporter_paused\{project="[^"]+",exporter="promtool"\} \d+$/m);
  expect(promtool(text)).toEqual({ status: 0, output: '' });
});

it('keeps the per-type gauges whose sums the `_total` gauges repeated under a counter’s name', async () => {
  const text = (await call(plain.url, 'GET', '/metrics')).body as string;
  expect(text).toMatch(/^# TYPE tollgate_nodejs_active_handles gauge$/m);
  expect(text).not.toMatch(/tollgate_nodejs_active_(handles|requests|resources)_total/);
  // What promtool says of a gauge named like a counter, so the checks above are known to catch it.
  expect(promtool('# HELP x_total A gauge.\n# TYPE x_total gauge\nx_total 1\n').output).toMatch(/x_total/);
});
