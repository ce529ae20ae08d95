/**
 * bench:guard — latency and throughput of POST /v1/guard/check on one scope holding 1,000,000
 * events over 365 days (365d window), against the same answer summed from raw events; then the
 * 64-agent overshoot race three ways: with reservations, without, and a lagging reader.
 *
 * The checks go over keep-alive HTTP/1.1 through undici's Pool: the client shares the machine's
 * cores with the service and PostgreSQL, and global fetch() costs it several times the CPU per
 * request (printed below), which would measure the client more than the service.
 */
import { execSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { Pool } from 'pg';
import { Pool as HttpPool } from 'undici';
import { createBenchProject, median, percentile, resetDatabase, startServiceProcess } from '../support/harness';

const DB = process.env.BENCH_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/tollgate_bench_guard';
const EVENTS = Number(process.env.BENCH_EVENTS ?? 1_000_000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

/** CPU time (ms) a process has used, from /proc (Linux); 0 where unavailable. */
function cpuMs(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10; // utime + stime, in 10 ms ticks
  } catch {
    return 0;
  }
}

/** CPU time (ms) of each PostgreSQL process on this machine (the bench is alone on it), by pid. */
function postgresCpuMs(): Map<number, number> {
  const byPid = new Map<number, number>();
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      if (readFileSync(`/proc/${pid}/comm`, 'utf8').startsWith('postgres')) byPid.set(Number(pid), cpuMs(Number(pid)));
    } catch {
      /* exited */
    }
  }
  return byPid;
}

/** CPU PostgreSQL used between two samples, over the processes alive at both (an exiting autovacuum worker takes its time with it). */
function postgresCpuBetween(before: Map<number, number>, after: Map<number, number>): number {
  let total = 0;
  for (const [pid, ms] of after) if (before.has(pid)) total += ms - before.get(pid)!;
  return total;
}

async function generate(pool: Pool, projectId: string, resourceId: string) {
  // The partitions, the events and the guard's counters as ingest writes them, but in bulk.
  await pool.query(`SELECT ensure_event_partition(d) FROM generate_series(now() - interval '366 days', now() + interval '1 month', interval '1 month') AS d`);
  // In time order, as agents report steps while they happen (a random order would put every event
  // of an hour on its own page, which only a bulk backfill does).
  await pool.query(
    `INSERT INTO events (project_id, event_id, type, occurred_at, trace_id, resource_id, entity_type, provider, model, input_tokens, output_tokens, cost_micros, input_cost_micros, output_cost_micros, cost_unit, cost_source, price_id)
     SELECT $1, 'gen-' || i, 'StepUsageRecorded', at, 'trace-' || (i % 50000), $2, 'agent', 'openai', 'gpt-4o',
            1000 + i % 1000, 100 + i % 300, 2500 + (i % 1000) * 2.5 + (100 + i % 300) * 10, 2500 + (i % 1000) * 2.5, (100 + i % 300) * 10, 'USD', 'catalog', 'genai-prices:openai/gpt-4o'
       FROM (SELECT i, now() - (random() * interval '365 days') AS at FROM generate_series(1, $3::int) AS i) AS g
      ORDER BY at`,
    [projectId, resourceId, EVENTS],
  );
  await pool.query(`INSERT INTO event_ids (project_id, event_id, occurred_at) SELECT project_id, event_id, occurred_at FROM events WHERE project_id = $1`, [projectId]);
  for (const [g, unit] of [['h', 'hour'], ['d', 'day']]) {
    await pool.query(
      `INSERT INTO usage_counters (project_id, scope, scope_id, granularity, bucket_start, cost_unit, input_tokens, output_tokens, cost_micros, unpriced_events, events)
       SELECT project_id, 'resource', resource_id, $2, date_trunc($3, occurred_at, 'UTC'), cost_unit, sum(input_tokens), sum(output_tokens), sum(cost_micros), 0, count(*)
         FROM events WHERE project_id = $1 GROUP BY project_id, resource_id, date_trunc($3, occurred_at, 'UTC'), cost_unit`,
      [projectId, g, unit],
    );
  }
  // As autovacuum would have left a year of data: statistics and visibility maps up to date.
  await pool.query('VACUUM ANALYZE');
  // Flush the bulk load now: PostgreSQL's checkpoint and the kernel's writeback of a million rows
  // would otherwise run during the measurements, on the same two cores.
  await pool.query('CHECKPOINT');
  execSync('sync');
}

async function measure(concurrency: number, fn: () => Promise<void>, forSeconds = SECONDS): Promise<{ p50: number; p99: number; rate: number; n: number }> {
  const latencies: number[] = [];
  const end = Date.now() + forSeconds * 1000;
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (Date.now() < end) {
        const t = process.hrtime.bigint();
        await fn();
        latencies.push(Number(process.hrtime.bigint() - t) / 1e6);
      }
    }),
  );
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  return { p50: percentile(latencies, 0.5), p99: percentile(latencies, 0.99), rate: latencies.length / seconds, n: latencies.length };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** 64 agents race a $1.00 budget; each step costs $0.03 and takes `stepMs` of simulated LLM time. */
async function race(url: string, key: string, pool: Pool, projectId: string, mode: 'reserve' | 'no-reserve' | 'lagging', stepMs = 50): Promise<number> {
  const resourceId = `race-${mode}-${randomUUID()}`;
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  const estimate = { provider: 'openai', model: 'gpt-4o', inputTokens: 4000, maxOutputTokens: 2000 };
  const limits = [{ scope: 'resource', window: '24h', maxCost: 1 }];
  await Promise.all(
    Array.from({ length: 64 }, async (_, n) => {
      for (let step = 0; step < 100; step++) {
        const stepId = `${resourceId}-${n}-${step}`;
        let reservationId: string | undefined;
        if (mode === 'lagging') {
          // What a store fed by a buffered exporter sees: only events older than 5 s.
          const { rows } = await pool.query(
            `SELECT coalesce(sum(cost_micros), 0)::bigint AS c FROM events WHERE project_id = $1 AND resource_id = $2 AND type = 'StepUsageRecorded' AND recorded_at < now() - interval '5 seconds'`,
            [projectId, resourceId],
          );
          if (Number(rows[0].c) + 30_000 >= 1_000_000) return;
        } else {
          const res = await fetch(`${url}/v1/guard/check`, { method: 'POST', headers, body: JSON.stringify({ context: { resourceId }, limits, estimate, reserve: mode === 'reserve', stepId: mode === 'reserve' ? stepId : undefined }) });
          const body = (await res.json()) as { decision: string; reservation?: { id: string } };
          if (body.decision !== 'allow') return;
          reservationId = body.reservation?.id;
        }
        await sleep(stepMs);
        const event = { eventId: stepId, occurredAt: new Date().toISOString(), traceId: stepId, resourceId, entityType: 'agent', provider: 'openai', model: 'gpt-4o', usage: { inputTokens: 4000, outputTokens: 2000 }, ...(reservationId ? { reservationId } : {}) };
        await fetch(`${url}/v1/events`, { method: 'POST', headers, body: JSON.stringify({ events: [event] }) });
      }
    }),
  );
  const { rows } = await pool.query(`SELECT coalesce(sum(cost_micros), 0)::bigint AS c FROM events WHERE project_id = $1 AND resource_id = $2 AND type = 'StepUsageRecorded'`, [projectId, resourceId]);
  return Number(rows[0].c) / 1_000_000;
}

async function main() {
  await resetDatabase(DB);
  // The per-key rate limiter still runs (its Redis leases are part of the cost), above the load.
  const svc = await startServiceProcess('api', { DATABASE_URL: DB, DATABASE_POOL_SIZE: '24', GUARD_TIMEOUT_MS: '20000', RATE_LIMIT_PER_KEY_PER_SECOND: '1000000', RATE_LIMIT_BURST: '1000000' });
  const pool = new Pool({ connectionString: DB, max: 16 });
  try {
    const project = await createBenchProject(svc.url);
    const resourceId = 'resource-with-a-year';
    let t = Date.now();
    await generate(pool, project.id, resourceId);
    console.log(`generated ${EVENTS} events over 365 days for one resource in ${((Date.now() - t) / 1000).toFixed(1)} s`);

    const headers = { authorization: `Bearer ${project.key}`, 'content-type': 'application/json' };
    const body = JSON.stringify({ context: { resourceId }, limits: [{ scope: 'resource', window: '365d', maxCost: 1_000_000 }] });
    const http = new HttpPool(svc.url, { connections: 128 });
    let last: any;
    const check = async () => {
      const res = await http.request({ path: '/v1/guard/check', method: 'POST', headers, body });
      last = await res.body.json();
      if (last.decision !== 'allow') throw new Error(JSON.stringify(last));
    };
    const fetchCheck = async () => {
      const res = await fetch(`${svc.url}/v1/guard/check`, { method: 'POST', headers, body });
      if (((await res.json()) as { decision: string }).decision !== 'allow') throw new Error('not allowed');
    };
    const rawSum = async () => {
      await pool.query(
        `SELECT sum(input_tokens), sum(output_tokens), sum(cost_micros) FROM events
          WHERE project_id = $1 AND resource_id = $2 AND type = 'StepUsageRecorded' AND occurred_at >= now() - interval '365 days' AND occurred_at <= now()`,
        [project.id, resourceId],
      );
    };
    const readsSoFar = async () => {
      const text = await (await fetch(`${svc.url}/metrics`)).text();
      return Number(/^tollgate_guard_usage_reads_total (\d+)/m.exec(text)?.[1] ?? NaN);
    };
    // Same answer both ways (sanity): the guard's usage equals the raw sum.
    await check();
    const { rows } = await pool.query(`SELECT sum(input_tokens)::bigint AS i FROM events WHERE project_id = $1 AND resource_id = $2 AND occurred_at >= now() - interval '365 days'`, [project.id, resourceId]);
    const guardInput = last.usage[`resource:${resourceId}@365d`].inputTokens;
    console.log(`sanity: guard input tokens ${guardInput}, raw sum ${rows[0].i} → ${Number(rows[0].i) === guardInput ? 'equal' : 'DIFFERENT'}`);

    // A running service is warm: 3 s of checks before anything is measured.
    await measure(16, check, 3);

    console.log(`\nguard checks, ${ROUNDS} rounds of ${SECONDS} s per concurrency (CPU per check: service process, PostgreSQL, this client)`);
    console.log('concurrency | round | p50 ms | p99 ms | checks/s | reads/check | service µs | postgres µs | client µs');
    const results = new Map<number, { p50: number; p99: number; rate: number }[]>();
    for (let round = 1; round <= ROUNDS; round++) {
      for (const c of [1, 16, 64]) {
        const [s0, g0, c0, r0] = [cpuMs(svc.child.pid!), postgresCpuMs(), process.cpuUsage(), await readsSoFar()];
        const g = await measure(c, check);
        const [s1, g1, c1, r1] = [cpuMs(svc.child.pid!), postgresCpuMs(), process.cpuUsage(c0), await readsSoFar()];
        results.set(c, [...(results.get(c) ?? []), g]);
        const per = (ms: number) => ((ms * 1000) / g.n).toFixed(0);
        console.log(
          `${String(c).padStart(11)} | ${String(round).padStart(5)} | ${g.p50.toFixed(2).padStart(6)} | ${g.p99.toFixed(2).padStart(6)} | ${g.rate.toFixed(0).padStart(8)} | ${((r1 - r0) / g.n).toFixed(2).padStart(11)} | ${per(s1 - s0).padStart(10)} | ${per(postgresCpuBetween(g0, g1)).padStart(11)} | ${per((c1.user + c1.system) / 1000).padStart(9)}`,
        );
      }
    }
    const c0 = process.cpuUsage();
    const f = await measure(64, fetchCheck);
    const fc = process.cpuUsage(c0);
    console.log(`(the same at 64 through global fetch(): ${f.rate.toFixed(0)} checks/s, p99 ${f.p99.toFixed(2)} ms, client ${(((fc.user + fc.system) / 1000) * 1000 / f.n).toFixed(0)} µs CPU per check)`);
    // Checks of one budget share reads; checks of 64 different budgets cannot: one statement each.
    let agent = 0;
    const ownScope = async () => {
      const mine = `agent-${agent++ % 64}`;
      const res = await http.request({ path: '/v1/guard/check', method: 'POST', headers, body: JSON.stringify({ context: { resourceId: mine }, limits: [{ scope: 'resource', window: '365d', maxCost: 1_000_000 }] }) });
      if (((await res.body.json()) as { decision: string }).decision !== 'allow') throw new Error('not allowed');
    };
    await measure(64, ownScope, 3); // warm: the pool opens its other connections, each prepares the read
    const [o0, q0] = [cpuMs(svc.child.pid!), await readsSoFar()];
    const o = await measure(64, ownScope);
    const [o1, q1] = [cpuMs(svc.child.pid!), await readsSoFar()];
    console.log(`(64 agents on 64 different resources, nothing to share: ${o.rate.toFixed(0)} checks/s, p50 ${o.p50.toFixed(2)} ms, p99 ${o.p99.toFixed(2)} ms, ${((q1 - q0) / o.n).toFixed(2)} reads/check, service ${(((o1 - o0) * 1000) / o.n).toFixed(0)} µs per check)`);

    console.log('\nmedians over the rounds, against the raw-sum baseline measured now:');
    console.log('concurrency | guard p50 ms | guard p99 ms | checks/s | raw-sum p50 ms | raw-sum p99 ms | raw sums/s | p50 ratio raw/guard');
    for (const c of [1, 16, 64]) {
      const rs = results.get(c)!;
      const g = { p50: median(rs.map((x) => x.p50)), p99: median(rs.map((x) => x.p99)), rate: median(rs.map((x) => x.rate)) };
      const r = await measure(c, rawSum, 8);
      console.log(`${String(c).padStart(11)} | ${g.p50.toFixed(2).padStart(12)} | ${g.p99.toFixed(2).padStart(12)} | ${g.rate.toFixed(0).padStart(8)} | ${r.p50.toFixed(2).padStart(14)} | ${r.p99.toFixed(2).padStart(14)} | ${r.rate.toFixed(1).padStart(10)} | ${(r.p50 / g.p50).toFixed(1).padStart(6)}x`);
    }
    console.log('targets: p50 ≤ 3 ms at concurrency 1; ≥ 2000 checks/s at 64 with p99 ≤ 25 ms');
    await http.close();

    console.log('\novershoot: 64 agents, $1.00 budget, $0.03 steps (33 fit), 50 ms of LLM time per step');
    t = Date.now();
    for (const mode of ['reserve', 'no-reserve', 'lagging'] as const) {
      const cost = await race(svc.url, project.key, pool, project.id, mode);
      console.log(`${mode.padEnd(10)} final cost / budget = ${cost.toFixed(2)}`);
    }
    console.log('target: ≤ 1.00 with reservations');
  } finally {
    await pool.end();
    await svc.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
