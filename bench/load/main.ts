/**
 * bench:load — a mixed load on the built service (dist/apps/main.js: API + worker in one process)
 * through real HTTP, for BENCH_LOAD_SECONDS (default 600): SDK producers recording step events,
 * guard checks at concurrency 64, and dashboard-like metric queries. Prints throughput, p50/p99
 * per route, the error rate, the service's RSS over the run (growth is what a leak looks like),
 * and whether the ledger balances at the end; then the CPU per ingested event and per guard check
 * (service and PostgreSQL, each measured alone: see cpuCost) and the cores they add up to.
 */
import { TollgateClient, type FetchLike } from '@tollgate/sdk';
import { readFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { Pool } from 'pg';
import { createBenchProject, median, percentile, resetDatabase, startServiceProcess } from '../support/harness';

const DB = process.env.BENCH_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/tollgate_bench_load';
const SECONDS = Number(process.env.BENCH_LOAD_SECONDS ?? 600);
const PRODUCERS = Number(process.env.BENCH_LOAD_PRODUCERS ?? 4);
/** Events each producer records every 100 ms. */
const PER_TICK = Number(process.env.BENCH_LOAD_PER_TICK ?? 10);
const GUARD_CONCURRENCY = Number(process.env.BENCH_LOAD_GUARD_CONCURRENCY ?? 64);
const DASHBOARDS = Number(process.env.BENCH_LOAD_DASHBOARDS ?? 2);
const RESOURCES = Array.from({ length: 8 }, (_, i) => `load-resource-${i}`);
const TOTALS = ['mastra_model_total_input_tokens', 'mastra_model_total_output_tokens'];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Latencies and outcomes per route, as the client saw them. */
class RouteStats {
  readonly routes = new Map<string, { ms: number[]; errors: number; statuses: Map<string, number> }>();
  record(route: string, ms: number, status: number | 'network') {
    let r = this.routes.get(route);
    if (!r) this.routes.set(route, (r = { ms: [], errors: 0, statuses: new Map() }));
    r.ms.push(ms);
    const bad = status === 'network' || status >= 400;
    if (bad) {
      r.errors++;
      r.statuses.set(String(status), (r.statuses.get(String(status)) ?? 0) + 1);
    }
  }
  count(): number {
    let n = 0;
    for (const r of this.routes.values()) n += r.ms.length;
    return n;
  }
}

const stats = new RouteStats();
const routeOf = (url: string) => new URL(url).pathname.replace(/\/v1\/exporters\/[^/]+/, '/v1/exporters/:name');

/** The SDK's fetch, timed. */
const timedFetch: FetchLike = async (url, init) => {
  const t = performance.now();
  try {
    const res = await (globalThis.fetch as unknown as FetchLike)(url, init);
    stats.record(`${init.method} ${routeOf(url)}`, performance.now() - t, res.status);
    return res;
  } catch (err) {
    stats.record(`${init.method} ${routeOf(url)}`, performance.now() - t, 'network');
    throw err;
  }
};

async function timedJson(base: string, method: string, path: string, key: string, body?: unknown): Promise<any> {
  const res = await timedFetch(base + path, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return JSON.parse(await res.text());
}

function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Math.round(Number(m[1]) / 1024) : NaN;
}

/** CPU seconds (user + system) a process has used, from /proc (Linux). */
function cpuSeconds(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8')
      .replace(/^.*\) /, '')
      .split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return 0; // gone
  }
}
const CLOCK_TICKS = 100;
const CPU_SECONDS = Number(process.env.BENCH_CPU_SECONDS ?? 15);

/** CPU seconds of the PostgreSQL client backends serving the bench database (by their OS pids; autovacuum is not counted). */
async function postgresCpu(pool: Pool): Promise<Map<number, number>> {
  const { rows } = await pool.query<{ pid: number }>(
    `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()`,
  );
  return new Map(rows.map((r) => [r.pid, cpuSeconds(r.pid)]));
}

/** CPU of the service process and of its PostgreSQL backends while `work` runs (a backend that connected meanwhile counts from 0). */
async function measureCpu(
  pid: number,
  pool: Pool,
  work: () => Promise<number>,
): Promise<{ ops: number; service: number; postgres: number; seconds: number }> {
  const pgBefore = await postgresCpu(pool);
  const svcBefore = cpuSeconds(pid);
  const started = Date.now();
  const ops = await work();
  const service = cpuSeconds(pid) - svcBefore;
  let postgres = 0;
  for (const [p, cpu] of await postgresCpu(pool)) postgres += cpu - (pgBefore.get(p) ?? 0);
  return { ops, service, postgres, seconds: (Date.now() - started) / 1000 };
}

/**
 * CPU per ingested event and per guard check, each measured alone for BENCH_CPU_SECONDS on the
 * same service (API + worker: an event's cost includes its projection, which the phase waits for)
 * and its PostgreSQL backends; then the cores a deployment needs at 1k, 10k and 100k steps/s, a
 * step being one guard check and one step event. (PostgreSQL's own background processes — WAL
 * writer, checkpointer, autovacuum — are not counted: add headroom for them.)
 */
async function cpuCost(url: string, pid: number, pool: Pool): Promise<void> {
  const project = await createBenchProject(url);
  const headers = { authorization: `Bearer ${project.key}`, 'content-type': 'application/json' };
  // The guard reads the log for the partial hours at its windows' edges: a check costs more the
  // more steps its scopes had in the current hour. The two phases use their own resources, the
  // guard's with 200 steps each this hour (an agent's resource in steady use).
  const ingestResources = RESOURCES.map((r) => `cpu-ingest-${r}`);
  const guardResources = RESOURCES.map((r) => `cpu-guard-${r}`);
  const ingestFor = async (ms: number, resources = ingestResources, maxEvents = Number.POSITIVE_INFINITY) => {
    const stop = Date.now() + ms;
    let n = 0;
    await Promise.all(
      Array.from({ length: 8 }, async (_, c) => {
        for (let b = 0; Date.now() < stop && n < maxEvents; b++) {
          const events = Array.from({ length: 100 }, (_, i) => ({
            eventId: randomUUID(),
            occurredAt: new Date().toISOString(),
            traceId: `cpu-${c}-${b}`,
            resourceId: resources[(b + i) % resources.length],
            entityType: 'agent',
            entityName: `agent-${c}`,
            provider: 'openai',
            model: i % 3 ? 'gpt-4o-mini' : 'gpt-4o',
            usage: { inputTokens: 500 + i, outputTokens: 50 + i },
          }));
          const res = await fetch(`${url}/v1/events`, { method: 'POST', headers, body: JSON.stringify({ events }) });
          if (res.status !== 200) throw new Error(`ingest: ${res.status}`);
          n += ((await res.json()) as { accepted: number }).accepted;
        }
      }),
    );
    // Until the worker has projected them: that is part of what an event costs.
    for (;;) {
      const r = await fetch(`${url}/api/observability/metrics/aggregate`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ name: TOTALS, aggregation: 'count' }),
      });
      if (((await r.json()) as { lag: { events: number } }).lag.events === 0) break;
      await sleep(100);
    }
    return n;
  };
  const checkFor = async (ms: number) => {
    const stop = Date.now() + ms;
    let n = 0;
    const body = (k: number) =>
      JSON.stringify({
        context: { resourceId: guardResources[k % guardResources.length], runId: `cpu-guard-${k}` },
        limits: [
          { scope: 'resource', window: '24h', maxTotalTokens: 1e12 },
          { scope: 'resource', window: '1h', maxCost: 1e6 },
        ],
      });
    await Promise.all(
      Array.from({ length: GUARD_CONCURRENCY }, async (_, k) => {
        while (Date.now() < stop) {
          const res = await fetch(`${url}/v1/guard/check`, { method: 'POST', headers, body: body(k) });
          if (res.status !== 200) throw new Error(`guard: ${res.status}`);
          await res.arrayBuffer();
          n++;
        }
      }),
    );
    return n;
  };
  await ingestFor(60_000, guardResources, 200 * guardResources.length); // the guard's resources' steps (and a warm-up)
  await checkFor(2000);
  const ingest = await measureCpu(pid, pool, () => ingestFor(CPU_SECONDS * 1000));
  const guard = await measureCpu(pid, pool, () => checkFor(CPU_SECONDS * 1000));
  const us = (cpu: number, ops: number) => (cpu / ops) * 1e6;
  const per = {
    ingest: { service: us(ingest.service, ingest.ops), postgres: us(ingest.postgres, ingest.ops) },
    guard: { service: us(guard.service, guard.ops), postgres: us(guard.postgres, guard.ops) },
  };
  console.log(
    `\nCPU per operation (each alone for ${CPU_SECONDS} s; service = API + worker process, PostgreSQL = its backends):`,
  );
  console.log(
    `ingested event: service ${per.ingest.service.toFixed(0)} µs, PostgreSQL ${per.ingest.postgres.toFixed(0)} µs (${ingest.ops} events, ${(ingest.ops / ingest.seconds).toFixed(0)}/s)`,
  );
  console.log(
    `guard check:    service ${per.guard.service.toFixed(0)} µs, PostgreSQL ${per.guard.postgres.toFixed(0)} µs (${guard.ops} checks, ${(guard.ops / guard.seconds).toFixed(0)}/s; two 24h/1h resource limits, 200 steps on each resource this hour)`,
  );
  const step = { service: per.ingest.service + per.guard.service, postgres: per.ingest.postgres + per.guard.postgres };
  console.log(`cores for N steps/s (one check + one event per step): service | PostgreSQL`);
  for (const n of [1_000, 10_000, 100_000])
    console.log(
      `  ${n.toLocaleString('en-US').padStart(7)} steps/s: ${((n * step.service) / 1e6).toFixed(1)} | ${((n * step.postgres) / 1e6).toFixed(1)}`,
    );
}

async function main() {
  console.log(
    `bench:load — ${SECONDS} s: ${PRODUCERS} SDK producers × ${PER_TICK * 10} events/s, guard checks at concurrency ${GUARD_CONCURRENCY}, ${DASHBOARDS} dashboards (noisy, shared machine)`,
  );
  await resetDatabase(DB);
  // The rate limit is off: the point is the service's own limits, not a key's.
  const svc = await startServiceProcess('main', {
    DATABASE_URL: DB,
    DATABASE_POOL_SIZE: '30',
    RATE_LIMIT_PER_KEY_PER_SECOND: '0',
  });
  const pid = svc.child.pid!;
  const pool = new Pool({ connectionString: DB, max: 2 });
  try {
    const project = await createBenchProject(svc.url);
    const rss: { at: number; mib: number }[] = [{ at: 0, mib: rssMiB(pid) }];
    const started = Date.now();
    const end = started + SECONDS * 1000;
    const running = () => Date.now() < end;

    // Ingest: SDK producers, buffered and batched as an agent's SDK would.
    const producers = Array.from(
      { length: PRODUCERS },
      () =>
        new TollgateClient({
          baseUrl: svc.url,
          apiKey: project.key,
          fetch: timedFetch,
          flushIntervalMs: 200,
          maxBatchSize: 500,
          retries: 20,
          maxBufferSize: 200_000,
        }),
    );
    let dropped = 0;
    let recorded = 0;
    const producing = producers.map(async (c, p) => {
      for (let step = 0; running(); step++) {
        for (let i = 0; i < PER_TICK; i++) {
          c.events.record({
            traceId: `load-${p}-${Math.floor(step / 50)}`,
            runId: `run-${p}-${Math.floor(step / 50)}`,
            resourceId: RESOURCES[(step + i) % RESOURCES.length],
            entityType: 'agent',
            entityName: `agent-${p}`,
            provider: 'openai',
            model: i % 3 ? 'gpt-4o-mini' : 'gpt-4o',
            usage: { inputTokens: 500 + ((step * 7 + i) % 1500), outputTokens: 50 + ((step + i) % 400) },
          });
          recorded++;
        }
        await sleep(100);
      }
    });

    // Guard: 64 agents, each checking before its next step, back to back.
    const guard = new TollgateClient({
      baseUrl: svc.url,
      apiKey: project.key,
      fetch: timedFetch,
      guard: { timeoutMs: 10_000, retries: 0 },
    });
    let failModeAnswers = 0;
    const guarding = Array.from({ length: GUARD_CONCURRENCY }, async (_, n) => {
      while (running()) {
        const res = await guard.guard.check({
          context: { resourceId: RESOURCES[n % RESOURCES.length], runId: `guard-${n}` },
          limits: [
            { scope: 'resource', window: '24h', maxTotalTokens: 1e12 },
            { scope: 'resource', window: '1h', maxCost: 1e6 },
          ],
          failMode: 'open',
        });
        if (res.reason) failModeAnswers++;
      }
    });

    // Dashboards: the queries a usage page makes, every second.
    const dashboards = Array.from({ length: DASHBOARDS }, async () => {
      while (running()) {
        const since = new Date(Date.now() - 3600_000).toISOString();
        await Promise.all([
          timedJson(svc.url, 'POST', '/api/observability/metrics/aggregate', project.key, {
            name: TOTALS,
            aggregation: 'sum',
            filters: { timestamp: { start: since } },
            comparePeriod: 'previous_period',
          }),
          timedJson(svc.url, 'POST', '/api/observability/metrics/breakdown', project.key, {
            name: TOTALS,
            aggregation: 'sum',
            groupBy: ['model'],
            filters: { timestamp: { start: since } },
          }),
          timedJson(svc.url, 'POST', '/api/observability/metrics/timeseries', project.key, {
            name: TOTALS,
            aggregation: 'sum',
            interval: '1m',
            filters: { timestamp: { start: since } },
          }),
          timedJson(svc.url, 'GET', '/api/observability/discovery/entity-names', project.key),
        ]).catch(() => undefined);
        await sleep(1000);
      }
    });

    // Progress every 10 s (and RSS samples).
    let lastCount = 0;
    const progress = (async () => {
      while (running()) {
        await sleep(Math.min(10_000, Math.max(0, end - Date.now())));
        const n = stats.count();
        const mib = rssMiB(pid);
        rss.push({ at: Math.round((Date.now() - started) / 1000), mib });
        console.log(
          `  t=${Math.round((Date.now() - started) / 1000)} s: ${Math.round((n - lastCount) / 10)} requests/s, ${recorded} events recorded, service RSS ${mib} MiB`,
        );
        lastCount = n;
      }
    })();

    await Promise.all([...producing, ...guarding, ...dashboards, progress]);
    const loadSeconds = (Date.now() - started) / 1000;
    await Promise.all(producers.map((c) => c.shutdown({ timeoutMs: 120_000 })));
    await guard.shutdown();
    for (const c of producers) dropped += c.events.stats.dropped ?? 0;
    const acknowledged = producers.reduce((n, c) => n + c.events.stats.accepted + c.events.stats.duplicates, 0);
    rss.push({ at: Math.round((Date.now() - started) / 1000), mib: rssMiB(pid) });

    // --- Figures --------------------------------------------------------------------------------
    console.log(`\nroute | requests | per second | p50 ms | p99 ms | errors`);
    let total = 0;
    let errors = 0;
    for (const [route, r] of [...stats.routes].sort()) {
      total += r.ms.length;
      errors += r.errors;
      console.log(
        `${route} | ${r.ms.length} | ${(r.ms.length / loadSeconds).toFixed(1)} | ${percentile(r.ms, 0.5).toFixed(1)} | ${percentile(r.ms, 0.99).toFixed(1)} | ${r.errors}${r.errors ? ` (${[...r.statuses].map(([s, n]) => `${s}×${n}`).join(' ')})` : ''}`,
      );
    }
    console.log(
      `all routes | ${total} | ${(total / loadSeconds).toFixed(1)} | | | ${errors} (error rate ${((100 * errors) / Math.max(1, total)).toFixed(3)} %)`,
    );
    console.log(
      `events: ${recorded} recorded, ${acknowledged} acknowledged (${(acknowledged / loadSeconds).toFixed(0)}/s), ${dropped} dropped; guard answers from failMode: ${failModeAnswers}`,
    );
    const rssValues = rss.map((r) => r.mib);
    const half = rssValues.slice(Math.floor(rssValues.length / 2));
    console.log(
      `service RSS: start ${rss[0].mib} MiB, end ${rss[rss.length - 1].mib} MiB, peak ${Math.max(...rssValues)} MiB, median of the second half ${median(half)} MiB (samples: ${rss.map((r) => `${r.at}s=${r.mib}`).join(' ')})`,
    );

    // --- Ledger ---------------------------------------------------------------------------------
    const stored = Number(
      (
        await pool.query(`SELECT count(*) AS n FROM events WHERE project_id = $1 AND type = 'StepUsageRecorded'`, [
          project.id,
        ])
      ).rows[0].n,
    );
    const perResource = new Map<string, number>(
      (
        await pool.query(
          `SELECT resource_id, sum(input_tokens + output_tokens)::bigint AS t FROM events WHERE project_id = $1 AND type = 'StepUsageRecorded' GROUP BY resource_id`,
          [project.id],
        )
      ).rows.map((r) => [r.resource_id, Number(r.t)]),
    );
    const logSum = [...perResource.values()].reduce((a, b) => a + b, 0);
    let guardMismatches = 0;
    for (const resourceId of RESOURCES) {
      const g = await guard.guard.check({
        context: { resourceId },
        limits: [{ scope: 'resource', window: '24h', maxTotalTokens: 1e12 }],
      });
      const usage = (g as any).usage?.[`resource:${resourceId}@24h`]?.totalTokens;
      if (usage !== (perResource.get(resourceId) ?? 0)) guardMismatches++;
    }
    // Metric aggregate once the projector has caught up (lag 0).
    const catchUpStarted = Date.now();
    let metric: any;
    for (;;) {
      metric = await timedJson(svc.url, 'POST', '/api/observability/metrics/aggregate', project.key, {
        name: TOTALS,
        aggregation: 'sum',
      });
      if (metric.lag?.events === 0 || Date.now() - catchUpStarted > 300_000) break;
      await sleep(500);
    }
    const balanced =
      acknowledged === stored &&
      dropped === 0 &&
      guardMismatches === 0 &&
      metric.value === logSum &&
      metric.lag.events === 0;
    console.log(
      `\nledger: acknowledged ${acknowledged} = stored ${stored}: ${acknowledged === stored}; guard usage = log sum on ${RESOURCES.length - guardMismatches}/${RESOURCES.length} resources; metric aggregate ${metric.value} = log sum ${logSum}: ${metric.value === logSum} (projection caught up ${Date.now() - catchUpStarted} ms after the load, lag ${metric.lag?.events})`,
    );
    console.log(balanced ? 'ledger balances' : 'LEDGER DOES NOT BALANCE');

    // --- CPU per operation -----------------------------------------------------------------------
    await cpuCost(svc.url, pid, pool);
    if (!balanced) process.exitCode = 1;
  } finally {
    await pool.end();
    await svc.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
