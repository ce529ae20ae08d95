/**
 * bench:ingest — events per second through POST /v1/events (batches of 100, concurrent client)
 * against the same rows inserted directly with multi-row INSERTs into the same tables, in one run.
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
const providers: Record<string, string> = { 'gpt-4o': 'openai', 'gpt-4o-mini': 'openai', 'claude-sonnet-4-0': 'anthropic', 'gemini-2.5-flash': 'google' };

function event(i: number) {
  const model = models[i % models.length];
  return {
    eventId: randomUUID(),
    occurredAt: new Date(Date.now() - (i % 3600) * 1000).toISOString(),
    traceId: `trace-${i % 5000}`,
    runId: `run-${i % 5000}`,
    threadId: `thread-${i % 2000}`,
    resourceId: `resource-${i % 500}`,
    userId: `user-${i % 300}`,
    entityType: 'agent',
    entityName: `agent-${i % 7}`,
    provider: providers[model],
    model,
    usage: { inputTokens: 500 + (i % 2000), outputTokens: 50 + (i % 400), cacheReadTokens: i % 3 === 0 ? 100 : 0 },
    durationMs: 200 + (i % 800),
    stepIndex: i % 5,
  };
}

async function runConcurrently(total: number, send: (batch: ReturnType<typeof event>[]) => Promise<void>): Promise<number> {
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
    const viaHttp = async (events: ReturnType<typeof event>[]) => {
      const res = await fetch(`${svc.url}/v1/events`, { method: 'POST', headers, body: JSON.stringify({ events }) });
      const body = (await res.json()) as { accepted: number };
      if (res.status !== 200 || body.accepted !== events.length) throw new Error(`ingest failed: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
    };
    // Baseline: the same rows, multi-row INSERT into the same two tables, no HTTP, no validation, no pricing.
    const direct = async (events: ReturnType<typeof event>[]) => {
      const ids: unknown[] = [];
      const rows: unknown[] = [];
      const idValues: string[] = [];
      const rowValues: string[] = [];
      events.forEach((e, i) => {
        ids.push(project.id, e.eventId, e.occurredAt);
        idValues.push(`($${i * 3 + 1}, $${i * 3 + 2}, $${i * 3 + 3})`);
        const b = i * 16;
        rows.push(project.id, e.eventId, 'StepUsageRecorded', e.occurredAt, e.traceId, e.runId, e.threadId, e.resourceId, e.userId, e.entityType, e.entityName, e.provider, e.model, e.usage.inputTokens, e.usage.outputTokens, e.usage.cacheReadTokens);
        rowValues.push(`(${Array.from({ length: 16 }, (_, k) => `$${b + k + 1}`).join(', ')})`);
      });
      const c = await pool.connect();
      try {
        await c.query('BEGIN');
        await c.query(`INSERT INTO event_ids (project_id, event_id, occurred_at) VALUES ${idValues.join(', ')} ON CONFLICT DO NOTHING`, ids);
        await c.query(
          `INSERT INTO events (project_id, event_id, type, occurred_at, trace_id, run_id, thread_id, resource_id, user_id, entity_type, entity_name, provider, model, input_tokens, output_tokens, cache_read_tokens) VALUES ${rowValues.join(', ')}`,
          rows,
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
    console.log(`\nbench:ingest — ${ROUNDS} rounds of ${EVENTS_PER_ROUND} events, batches of ${BATCH}, concurrency ${CONCURRENCY}`);
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
