import 'reflect-metadata';
import { applyMigrations, ensureDatabase, migrationsDir } from '@tollgate/database';
import { loadConfig } from '@tollgate/platform';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Client } from 'pg';
import { createApiApp } from '../../apps/api/src/bootstrap';

/**
 * npm run bench:exporters — export throughput to a local webhook receiver while ingest runs, and
 * the ingest rate with an exporter draining vs ingest alone, measured in the same run in
 * alternating phases (A, B, A, B, …) so machine noise hits both. The worker runs as its own
 * process (`node dist/apps/worker/src/main.js`), as deployed; the API, the load and the
 * receiver share this one.
 */
const DB = process.env.BENCH_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/tollgate_bench_exporters';
const REDIS = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7);
const PHASE_MS = Number(process.env.BENCH_PHASE_MS ?? 4000);
const CLIENTS = Number(process.env.BENCH_CLIENTS ?? 8);
const BATCH = Number(process.env.BENCH_BATCH ?? 100);
const ADMIN = 'bench-admin-token-0123456789';
const SECRET_KEY = 'bench-secret-key-0123456789-0123456789';
const PREFIX = `tollgate-bench-${randomBytes(4).toString('hex')}`;

/** A webhook sink: counts the events of every batch; GET /count answers the total. */
const RECEIVER = `
const http = require('node:http');
let count = 0;
const server = http.createServer((req, res) => {
  if (req.method === 'GET') { res.end(String(count)); return; }
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => { count += JSON.parse(Buffer.concat(chunks).toString('utf8')).events.length; res.writeHead(200); res.end(); });
});
server.listen(0, '127.0.0.1', () => process.stdout.write(server.address().port + '\\n'));
`;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function json(url: string, method: string, body: unknown, token: string): Promise<any> {
  const res = await fetch(url, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${url}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
}

async function project(base: string): Promise<string> {
  const p = await json(`${base}/v1/admin/projects`, 'POST', { name: `bench ${randomUUID()}` }, ADMIN);
  return (await json(`${base}/v1/admin/projects/${p.id}/keys`, 'POST', { scopes: ['ingest', 'admin', 'read'] }, ADMIN))
    .key;
}

/** CLIENTS loops posting BATCH events each, for PHASE_MS; returns accepted events per second. */
async function ingest(base: string, key: string): Promise<number> {
  const until = Date.now() + PHASE_MS;
  let accepted = 0;
  const started = Date.now();
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (Date.now() < until) {
        const events = Array.from({ length: BATCH }, (_, i) => ({
          eventId: randomUUID(),
          occurredAt: new Date().toISOString(),
          traceId: `t-${i}`,
          resourceId: 'r-1',
          entityType: 'agent',
          provider: 'openai',
          model: 'gpt-4o',
          usage: { inputTokens: 1000, outputTokens: 200 },
        }));
        // Awaited first: `accepted += await …` would read `accepted` before the await and lose other clients' counts.
        const reply = await json(`${base}/v1/events`, 'POST', { events }, key);
        accepted += reply.accepted as number;
      }
    }),
  );
  return accepted / ((Date.now() - started) / 1000);
}

async function main() {
  const admin = new Client({ connectionString: DB.replace(/\/[^/]+$/, '/postgres') });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS "${new URL(DB).pathname.slice(1)}" WITH (FORCE)`);
  await admin.end();
  await ensureDatabase(DB);
  await applyMigrations(DB, migrationsDir());

  // The receiver runs in its own process: parsing the batches is the sink's cost, not Tollgate's.
  const receiver = spawn(process.execPath, ['-e', RECEIVER], { stdio: ['ignore', 'pipe', 'inherit'] });
  const receiverPort = await new Promise<number>((resolve) =>
    receiver.stdout!.once('data', (d) => resolve(Number(String(d).trim()))),
  );
  const sinkUrl = `http://127.0.0.1:${receiverPort}/hook`;
  const received = async () => Number(await (await fetch(`http://127.0.0.1:${receiverPort}/count`)).text());

  const env = {
    DATABASE_URL: DB,
    REDIS_URL: REDIS,
    QUEUE_PREFIX: PREFIX,
    TOLLGATE_ADMIN_TOKEN: ADMIN,
    TOLLGATE_SECRET_KEY: SECRET_KEY,
    LOG_LEVEL: 'error',
    EXPORTS_TICK_MS: '200',
    TOLLGATE_EXPORTER_ALLOW_HOSTS: '127.0.0.1',
  };
  const app = await createApiApp(loadConfig({ ...env, PORT: '0', HOST: '127.0.0.1' }));
  await app.listen(0, '127.0.0.1');
  const base = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;
  const worker: ChildProcess = spawn(
    process.execPath,
    [join(__dirname, '..', '..', 'apps', 'worker', 'src', 'main.js')],
    { env: { PATH: process.env.PATH, ...env }, stdio: ['ignore', 'inherit', 'inherit'] },
  );
  await sleep(1500);

  const alone: number[] = [];
  const withExport: number[] = [];
  const exportRate: number[] = [];
  const lags: { events: number; seconds: number; catchUpMs: number }[] = [];
  process.stdout.write(
    `exporters bench: ${ROUNDS} rounds × 2 phases of ${PHASE_MS} ms, ${CLIENTS} clients × ${BATCH} events/request (noisy, shared machine)\n`,
  );
  for (let round = 1; round <= ROUNDS; round++) {
    // A: ingest alone (the worker runs, with no exporter to drain).
    const a = await ingest(base, await project(base));
    alone.push(a);
    // B: the same ingest while a webhook exporter drains the same project.
    const key = await project(base);
    await json(
      `${base}/v1/exporters/bench`,
      'PUT',
      {
        type: 'webhook',
        url: sinkUrl,
        signingSecret: 'bench-signing-secret-01',
        batch: { maxEvents: 1000, maxWaitMs: 200 },
      },
      key,
    );
    const before = await received();
    const t0 = Date.now();
    const b = await ingest(base, key);
    const exported = ((await received()) - before) / ((Date.now() - t0) / 1000);
    const state = await json(`${base}/v1/exporters/bench`, 'GET', undefined, key);
    const catchStart = Date.now();
    while ((await json(`${base}/v1/exporters/bench`, 'GET', undefined, key)).lag.events > 0) await sleep(100);
    const catchUpMs = Date.now() - catchStart;
    withExport.push(b);
    exportRate.push(exported);
    lags.push({ events: state.lag.events, seconds: state.lag.seconds, catchUpMs });
    process.stdout.write(
      `round ${round}: ingest alone ${a.toFixed(0)} ev/s | ingest with exporter ${b.toFixed(0)} ev/s (ratio ${(b / a).toFixed(2)}) | exported ${exported.toFixed(0)} ev/s | lag at end ${state.lag.events} events / ${state.lag.seconds} s, caught up in ${catchUpMs} ms\n`,
    );
  }
  const ratio = median(withExport) / median(alone);
  // Each round's phases ran back to back, so a round's own ratio sees the least drift in load.
  const pairedRatio = median(withExport.map((b, i) => b / alone[i]));
  process.stdout.write(
    `\nmedian ingest alone:          ${median(alone).toFixed(0)} events/s\n` +
      `median ingest with exporter:  ${median(withExport).toFixed(0)} events/s\n` +
      `ratio of the medians:         ${ratio.toFixed(2)} (target >= 0.80)\n` +
      `median of per-round ratios:   ${pairedRatio.toFixed(2)} (target >= 0.80)\n` +
      `median export throughput:     ${median(exportRate).toFixed(0)} events/s (to a local webhook receiver, during ingest)\n` +
      `median exporter lag at end:   ${median(lags.map((l) => l.events))} events, ${median(lags.map((l) => l.seconds)).toFixed(2)} s; caught up ${median(lags.map((l) => l.catchUpMs))} ms after ingest stopped\n`,
  );
  worker.kill('SIGTERM');
  await app.close();
  receiver.kill('SIGTERM');
  await new Promise((r) => worker.once('exit', r));
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
