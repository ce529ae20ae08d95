/**
 * `npm run bench:sdk`: what `events.record` costs the caller, and how fast one process delivers.
 *
 * 1. Caller overhead: ns per `events.record` call against a no-op function taking the same event,
 *    and heap bytes per buffered event against the event object itself kept in an array.
 * 2. End to end: events/s from this process into the real API (a child process on PostgreSQL),
 *    against raw `fetch` posting the same batches (500 events, 2 in flight) in the same run.
 * 3. Per call: the latency of one `guard.check` (the call on the path of every LLM step) and of one
 *    discovery GET, through the client's default keep-alive pool against the same client on the
 *    runtime's `fetch` (what it used before), interleaved rounds in the same run.
 *
 * Env: BENCH_DATABASE_URL (default postgresql://postgres@127.0.0.1:5432/tollgate_bench_sdk),
 * REDIS_URL, BENCH_EVENTS (default 50000), BENCH_CALLS (per-call rounds, default 300). Prints medians; figures are machine-bound.
 */
import { TollgateClient, type FetchLike } from '@tollgate/sdk';
import { spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer } from 'node:net';
import { join } from 'node:path';

const ROUNDS = 5;
const ADMIN = `bench-admin-${randomBytes(8).toString('hex')}`;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const gc = () => (globalThis as { gc?: () => void }).gc?.();

const makeEvent = (i: number) => ({
  traceId: `trace-${i % 97}`,
  runId: `run-${i % 97}`,
  resourceId: `resource-${i % 7}`,
  entityType: 'agent',
  entityName: 'bench-agent',
  provider: 'openai',
  model: 'gpt-4o-mini',
  stepIndex: i % 50,
  usage: { inputTokens: 1000 + (i % 100), outputTokens: 100 },
});

/** A fetch that never answers: nothing leaves the buffer, so the heap holds every event. */
const hanging: FetchLike = () => new Promise(() => {});

function callerOverhead(n: number) {
  const events = Array.from({ length: n }, (_, i) => makeEvent(i));
  let sink = 0;
  const noop = (e: { stepIndex: number }) => {
    sink += e.stepIndex;
  };
  const nsRecord: number[] = [];
  const nsNoop: number[] = [];
  const bytesSdk: number[] = [];
  const bytesArray: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    let t = process.hrtime.bigint();
    for (let i = 0; i < n; i++) noop(events[i]);
    nsNoop.push(Number(process.hrtime.bigint() - t) / n);

    const client = new TollgateClient({
      baseUrl: 'http://127.0.0.1:9',
      apiKey: 'bench',
      fetch: hanging,
      maxBufferSize: n,
      maxBatchSize: 1000,
      flushIntervalMs: 3_600_000,
      concurrency: 1,
    });
    gc();
    const before = process.memoryUsage().heapUsed;
    t = process.hrtime.bigint();
    for (let i = 0; i < n; i++) client.events.record(events[i]);
    nsRecord.push(Number(process.hrtime.bigint() - t) / n);
    gc();
    bytesSdk.push((process.memoryUsage().heapUsed - before) / n);
    if (client.events.stats.buffered !== n)
      throw new Error(`expected ${n} buffered, got ${client.events.stats.buffered}`);

    gc();
    const before2 = process.memoryUsage().heapUsed;
    const kept: unknown[] = [];
    for (let i = 0; i < n; i++) kept.push(makeEvent(i));
    gc();
    bytesArray.push((process.memoryUsage().heapUsed - before2) / n);
    if (kept.length !== n) throw new Error('unreachable');
  }
  if (sink < 0) console.log(sink);
  return {
    nsRecord: median(nsRecord),
    nsNoop: median(nsNoop),
    bytesSdk: median(bytesSdk),
    bytesArray: median(bytesArray),
  };
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

async function startApi(): Promise<{ url: string; stop: () => void }> {
  const port = await freePort();
  const child = spawn(process.execPath, [join(__dirname, '../../apps/api/src/main.js')], {
    env: {
      ...process.env,
      DATABASE_URL: process.env.BENCH_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/tollgate_bench_sdk',
      PORT: String(port),
      HOST: '127.0.0.1',
      TOLLGATE_ADMIN_TOKEN: ADMIN,
      QUEUE_PREFIX: `tollgate-bench-sdk-${randomBytes(4).toString('hex')}`,
      LOG_LEVEL: 'error',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 300; i++) {
    if (
      await fetch(`${url}/health/ready`).then(
        (r) => r.ok,
        () => false,
      )
    )
      return { url, stop: () => child.kill('SIGTERM') };
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill('SIGKILL');
  throw new Error('API did not start');
}

async function newKey(url: string, scopes: string[] = ['ingest']): Promise<string> {
  const post = async (path: string, body: unknown) => {
    const res = await fetch(url + path, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
    return res.json() as Promise<{ id: string; key: string }>;
  };
  const project = await post('/v1/admin/projects', { name: `bench ${randomUUID()}` });
  return (await post(`/v1/admin/projects/${project.id}/keys`, { scopes })).key;
}

async function viaSdk(url: string, n: number): Promise<number> {
  const client = new TollgateClient({
    baseUrl: url,
    apiKey: await newKey(url),
    maxBufferSize: n,
    maxBatchSize: 500,
    concurrency: 2,
  });
  const t = performance.now();
  for (let i = 0; i < n; i++) client.events.record(makeEvent(i));
  await client.shutdown({ timeoutMs: 600_000 });
  const s = client.events.stats;
  if (s.accepted !== n) throw new Error(`SDK stored ${s.accepted} of ${n}`);
  return n / ((performance.now() - t) / 1000);
}

async function viaRawFetch(url: string, n: number): Promise<number> {
  const key = await newKey(url);
  const t = performance.now();
  const at = new Date().toISOString();
  const bodies: string[] = [];
  for (let i = 0; i < n; i += 500) {
    bodies.push(
      JSON.stringify({
        events: Array.from({ length: Math.min(500, n - i) }, (_, j) => ({
          ...makeEvent(i + j),
          eventId: randomUUID(),
          occurredAt: at,
        })),
      }),
    );
  }
  let next = 0;
  const worker = async () => {
    while (next < bodies.length) {
      const body = bodies[next++];
      const res = await fetch(`${url}/v1/events`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body,
      });
      if (!res.ok) throw new Error(`raw fetch: ${res.status}`);
      await res.text();
    }
  };
  await Promise.all([worker(), worker()]);
  return n / ((performance.now() - t) / 1000);
}

/** Median µs per call of `fn`, called `n` times one after another (as a step's check is). */
async function perCall(n: number, fn: (i: number) => Promise<unknown>): Promise<number> {
  const us: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await fn(i);
    us.push((performance.now() - t) * 1000);
  }
  return median(us);
}

async function callLatency(url: string) {
  const key = await newKey(url, ['guard', 'read']);
  const pooled = new TollgateClient({ baseUrl: url, apiKey: key });
  const viaFetch = new TollgateClient({ baseUrl: url, apiKey: key, fetch: globalThis.fetch as unknown as FetchLike });
  const check = (c: TollgateClient) => (i: number) =>
    c.guard.check({ context: { runId: `bench-run-${i % 50}` }, limits: [{ scope: 'run', maxCost: 1 }], dryRun: true });
  const discover = (c: TollgateClient) => () => c.metrics.discovery.entityTypes();
  const N = Number(process.env.BENCH_CALLS ?? 300);
  // Warm both (connections, JIT, the service's caches) before measuring.
  for (const c of [pooled, viaFetch]) for (let i = 0; i < 50; i++) await check(c)(i);
  const rounds = {
    checkPooled: [] as number[],
    checkFetch: [] as number[],
    getPooled: [] as number[],
    getFetch: [] as number[],
  };
  for (let r = 0; r < ROUNDS * 2 - 1; r++) {
    rounds.checkFetch.push(await perCall(N, check(viaFetch)));
    rounds.checkPooled.push(await perCall(N, check(pooled)));
    rounds.getFetch.push(await perCall(N, discover(viaFetch)));
    rounds.getPooled.push(await perCall(N, discover(pooled)));
  }
  return {
    n: N,
    rounds: ROUNDS * 2 - 1,
    checkPooled: median(rounds.checkPooled),
    checkFetch: median(rounds.checkFetch),
    getPooled: median(rounds.getPooled),
    getFetch: median(rounds.getFetch),
  };
}

async function main() {
  if (!(globalThis as { gc?: unknown }).gc) console.log('(run with --expose-gc for stable memory figures)');
  const n = Number(process.env.BENCH_EVENTS ?? 50_000);
  const o = callerOverhead(n);
  console.log(`events.record caller overhead (${n} calls, median of ${ROUNDS}):`);
  console.log(`  no-op function        ${o.nsNoop.toFixed(1)} ns/call`);
  console.log(
    `  events.record         ${o.nsRecord.toFixed(1)} ns/call  (${(o.nsRecord / o.nsNoop).toFixed(0)}x the no-op; validation + JSON + buffering)`,
  );
  console.log(
    `  heap per buffered event: SDK ${o.bytesSdk.toFixed(0)} B, the event object kept in an array ${o.bytesArray.toFixed(0)} B (ratio ${(o.bytesSdk / o.bytesArray).toFixed(2)})`,
  );

  const api = await startApi();
  try {
    const e2e = Math.min(n, 20_000);
    const sdk: number[] = [];
    const raw: number[] = [];
    for (let r = 0; r < 3; r++) {
      raw.push(await viaRawFetch(api.url, e2e));
      sdk.push(await viaSdk(api.url, e2e));
    }
    console.log(`end to end into the API on PostgreSQL (${e2e} events, median of 3, batches of 500, 2 in flight):`);
    console.log(`  raw fetch of pre-built batches  ${median(raw).toFixed(0)} events/s`);
    console.log(
      `  TollgateClient.events.record    ${median(sdk).toFixed(0)} events/s  (ratio ${(median(sdk) / median(raw)).toFixed(2)})`,
    );
    const l = await callLatency(api.url);
    console.log(
      `per-call latency, one call at a time (${l.n} calls a round, median of ${l.rounds} interleaved rounds):`,
    );
    console.log(
      `  guard.check   runtime fetch ${l.checkFetch.toFixed(0)} µs, keep-alive pool (default) ${l.checkPooled.toFixed(0)} µs  (ratio ${(l.checkPooled / l.checkFetch).toFixed(2)})`,
    );
    console.log(
      `  discovery GET runtime fetch ${l.getFetch.toFixed(0)} µs, keep-alive pool (default) ${l.getPooled.toFixed(0)} µs  (ratio ${(l.getPooled / l.getFetch).toFixed(2)})`,
    );
  } finally {
    api.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
