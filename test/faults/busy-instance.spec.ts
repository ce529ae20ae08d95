import { randomUUID } from 'node:crypto';
import { Agent, request } from 'node:http';
import { connect } from 'node:net';
import { createProject, stepEvent, type TestProject } from '../support/http';
import { freePort } from '../sdk/support';
import { buildOnce, newQueuePrefix, pg, processEnv, ServiceProcess, sleep } from './harness';

/** One POST through node:http (a Buffer written as is: the client spends next to no CPU, so all 200 are in flight at once). */
function post(
  url: string,
  key: string,
  body: Buffer,
  agent: Agent,
  timeoutMs: number,
): Promise<{ status: number; retryAfter: string | null; json: any }> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}/v1/events`,
      {
        method: 'POST',
        agent,
        timeout: timeoutMs,
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': body.length },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          let json: any = {};
          try {
            json = JSON.parse(Buffer.concat(chunks).toString());
          } catch {
            /* not JSON */
          }
          resolve({
            status: res.statusCode ?? 0,
            retryAfter: (res.headers['retry-after'] as string | undefined) ?? null,
            json,
          });
        });
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(body);
  });
}

/** A batch of 1000 valid events, just under INGEST_MAX_BODY_BYTES (1 MiB), all with one trace id. */
function mebibyteBatch(traceId: string): string {
  const event = (pad: number) => stepEvent({ traceId, labels: { pad: 'x'.repeat(pad) } });
  const base = JSON.stringify({ events: Array.from({ length: 1000 }, () => event(0)) }).length;
  const pad = Math.min(1024, Math.floor((1024 * 1024 - 200 - base) / 1000));
  const body = JSON.stringify({ events: Array.from({ length: 1000 }, () => event(pad)) });
  if (body.length > 1024 * 1024 || body.length < 1000 * 1024) throw new Error(`batch of ${body.length} bytes`);
  return body;
}

interface Sample {
  status: number | 'timeout' | 'network';
  ms: number;
}

/** GET /health/ready every `everyMs` with a load balancer's timeout, until stopped. */
function sampleReadiness(url: string, everyMs: number, timeoutMs: number) {
  const samples: Sample[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const t = performance.now();
      const status = await fetch(`${url}/health/ready`, { signal: AbortSignal.timeout(timeoutMs) }).then(
        (r) => r.status,
        (err: Error) => (err.name === 'TimeoutError' ? ('timeout' as const) : ('network' as const)),
      );
      samples.push({ status, ms: Math.round(performance.now() - t) });
      await sleep(everyMs);
    }
  })();
  return {
    samples,
    stop: async () => {
      running = false;
      await loop;
      return samples;
    },
  };
}

/**
 * Sends the headers of a 1 MiB ingest request, then one byte a second: how long until the service
 * closes the connection (it should at HTTP_REQUEST_TIMEOUT_MS), or `null` if it has not after `giveUpMs`.
 */
function slowBody(
  port: number,
  key: string,
  giveUpMs: number,
): Promise<{ closedAfterMs: number | null; answer: string }> {
  return new Promise((resolve) => {
    const started = performance.now();
    const socket = connect(port, '127.0.0.1');
    let answer = '';
    const drip = setInterval(() => socket.write('{'), 1000);
    const finish = (closedAfterMs: number | null) => {
      clearInterval(drip);
      clearTimeout(giveUp);
      socket.destroy();
      resolve({ closedAfterMs, answer: answer.split('\r\n')[0] });
    };
    const giveUp = setTimeout(() => finish(null), giveUpMs);
    socket.on('data', (d) => (answer += String(d)));
    socket.on('close', () => finish(Math.round(performance.now() - started)));
    socket.on('error', () => undefined);
    socket.write(
      `POST /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: 1048000\r\n\r\n`,
    );
  });
}

/**
 * One API process on a 20-connection pool, hit with more than it can take at once. A busy but
 * healthy instance must stay ready (a load balancer would otherwise drop it), refuse what it cannot
 * take at once with 503 + Retry-After (storing nothing of a refused batch), and still close a
 * request whose body trickles in at the request timeout.
 */
describe('faults: a busy API instance stays ready and sheds ingest at once', () => {
  const REQUEST_TIMEOUT_MS = 10_000;
  /** How long a load balancer's health check waits for an answer. */
  const READINESS_TIMEOUT_MS = 2000;
  let api: ServiceProcess;
  let project: TestProject;
  const figures: string[] = [];

  beforeAll(async () => {
    buildOnce();
    // The per-key rate limit is off: the point is the instance's own limits, not a key's.
    const env = {
      ...processEnv(newQueuePrefix()),
      DATABASE_POOL_SIZE: '20',
      RATE_LIMIT_PER_KEY_PER_SECOND: '0',
      HTTP_REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
    };
    api = new ServiceProcess('api', env, await freePort());
    await api.start();
    project = await createProject(api.url, ['ingest']);
  }, 120_000);

  afterAll(async () => {
    await api?.kill();
    process.stdout.write(['', 'busy instance (1 API process, pool of 20)', ...figures, ''].join('\n'));
  });

  it('200 concurrent 1 MiB batches: every readiness sample is 200; each batch is stored whole (200) or not at all (503 + Retry-After)', async () => {
    const run = randomUUID().slice(0, 8);
    const batches = Array.from({ length: 200 }, (_, i) => ({
      traceId: `busy-${run}-${i}`,
      body: Buffer.from(mebibyteBatch(`busy-${run}-${i}`)),
    }));
    const agent = new Agent({ keepAlive: false, maxSockets: Infinity });
    const readiness = sampleReadiness(api.url, 100, READINESS_TIMEOUT_MS);
    await sleep(400);
    const started = performance.now();
    const answers = await Promise.all(
      batches.map(async ({ traceId, body }) => {
        try {
          const res = await post(api.url, project.key, body, agent, 45_000);
          return {
            traceId,
            status: res.status as number | string,
            retryAfter: res.retryAfter,
            accepted: (res.json.accepted as number) ?? 0,
            ms: performance.now() - started,
          };
        } catch (err) {
          return {
            traceId,
            status: `error: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
            retryAfter: null,
            accepted: 0,
            ms: performance.now() - started,
          };
        }
      }),
    );
    await sleep(400);
    const samples = await readiness.stop();
    agent.destroy();

    const stored = await pg(async (c) => {
      const res = await c.query(
        `SELECT trace_id, count(*)::int AS n FROM events WHERE project_id = $1 AND trace_id LIKE $2 GROUP BY trace_id`,
        [project.id, `busy-${run}-%`],
      );
      return new Map(res.rows.map((r) => [r.trace_id as string, r.n as number]));
    });
    const byStatus = new Map<string, number>();
    for (const a of answers) byStatus.set(String(a.status), (byStatus.get(String(a.status)) ?? 0) + 1);
    const shed = answers.filter((a) => a.status === 503);
    const slowest503 = Math.max(0, ...shed.map((a) => a.ms));
    figures.push(
      `  200 × 1 MiB at once: ${[...byStatus].map(([s, n]) => `${n} × ${s}`).join(', ')}; all answered within ${Math.round(Math.max(...answers.map((a) => a.ms)))} ms (last 503 at ${Math.round(slowest503)} ms)`,
      `  /health/ready during the load: ${samples.filter((s) => s.status === 200).length}/${samples.length} answered 200, slowest ${Math.max(...samples.map((s) => s.ms))} ms (${
        samples
          .map((s) => s.status)
          .filter((s) => s !== 200)
          .join(', ') || 'no failures'
      })`,
    );

    expect(samples.length).toBeGreaterThanOrEqual(5);
    expect(samples.filter((s) => s.status !== 200)).toEqual([]);
    expect([...byStatus.keys()].filter((s) => s !== '200' && s !== '503')).toEqual([]);
    // Some were taken and the rest refused: the instance neither fell over nor queued all of them.
    expect(byStatus.get('200') ?? 0).toBeGreaterThan(0);
    for (const a of shed) expect(Number(a.retryAfter)).toBeGreaterThanOrEqual(1);
    for (const a of answers)
      expect([a.traceId, stored.get(a.traceId) ?? 0]).toEqual([a.traceId, a.status === 200 ? 1000 : 0]);
    for (const a of answers.filter((x) => x.status === 200)) expect(a.accepted).toBe(1000);
  }, 60_000);

  it(`a request whose body trickles in is closed at HTTP_REQUEST_TIMEOUT_MS (${REQUEST_TIMEOUT_MS} ms), also while the instance is busy`, async () => {
    const port = Number(new URL(api.url).port);
    const run = randomUUID().slice(0, 8);
    const idle = await slowBody(port, project.key, REQUEST_TIMEOUT_MS + 6000);
    // The same, while 50 clients send 1 MiB batches back to back and keep the instance busy.
    const body = mebibyteBatch(`slow-${run}`);
    const agent = new Agent({ keepAlive: true, maxSockets: Infinity });
    let loading = true;
    let sent = 0;
    const load = Promise.all(
      Array.from({ length: 50 }, async () => {
        while (loading) {
          sent++;
          await post(
            api.url,
            project.key,
            Buffer.from(body.replace(/"eventId":"evt-/g, `"eventId":"evt-${randomUUID().slice(0, 8)}-`)),
            agent,
            30_000,
          ).catch(() => undefined);
        }
      }),
    );
    await sleep(500);
    const busy = await slowBody(port, project.key, REQUEST_TIMEOUT_MS + 6000);
    loading = false;
    await load;
    agent.destroy();
    figures.push(
      `  slow body: closed after ${idle.closedAfterMs ?? 'more than ' + (REQUEST_TIMEOUT_MS + 6000)} ms idle, ${busy.closedAfterMs ?? 'more than ' + (REQUEST_TIMEOUT_MS + 6000)} ms busy (timeout ${REQUEST_TIMEOUT_MS} ms; answer: ${busy.answer || 'none'}; ${sent} batches sent meanwhile)`,
    );
    for (const r of [idle, busy]) {
      expect(r.closedAfterMs).not.toBeNull();
      expect(r.closedAfterMs!).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 100);
      expect(r.closedAfterMs!).toBeLessThanOrEqual(REQUEST_TIMEOUT_MS + 2000);
    }
    expect(busy.answer).toMatch(/^HTTP\/1\.1 408/);
  }, 60_000);
});
