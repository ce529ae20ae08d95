/**
 * bench:ingest — events per second through POST /v1/events (batches of 100, concurrent client)
 * against the same rows inserted directly with multi-row INSERTs into the same tables, in one run.
 * BENCH_ALERTS=1 gives the project a policy with alert thresholds on every resource (the alerting commit path).
 */
import { randomUUID } from 'node:crypto';
import { Pool } from 'pg';
import { createBenchProject, median, resetDatabase, startServiceProcess } from '../support/harness';

const DB = process.env.BENCH_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/tollgate_bench';
const BATCH = 100;
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 8);
const EVENTS_PER_ROUND = Number(process.env.BENCH_EVENTS ?? 60_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

const models = ['gpt-4o', 'gpt-4o-mini', 'claude-sonnet-4-0', 'gemini-2.5-flash'];
const providers: Record<string, string> = {
  'gpt-4o': 'openai',
  'gpt-4o-mini': 'openai',
  'claude-sonnet-4-0': 'anthropic',
  'gemini-2.5-flash': 'google',
};

/**
 * A batch is what one SDK client flushes: the steps of the ~10 agent runs in flight in its process,
 * 10 steps each. Runs have their own thread; resources and users are drawn from larger pools.
 */
function event(i: number) {
  const model = models[i % models.length];
  const run = Math.floor(i / 10);
  return {
    eventId: randomUUID(),
    occurredAt: new Date(Date.now() - (i % 3600) * 1000).toISOString(),
    traceId: `trace-${run}`,
    threadId: `thread-${run}`,
    resourceId: `resource-${run % 500}`,
    userId: `user-${run % 300}`,
    entityType: 'agent',
    entityName: `agent-${run % 7}`,
    provider: providers[model],
    model,
    usage: { inputTokens: 500 + (i % 2000), outputTokens: 50 + (i % 400), cacheReadTokens: i % 3 === 0 ? 100 : 0 },
    durationMs: 200 + (i % 800),
    stepIndex: i % 10,
  };
}

type Event = ReturnType<typeof event>;

/** The guard counter rows the batch adds, as the ingest statement derives them. */
function counterRows(events: Event[], costs: number[]) {
  const rows = new Map<string, [string, string, string, string, number, number, number, number]>();
  const hour = (iso: string) => new Date(Math.floor(Date.parse(iso) / 3600_000) * 3600_000).toISOString();
  const day = (iso: string) => new Date(Math.floor(Date.parse(iso) / 86_400_000) * 86_400_000).toISOString();
  events.forEach((e, k) => {
    const keys: [string, string, string, string][] = [];
    for (const [scope, id] of [
      ['thread', e.threadId],
      ['resource', e.resourceId],
      ['user', e.userId],
    ] as const) {
      keys.push([scope, id, 'h', hour(e.occurredAt)], [scope, id, 'd', day(e.occurredAt)]);
    }
    keys.push(['run', e.traceId, 'r', new Date(0).toISOString()]);
    for (const key of keys) {
      const id = key.join('|');
      const row = rows.get(id) ?? [...key, 0, 0, 0, 0];
      row[4] += e.usage.inputTokens;
      row[5] += e.usage.outputTokens;
      row[6] += costs[k];
      row[7] += 1;
      rows.set(id, row as never);
    }
  });
  return [...rows.values()].sort((a, b) => a.slice(0, 4).join('|').localeCompare(b.slice(0, 4).join('|')));
}

async function runConcurrently(total: number, send: (batch: Event[]) => Promise<void>): Promise<number> {
  let next = 0;
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < total) {
        const from = next;
        next += BATCH;
        await send(Array.from({ length: BATCH }, (_, j) => event(from + j)));
      }
    }),
  );
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  return total / seconds;
}

async function main() {
  await resetDatabase(DB);
  const svc = await startServiceProcess('api', { DATABASE_URL: DB });
  const pool = new Pool({ connectionString: DB, max: CONCURRENCY });
  try {
    const project = await createBenchProject(svc.url);
    const headers = { authorization: `Bearer ${project.key}`, 'content-type': 'application/json' };
    if (process.env.BENCH_ALERTS === '1') {
      // Budget alerts on every resource: each commit then locks its resources and decides their thresholds.
      const res = await fetch(`${svc.url}/v1/policies/alerts`, {
        method: 'PUT',
        headers,
        body: JSON.stringify({ scope: 'resource', window: '24h', maxTotalTokens: 1e12, alerts: [50, 80, 100] }),
      });
      if (res.status !== 200) throw new Error(`policy: ${res.status}`);
    }
    const viaHttp = async (events: Event[]) => {
      const res = await fetch(`${svc.url}/v1/events`, { method: 'POST', headers, body: JSON.stringify({ events }) });
      const body = (await res.json()) as { accepted: number };
      if (res.status !== 200 || body.accepted !== events.length)
        throw new Error(`ingest failed: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
    };
    // Baseline: the same rows into the same tables (events, event_ids, the guard's counters) with
    // multi-row INSERTs — no HTTP, no validation, no pricing (a fixed cost per event stands in).
    const direct = async (events: Event[]) => {
      const ids: unknown[] = [];
      const rows: unknown[] = [];
      const idValues: string[] = [];
      const rowValues: string[] = [];
      const costs = events.map((e) => e.usage.inputTokens * 2.5 + e.usage.outputTokens * 10);
      events.forEach((e, i) => {
        ids.push(project.id, e.eventId, e.occurredAt);
        idValues.push(`($${i * 3 + 1}, $${i * 3 + 2}, $${i * 3 + 3})`);
        const b = i * 17;
        rows.push(
          project.id,
          e.eventId,
          'StepUsageRecorded',
          e.occurredAt,
          e.traceId,
          e.threadId,
          e.resourceId,
          e.userId,
          e.entityType,
          e.entityName,
          e.provider,
          e.model,
          e.usage.inputTokens,
          e.usage.outputTokens,
          e.usage.cacheReadTokens,
          Math.round(costs[i]),
          'USD',
        );
        rowValues.push(`(${Array.from({ length: 17 }, (_, k) => `$${b + k + 1}`).join(', ')})`);
      });
      const counters = counterRows(events, costs);
      const counterParams: unknown[] = [];
      const counterValues = counters.map((r, i) => {
        counterParams.push(project.id, ...r.slice(0, 4), r[4], r[5], Math.round(r[6]), r[7]);
        return `(${Array.from({ length: 9 }, (_, k) => `$${i * 9 + k + 1}${k === 3 ? '::"char"' : k === 4 ? '::timestamptz' : ''}`).join(', ')}, 'USD', 0)`;
      });
      const c = await pool.connect();
      try {
        await c.query('BEGIN');
        await c.query(
          `INSERT INTO event_ids (project_id, event_id, occurred_at) VALUES ${idValues.join(', ')} ON CONFLICT DO NOTHING`,
          ids,
        );
        await c.query(
          `INSERT INTO events (project_id, event_id, type, occurred_at, trace_id, thread_id, resource_id, user_id, entity_type, entity_name, provider, model, input_tokens, output_tokens, cache_read_tokens, cost_micros, cost_unit) VALUES ${rowValues.join(', ')}`,
          rows,
        );
        await c.query(
          `INSERT INTO usage_counters AS u (project_id, scope, scope_id, granularity, bucket_start, input_tokens, output_tokens, cost_micros, events, cost_unit, unpriced_events)
           VALUES ${counterValues.join(', ')}
           ON CONFLICT (project_id, scope, scope_id, granularity, bucket_start, cost_unit) DO UPDATE
              SET input_tokens = u.input_tokens + excluded.input_tokens, output_tokens = u.output_tokens + excluded.output_tokens,
                  cost_micros = u.cost_micros + excluded.cost_micros, events = u.events + excluded.events`,
          counterParams,
        );
        await c.query('COMMIT');
      } finally {
        c.release();
      }
    };

    // Warm both paths (JIT, pools, partitions) before measuring.
    await runConcurrently(5_000, viaHttp);
    await runConcurrently(5_000, direct);
    const http: number[] = [];
    const sql: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      http.push(await runConcurrently(EVENTS_PER_ROUND, viaHttp));
      sql.push(await runConcurrently(EVENTS_PER_ROUND, direct));
      console.log(`round ${r + 1}: http ${http[r].toFixed(0)} events/s, direct insert ${sql[r].toFixed(0)} events/s`);
    }
    const h = median(http);
    const d = median(sql);
    console.log(
      `\nbench:ingest — ${ROUNDS} rounds of ${EVENTS_PER_ROUND} events, batches of ${BATCH}, concurrency ${CONCURRENCY}`,
    );
    console.log(`POST /v1/events   median ${h.toFixed(0)} events/s`);
    console.log(`direct INSERT     median ${d.toFixed(0)} events/s`);
    console.log(`ratio http/direct ${(h / d).toFixed(2)}  (targets: ≥ 15000 events/s over HTTP, ratio ≥ 0.5)`);
  } finally {
    await pool.end();
    await svc.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
