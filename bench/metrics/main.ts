import 'reflect-metadata';
import { applyMigrations, ensureDatabase, migrationsDir, PrismaService } from '@tollgate/database';
import { MetricsProjector } from '@tollgate/usage-metrics';
import { Client } from 'pg';
import { buildQuery, rollupLevels } from '../../libs/usage-metrics/src/query/metric-query';
import { aggregateRecords } from '../../libs/usage-metrics/src/query/metric-query.sql';
import { createBenchProject, median, startServiceProcess } from '../support/harness';

/**
 * `npm run bench:metrics`: 1,000,000 step events over 30 days in one project (inserted with
 * generate_series), the projector catching up from position 0, then each query against the same
 * query over the raw events, in the same run. Numbers are medians of a shared machine: read the
 * ratios. Then the projector's catch-up against ingest's rate in the same run (see keepUp).
 * Env: BENCH_DATABASE_URL (dropped and recreated), BENCH_EVENTS, BENCH_RUNS, BENCH_KEEPUP_EVENTS,
 * BENCH_KEEPUP_ROUNDS.
 */
const URL_ = process.env.BENCH_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/tollgate_bench_metrics';
const EVENTS = Number(process.env.BENCH_EVENTS ?? 1_000_000);
const RUNS = Number(process.env.BENCH_RUNS ?? 40);
const RAW_RUNS = Number(process.env.BENCH_RAW_RUNS ?? 3);
const PROJECT = 'bench-project';
const DAY = 86_400_000;
const TOTALS = ['mastra_model_total_input_tokens', 'mastra_model_total_output_tokens'];
/** Events per round of the ingest-vs-projector comparison, and its rounds (BENCH_KEEPUP_EVENTS=0 skips it). */
const KEEPUP_EVENTS = Number(process.env.BENCH_KEEPUP_EVENTS ?? 40_000);
const KEEPUP_ROUNDS = Number(process.env.BENCH_KEEPUP_ROUNDS ?? 3);
const KEEPUP_CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 8);
const INGEST_BATCH = 100;

const ingestModels = ['gpt-4o', 'gpt-4o-mini', 'claude-sonnet-4-0', 'gemini-2.5-flash'];
const ingestProviders: Record<string, string> = {
  'gpt-4o': 'openai',
  'gpt-4o-mini': 'openai',
  'claude-sonnet-4-0': 'anthropic',
  'gemini-2.5-flash': 'google',
};

/** The step bench:ingest sends (runs of 10 steps with their own thread, 500 resources, 300 users, the last hour). */
function ingestEvent(i: number, round: number) {
  const model = ingestModels[i % ingestModels.length];
  const run = Math.floor(i / 10);
  return {
    eventId: `keepup-${round}-${i}`,
    occurredAt: new Date(Date.now() - (i % 3600) * 1000).toISOString(),
    traceId: `trace-${round}-${run}`,
    threadId: `thread-${round}-${run}`,
    resourceId: `resource-${run % 500}`,
    userId: `user-${run % 300}`,
    entityType: 'agent',
    entityName: `agent-${run % 7}`,
    provider: ingestProviders[model],
    model,
    usage: { inputTokens: 500 + (i % 2000), outputTokens: 50 + (i % 400), cacheReadTokens: i % 3 === 0 ? 100 : 0 },
    durationMs: 200 + (i % 800),
    stepIndex: i % 10,
  };
}

/**
 * Can the projector keep up with ingest? In each round: N steps through POST /v1/events (the
 * built API as its own process, batches of 100 from 8 concurrent clients: bench:ingest's load),
 * then the projector catching up over exactly those steps. Both rates in one run, on the same
 * machine and database; the ratio is what matters (target ≥ 1.5: dashboards' lag stays bounded
 * under sustained full ingest, with room for bursts).
 */
async function keepUp(prisma: PrismaService): Promise<void> {
  if (KEEPUP_EVENTS <= 0) return;
  const svc = await startServiceProcess('api', { DATABASE_URL: URL_, RATE_LIMIT_PER_KEY_PER_SECOND: '0' });
  try {
    const project = await createBenchProject(svc.url);
    const headers = { authorization: `Bearer ${project.key}`, 'content-type': 'application/json' };
    const projector = new MetricsProjector(prisma);
    const send = async (events: ReturnType<typeof ingestEvent>[]) => {
      const res = await fetch(`${svc.url}/v1/events`, { method: 'POST', headers, body: JSON.stringify({ events }) });
      const body = (await res.json()) as { accepted: number };
      if (res.status !== 200 || body.accepted !== events.length)
        throw new Error(`ingest failed: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
    };
    const ingest = async (total: number, round: number) => {
      let next = 0;
      const started = process.hrtime.bigint();
      await Promise.all(
        Array.from({ length: KEEPUP_CONCURRENCY }, async () => {
          while (next < total) {
            const from = next;
            next += INGEST_BATCH;
            await send(
              Array.from({ length: Math.min(INGEST_BATCH, total - from) }, (_, j) => ingestEvent(from + j, round)),
            );
          }
        }),
      );
      return total / (Number(process.hrtime.bigint() - started) / 1e9);
    };
    const project_ = async () => {
      const started = process.hrtime.bigint();
      let events = 0;
      // As the worker runs it (its default batch size), until every step ingested is projected
      // (the reader stops below the oldest open transaction of the cluster: loop past a lagging one).
      for (;;) {
        const r = await projector.catchUp();
        events += r.events;
        if (!r.caughtUp) continue;
        const [{ n }] = await prisma.$queryRawUnsafe<{ n: number }[]>(
          `SELECT count(*)::int AS n FROM events e, projection_checkpoints c WHERE c.name = 'metric_rollups' AND e.project_id = $1 AND (e.tx, e.position) > (c.tx, c.position)`,
          project.id,
        );
        if (n === 0) break;
        await new Promise((r) => setTimeout(r, 5));
      }
      return { events, rate: events / (Number(process.hrtime.bigint() - started) / 1e9) };
    };
    // Warm-up: JIT, pools, partitions, dimension ids of the project.
    await ingest(5_000, 0);
    await project_();
    const ingestRates: number[] = [];
    const projectRates: number[] = [];
    for (let round = 1; round <= KEEPUP_ROUNDS; round++) {
      ingestRates.push(await ingest(KEEPUP_EVENTS, round));
      const p = await project_();
      projectRates.push(p.rate);
      log(
        `  round ${round}: ingest ${Math.round(ingestRates.at(-1)!).toLocaleString('en-US')} events/s, projector ${Math.round(p.rate).toLocaleString('en-US')} events/s`,
      );
    }
    const ratio = median(projectRates) / median(ingestRates);
    log(
      `projector vs ingest (${KEEPUP_ROUNDS} rounds of ${KEEPUP_EVENTS.toLocaleString('en-US')} steps): ingest median ${Math.round(median(ingestRates)).toLocaleString('en-US')} events/s, projector catch-up median ${Math.round(median(projectRates)).toLocaleString('en-US')} events/s = ${ratio.toFixed(2)}× (target ≥ 1.5×)`,
    );
  } finally {
    await svc.stop();
  }
}

const log = (s: string) => process.stdout.write(s + '\n');

async function recreate(url: string) {
  const admin = new URL(url);
  const name = admin.pathname.slice(1);
  admin.pathname = '/postgres';
  const c = new Client({ connectionString: admin.toString() });
  await c.connect();
  await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  await c.end();
  await ensureDatabase(url);
  await applyMigrations(url, migrationsDir());
}

/**
 * Agent-shaped data: runs of 8 steps a few seconds apart, 1,000 resources (each with a few
 * threads), 5 models, 3 entities, 2 environments and services, 10% of the cost in EUR.
 */
async function generate(prisma: PrismaService, now: number) {
  await prisma.$executeRawUnsafe(`INSERT INTO projects (id, name) VALUES ($1, 'bench')`, PROJECT);
  for (let m = -2; m <= 1; m++)
    await prisma.$executeRawUnsafe(`SELECT ensure_event_partition(now() + make_interval(months => ${m}))`);
  const chunk = 100_000;
  const started = Date.now();
  for (let from = 0; from < EVENTS; from += chunk) {
    await prisma.$executeRawUnsafe(
      `INSERT INTO events (project_id, event_id, type, occurred_at, trace_id, run_id, thread_id, resource_id, user_id, organization_id, session_id,
         entity_type, entity_name, provider, model, environment, service_name, input_tokens, output_tokens, cache_read_tokens, reasoning_tokens,
         duration_ms, cost_micros, input_cost_micros, output_cost_micros, cost_unit, labels, tags)
       SELECT $1, 'e' || i, 'StepUsageRecorded',
              to_timestamp(($2::float8 - 30.0 * ${DAY} + (i / 8) * (30.0 * ${DAY} / ($3::float8 / 8)) + (i % 8) * 2500) / 1000),
              'trace-' || (i / 8), 'run-' || (i / 8), 'thread-' || (r % 3000), 'resource-' || (r % 1000), 'user-' || (r % 300),
              'org-' || (r % 30), 'session-' || (r % 3000),
              (ARRAY['agent','agent','tool'])[1 + r % 3], (ARRAY['support-agent','billing-agent','search'])[1 + r % 3],
              (ARRAY['openai','openai','anthropic','anthropic','google'])[1 + (r / 7) % 5],
              (ARRAY['gpt-4o','gpt-4o-mini','claude-sonnet-4','claude-haiku-4','gemini-2.5-flash'])[1 + (r / 7) % 5],
              (ARRAY['production','staging'])[1 + (r / 11) % 2], (ARRAY['api','jobs'])[1 + (r / 13) % 2],
              inp, outp, CASE WHEN i % 3 = 0 THEN inp / 2 ELSE 0 END, CASE WHEN i % 5 = 0 THEN outp / 3 ELSE 0 END,
              (hashint % 50000) / 10.0,
              inp * 2 + outp * 8, inp * 2, outp * 8, CASE WHEN r % 10 = 0 THEN 'EUR' ELSE 'USD' END,
              jsonb_build_object('tier', CASE WHEN r % 4 = 0 THEN 'pro' ELSE 'free' END), ARRAY['bench']
         FROM (SELECT i, i / 8 AS r, abs(hashint4(i)::bigint) AS hashint, 100 + abs(hashint4(i)::bigint) % 4000 AS inp, abs(hashint4(i + 7)::bigint) % 1200 AS outp
                 FROM generate_series($4::int, $5::int) AS i) g`,
      PROJECT,
      String(now),
      EVENTS,
      from,
      Math.min(from + chunk, EVENTS) - 1,
    );
  }
  await prisma.$executeRawUnsafe('ANALYZE events');
  return (Date.now() - started) / 1000;
}

function stats(ms: number[]) {
  const s = [...ms].sort((a, b) => a - b);
  const at = (p: number) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
  return { p50: at(0.5), p99: at(0.99) };
}

async function time(
  fn: () => Promise<unknown>,
  runs: number,
  warmups: number,
): Promise<{ p50: number; p99: number; result: unknown }> {
  let result: unknown;
  for (let i = 0; i < warmups; i++) result = await fn();
  const ms: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t = process.hrtime.bigint();
    result = await fn();
    ms.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  return { ...stats(ms), result };
}

async function main() {
  const now = Date.now();
  log(
    `bench:metrics — ${EVENTS.toLocaleString('en-US')} events over 30 days (noisy, shared machine: compare the ratios)`,
  );
  await recreate(URL_);
  const prisma = new PrismaService(URL_, 4);
  const genSeconds = await generate(prisma, now);
  log(`generated in ${genSeconds.toFixed(1)} s`);

  const projector = new MetricsProjector(prisma);
  const t0 = Date.now();
  let projected = 0;
  for (;;) {
    const r = await projector.catchUp({ batchSize: 10_000 });
    projected += r.events;
    if (r.caughtUp) break;
  }
  const projSeconds = (Date.now() - t0) / 1000;
  const [{ rows }] = await prisma.$queryRawUnsafe<{ rows: number }[]>(
    `SELECT (SELECT count(*) FROM metric_rollups) + (SELECT count(*) FROM metric_scope_rollups) AS rows`,
  );
  log(
    `projection from position 0: ${projected.toLocaleString('en-US')} events in ${projSeconds.toFixed(1)} s = ${Math.round(projected / projSeconds).toLocaleString('en-US')} events/s (${Number(rows).toLocaleString('en-US')} rollup rows)`,
  );
  await prisma.$executeRawUnsafe('ANALYZE');

  const start = new Date(now - 30 * DAY);
  const cases: { label: string; names: string[]; filters: any; shape: { groups?: string[] } }[] = [
    { label: 'aggregate 30d, whole project', names: TOTALS, filters: { timestamp: { start } }, shape: {} },
    {
      label: 'aggregate 30d, one resource (agents)',
      names: TOTALS,
      filters: { timestamp: { start }, resourceId: 'resource-42', entityType: 'agent' },
      shape: {},
    },
    {
      label: 'breakdown by model, 30d',
      names: TOTALS,
      filters: { timestamp: { start } },
      shape: { groups: ['model'] },
    },
    {
      label: 'timeseries 1h over 30d',
      names: TOTALS,
      filters: { timestamp: { start } },
      shape: { bucketMs: 3_600_000 } as any,
    },
  ];
  log('');
  log('query                                    rollups p50 / p99 ms    raw p50 / p99 ms     p50 ratio  same answer');
  for (const c of cases) {
    const q = buildQuery(PROJECT, c.names, c.filters, c.shape);
    const plan = rollupLevels(q);
    const fast = await time(() => aggregateRecords(prisma, q, plan), RUNS, 3);
    const raw = await time(() => aggregateRecords(prisma, q, { cube: 'project', levels: [] }), RAW_RUNS, 1);
    const same = JSON.stringify((fast.result as any).rows) === JSON.stringify((raw.result as any).rows);
    log(
      `${c.label.padEnd(40)} ${fast.p50.toFixed(2).padStart(8)} / ${fast.p99.toFixed(2).padStart(7)}    ${raw.p50.toFixed(1).padStart(8)} / ${raw.p99.toFixed(1).padStart(7)}    ${(raw.p50 / fast.p50).toFixed(0).padStart(6)}×    ${same ? 'yes' : 'NO'}`,
    );
  }
  log('');
  log(
    `rollup queries: ${RUNS} runs each, raw baseline: ${RAW_RUNS} runs each (after 3 and 1 warm-ups). Target: aggregate p50 ≤ 10 ms and ≥ 20× raw.`,
  );
  log('');
  await keepUp(prisma);
  await prisma.onModuleDestroy();
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
