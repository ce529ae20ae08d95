import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { call, createProject, stepEvent, type TestProject } from '../support/http';
import type { RunningService } from '../support/service';
import { eventually, startServiceWithWorker } from './support';

/** A raw HTTP receiver on 127.0.0.1 that counts the connections it was opened and the bytes it wrote. */
async function rawReceiver(
  handle: (req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) => void,
) {
  const stats = { connections: 0, requests: 0, bytesWritten: 0 };
  const sockets = new Set<Socket>();
  const server: Server = createServer((req, res) => {
    stats.requests++;
    req.resume();
    req.on('end', () => handle(req, res));
  });
  server.on('connection', (s: Socket) => {
    stats.connections++;
    sockets.add(s);
    s.on('close', () => {
      stats.bytesWritten += s.bytesWritten;
      sockets.delete(s);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    stats,
    written: () => stats.bytesWritten + [...sockets].reduce((n, s) => n + s.bytesWritten, 0),
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

const MARKER = 'internal-secret-marker-7f3a';

const fastRetry = { maxAttempts: 1, initialBackoffMs: 50, maxBackoffMs: 100 };
const webhook = (url: string, extra: Record<string, unknown> = {}) => ({
  type: 'webhook',
  url,
  signingSecret: 'whsec-test-0123456789',
  batch: { maxEvents: 50, maxWaitMs: 20 },
  retry: fastRetry,
  timeoutMs: 2000,
  ...extra,
});

describe('exporter destinations: no private address unless the operator allows it', () => {
  let strict: RunningService;
  const closers: (() => Promise<void>)[] = [];
  beforeAll(async () => {
    // No TOLLGATE_EXPORTER_ALLOW_HOSTS: only public destinations.
    strict = await startServiceWithWorker({ TOLLGATE_EXPORTER_ALLOW_HOSTS: '' });
  });
  afterAll(async () => {
    await strict.close();
    await Promise.all(closers.map((c) => c()));
  });

  const put = (svc: RunningService, project: TestProject, name: string, body: unknown) =>
    call(svc.url, 'PUT', `/v1/exporters/${name}`, { token: project.key, body });

  it('refuses, when the exporter is saved, every spelling of a loopback, private, link-local or otherwise internal address, naming the field and why', async () => {
    const project = await createProject(strict.url);
    const cases: [string, RegExp][] = [
      ['http://127.0.0.1:6379/', /loopback/],
      [strict.url + '/v1/events', /loopback/],
      ['http://169.254.169.254/latest/meta-data/', /link-local/],
      ['http://[fd00:ec2::254]/', /private/],
      ['http://10.1.2.3/', /private/],
      ['http://172.16.0.1/', /private/],
      ['http://192.168.1.1/', /private/],
      ['http://100.64.0.1/', /carrier-grade NAT/],
      ['http://198.18.0.1/', /benchmarking/],
      ['http://localhost:3000/', /loopback/],
      ['http://0.0.0.0:3000/', /unspecified/],
      ['http://0/', /unspecified/],
      ['http://[::]/', /unspecified/],
      ['http://[::1]:6379/', /loopback/],
      ['http://2130706433/', /loopback/],
      ['http://0x7f000001/', /loopback/],
      ['http://0177.0.0.1/', /loopback/],
      ['http://127.1/', /loopback/],
      ['http://[::ffff:127.0.0.1]/', /loopback address \(in IPv4-mapped form\)/],
      ['http://[::ffff:a9fe:a9fe]/', /link-local address .* \(in IPv4-mapped form\)/],
      ['http://[fe80::1]/', /link-local/],
      ['http://[fec0::1]/', /site-local/],
      ['http://[64:ff9b::10.0.0.1]/', /private address \(in NAT64 form\)/],
      ['http://[2002:a9fe:a9fe::1]/', /link-local address .* \(in 6to4 form\)/],
      ['http://224.0.0.1/', /multicast/],
      ['http://[ff02::1]/', /multicast/],
    ];
    for (const [url, why] of cases) {
      const res = await put(strict, project, 'x', webhook(url));
      expect({ url, status: res.status, field: res.body.field }).toEqual({ url, status: 400, field: 'url' });
      expect(res.body.message).toMatch(why);
      expect(res.body.message).toContain('TOLLGATE_EXPORTER_ALLOW_HOSTS');
    }
    const otlp = await put(strict, project, 'traces', { type: 'otlp', endpoint: 'http://169.254.169.254:4318' });
    expect([otlp.status, otlp.body.field]).toEqual([400, 'endpoint']);
    expect(otlp.body.message).toMatch(/link-local/);
    expect((await call(strict.url, 'GET', '/v1/exporters', { token: project.key })).body.exporters).toEqual([]);
  });

  it('checks the address again at every delivery, and refuses before connecting', async () => {
    // An exporter saved before the check existed (or whose host name now resolves elsewhere).
    const sink = await rawReceiver((_req, res) => res.end('{}'));
    closers.push(sink.close);
    const project = await createProject(strict.url);
    const id = `exp_${Date.now().toString(16)}`;
    await strict.prisma.exporter.create({
      data: {
        id,
        projectId: project.id,
        name: 'legacy',
        type: 'otlp',
        checkpointTx: '0',
        checkpointPosition: 0n,
        settings: {
          type: 'otlp',
          endpoint: sink.url,
          serviceName: 'tollgate',
          batch: { maxEvents: 50, maxBytes: 1 << 20, maxWaitMs: 20 },
          retry: fastRetry,
          timeoutMs: 2000,
          pauseAfterFailures: 1,
        },
      },
    });
    await call(strict.url, 'POST', '/v1/events', { token: project.key, body: { events: [stepEvent(), stepEvent()] } });
    const state = await eventually(async () => {
      const g = await call(strict.url, 'GET', '/v1/exporters/legacy', { token: project.key });
      return g.body.status === 'paused' ? g.body : null;
    }, 'the exporter paused');
    expect(state.pausedReason).toContain(
      `POST ${sink.url}/v1/traces refused: the destination points at a loopback address`,
    );
    expect(sink.stats.connections).toBe(0);
  });
});

describe('what a tenant sees of a failed delivery', () => {
  let svc: RunningService;
  const closers: (() => Promise<void>)[] = [];
  beforeAll(async () => {
    // The test receivers are on 127.0.0.1, which the operator allows here.
    svc = await startServiceWithWorker({ TOLLGATE_EXPORTER_ALLOW_HOSTS: '127.0.0.1' });
  });
  afterAll(async () => {
    await svc.close();
    await Promise.all(closers.map((c) => c()));
  });
  const api = (project: TestProject, method: string, path: string, body?: unknown) =>
    call(svc.url, method, path, { token: project.key, body });

  /** Puts an exporter, sends it one event, returns its dead letter once there is one. */
  async function deadLetterOf(url: string, extra: Record<string, unknown> = {}) {
    const project = await createProject(svc.url);
    const put = await api(project, 'PUT', '/v1/exporters/probe', webhook(url, { pauseAfterFailures: 1, ...extra }));
    expect(put.status).toBe(200);
    await api(project, 'POST', '/v1/events', { events: [stepEvent()] });
    const dead = await eventually(
      async () => (await api(project, 'GET', '/v1/exporters/probe/dead-letters')).body.deadLetters?.[0],
      'a dead letter',
      15_000,
    );
    const state = (await api(project, 'GET', '/v1/exporters/probe')).body;
    return { lastError: dead.lastError as string, pausedReason: state.pausedReason as string, project };
  }

  it('refuses a URL with a user name or password', async () => {
    const project = await createProject(svc.url);
    const res = await api(project, 'PUT', '/v1/exporters/creds', webhook('http://user:pass@127.0.0.1:9/hook'));
    expect([res.status, res.body.field]).toEqual([400, 'url']);
    expect(res.body.message).toMatch(/user name or password/);
  });

  it('caps timeoutMs at EXPORTS_MAX_TIMEOUT_MS, naming the field', async () => {
    const project = await createProject(svc.url);
    const res = await api(project, 'PUT', '/v1/exporters/slow', webhook('http://127.0.0.1:9/', { timeoutMs: 120_000 }));
    expect([res.status, res.body.field]).toEqual([400, 'timeoutMs']);
    expect(res.body.message).toMatch(/at most 10000.*EXPORTS_MAX_TIMEOUT_MS/);
    const ok = await api(project, 'PUT', '/v1/exporters/slow', {
      type: 'webhook',
      url: 'http://127.0.0.1:9/',
      signingSecret: 'whsec-test-0123456789',
    });
    expect([ok.status, ok.body.settings.timeoutMs]).toEqual([200, 10_000]);
  });

  it('stores the status and a fixed reason, never a byte of the answer', async () => {
    const sink = await rawReceiver((_req, res) => {
      res.writeHead(400, { 'content-type': 'text/plain' });
      res.end(`${MARKER} redis_version:7.2.4 ${'x'.repeat(500)}`);
    });
    closers.push(sink.close);
    const { lastError, pausedReason } = await deadLetterOf(sink.url + '/hook');
    expect(lastError).toBe(`POST ${sink.url}/hook answered 400 (the receiver refused the batch)`);
    expect(pausedReason).not.toContain(MARKER);
    expect(pausedReason).not.toContain('redis_version');
  });

  it('does not follow a redirect', async () => {
    const target = await rawReceiver((_req, res) => res.end('{}'));
    const sink = await rawReceiver((_req, res) => {
      res.writeHead(307, { location: `${target.url}/elsewhere` });
      res.end();
    });
    closers.push(sink.close, target.close);
    const { lastError } = await deadLetterOf(sink.url);
    expect(lastError).toBe(`POST ${sink.url} answered 307 (a redirect, which exporters do not follow)`);
    expect(target.stats.connections).toBe(0);
  });

  it('reads at most 64 KiB of an answer, however large', async () => {
    const sink = await rawReceiver((_req, res) => {
      res.writeHead(500, { 'content-type': 'application/octet-stream', 'content-length': String(32 * 1024 * 1024) });
      const chunk = Buffer.alloc(64 * 1024, 'y');
      let left = 512;
      const pump = () => {
        while (left > 0) {
          left--;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        res.end();
      };
      res.on('error', () => undefined);
      pump();
    });
    closers.push(sink.close);
    const { lastError } = await deadLetterOf(sink.url);
    expect(lastError).toBe(`POST ${sink.url} answered 500 (the receiver failed) (after 1 attempts)`);
    await eventually(() => sink.stats.connections > 0 && sink.written() > 0, 'bytes written');
    // What the sender let through: its 64 KiB plus the socket buffers of both ends.
    expect(sink.written()).toBeLessThan(8 * 1024 * 1024);
  });

  it('tells a refused port, a reset connection and a silent receiver apart by nothing', async () => {
    const closed = await rawReceiver(() => undefined);
    await closed.close();
    const reset = await rawReceiver((req) => req.socket.destroy());
    const silent = await rawReceiver(() => undefined);
    closers.push(reset.close, silent.close);
    const errors = [];
    for (const r of [closed, reset, silent]) {
      const { lastError } = await deadLetterOf(r.url + '/hook', { timeoutMs: 300 });
      errors.push(lastError.replace(r.url, '<url>'));
    }
    expect(new Set(errors).size).toBe(1);
    expect(errors[0]).toBe(
      'POST <url>/hook failed: no answer from the receiver (connection failed, was closed, or timed out) (after 1 attempts)',
    );
  });
});
