/**
 * bench:guard — first the headline, reserving checks (`reserve: true`, a unique stepId each):
 * latency of one agent (also against services whose checks each take two round trips — a variant
 * built by the bench, bench/guard/variant-service.ts — on loopback and with PostgreSQL 1 ms away each way behind a delaying proxy, and
 * settling each step as the processors do), throughput of 64 agents on 64 budgets and on one
 * budget (the latter also against a second service whose checks are each their own transaction) and of
 * 16 agents sharing an organization budget, settling each step, and 1,000 checks at once on a
 * budget that fits exactly 14 steps. Then latency and throughput of non-reserving
 * POST /v1/guard/check on one scope holding 1,000,000 events over 365 days (365d window), against
 * the same answer summed from raw events; then the 64-agent overshoot race three ways: with
 * reservations, without, and a lagging reader.
 *
 * The floor (bench/guard/floor.ts) has a one-agent and a 64-budgets line too: a bare node:http
 * process making each check one durable PostgreSQL transaction, driven by the same client code in
 * the same rounds, so the headline says how far above the least a check can cost the service is.
 *
 * Every line is measured in each of the rounds, the lines of a round one after the other, so a
 * line and its baseline see the machine in the same state; the summaries are medians of the rounds.
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
import { delayingProxy } from '../support/delaying-proxy';
import { createBenchProject, median, percentile, resetDatabase, startServiceProcess } from '../support/harness';
import { FLOOR_ROWS_PER_SCOPE, FLOOR_TABLES } from './floor';

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

const BENCH_DATABASE = new URL(DB).pathname.slice(1);

/**
 * The database a PostgreSQL backend serves, from its process title ("postgres: 15/main: user db
 * 127.0.0.1(port) idle"); null for the server's own processes (checkpointer, WAL writer, …).
 */
function backendDatabase(pid: string): string | null {
  const title = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  const rest = title.replace(/^postgres: /, '').replace(/^[^ ]*: /, '');
  return /^\S+ (\S+) (?:\S+\(\d+\)|\[local\])(?: |$)/.exec(rest)?.[1] ?? null;
}

/**
 * CPU time (ms) of each PostgreSQL process on this machine, by pid: the server's own and the
 * bench database's backends, not other databases' (tests may run beside the bench on this server).
 */
function postgresCpuMs(): Map<number, number> {
  const byPid = new Map<number, number>();
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      if (!readFileSync(`/proc/${pid}/comm`, 'utf8').startsWith('postgres')) continue;
      const database = backendDatabase(pid);
      if (database === null || database === BENCH_DATABASE) byPid.set(Number(pid), cpuMs(Number(pid)));
    } catch {
      /* exited */
    }
  }
  return byPid;
}

/**
 * CPU PostgreSQL used between two samples, over the processes alive at the second: a backend
 * started in between (a pool reopening connections it closed while idle) counts whole, one that
 * exited in between (an autovacuum worker) takes its time with it.
 */
function postgresCpuBetween(before: Map<number, number>, after: Map<number, number>): number {
  let total = 0;
  for (const [pid, ms] of after) total += ms - (before.get(pid) ?? 0);
  return total;
}

async function generate(pool: Pool, projectId: string, resourceId: string) {
  // The partitions, the events and the guard's counters as ingest writes them, but in bulk.
  await pool.query(
    `SELECT ensure_event_partition(d) FROM generate_series(now() - interval '366 days', now() + interval '1 month', interval '1 month') AS d`,
  );
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
  await pool.query(
    `INSERT INTO event_ids (project_id, event_id, occurred_at) SELECT project_id, event_id, occurred_at FROM events WHERE project_id = $1`,
    [projectId],
  );
  for (const [g, unit] of [
    ['h', 'hour'],
    ['d', 'day'],
  ]) {
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

/**
 * `concurrency` workers call `fn(worker)` back to back for `forSeconds`; each call's latency is
 * its duration, or the milliseconds it answers (a step of which only the check is timed).
 */
async function measure(
  concurrency: number,
  fn: (worker: number) => Promise<number | void>,
  forSeconds = SECONDS,
): Promise<{ p50: number; p99: number; rate: number; n: number }> {
  const latencies: number[] = [];
  const end = Date.now() + forSeconds * 1000;
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, worker) => {
      while (Date.now() < end) {
        const t = process.hrtime.bigint();
        const own = await fn(worker);
        latencies.push(typeof own === 'number' ? own : Number(process.hrtime.bigint() - t) / 1e6);
      }
    }),
  );
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  return {
    p50: percentile(latencies, 0.5),
    p99: percentile(latencies, 0.99),
    rate: latencies.length / seconds,
    n: latencies.length,
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** 64 agents race a $1.00 budget; each step costs $0.03 and takes `stepMs` of simulated LLM time. */
async function race(
  url: string,
  key: string,
  pool: Pool,
  projectId: string,
  mode: 'reserve' | 'no-reserve' | 'lagging',
  stepMs = 50,
): Promise<number> {
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
          const res = await fetch(`${url}/v1/guard/check`, {
            method: 'POST',
            headers,
            body: JSON.stringify({
              context: { resourceId },
              limits,
              estimate,
              reserve: mode === 'reserve',
              stepId: mode === 'reserve' ? stepId : undefined,
            }),
          });
          const body = (await res.json()) as { decision: string; reservation?: { id: string } };
          if (body.decision !== 'allow') return;
          reservationId = body.reservation?.id;
        }
        await sleep(stepMs);
        const event = {
          eventId: stepId,
          occurredAt: new Date().toISOString(),
          traceId: stepId,
          resourceId,
          entityType: 'agent',
          provider: 'openai',
          model: 'gpt-4o',
          usage: { inputTokens: 4000, outputTokens: 2000 },
          ...(reservationId ? { reservationId } : {}),
        };
        await fetch(`${url}/v1/events`, { method: 'POST', headers, body: JSON.stringify({ events: [event] }) });
      }
    }),
  );
  const { rows } = await pool.query(
    `SELECT coalesce(sum(cost_micros), 0)::bigint AS c FROM events WHERE project_id = $1 AND resource_id = $2 AND type = 'StepUsageRecorded'`,
    [projectId, resourceId],
  );
  return Number(rows[0].c) / 1_000_000;
}

/** A running service as the bench drives it: its process (for its CPU) and a keep-alive pool to it. */
interface Target {
  url: string;
  pid: number;
  http: HttpPool;
}

/** The fields of a check's answer the bench looks at. */
interface Answer {
  decision?: 'allow' | 'deny';
  reason?: string;
  retryAfterMs?: number;
  reservation?: { id: string; estimatedCost: number };
}

/** Answers of a line that decided nothing: busy ones (retried) and fail-mode ones ('guard unavailable …'). */
interface Undecided {
  busy: number;
  unavailable: number;
}

/** What one round of one line measured; CPU is per check, in µs. */
interface RoundResult {
  p50: number;
  p99: number;
  rate: number;
  readsPerCheck: number;
  /** Transactions that wrote the line's reservations, per reservation (1 when each check commits alone); null for the others. */
  xactsPerCheck: number | null;
  /** The share of the line's reserving commits made in one round trip; null where none were made. */
  oneTripShare: number | null;
  serviceUs: number;
  postgresUs: number;
  clientUs: number;
  busy: number;
  unavailable: number;
  /** Open reservations of a reserving line when its round ended (none settles during a line; all hold budget). */
  openAtEnd: number | null;
}

interface Line {
  name: string;
  target: Target;
  concurrency: number;
  reserving: boolean;
  /** The check one worker makes in a round (a settling step answers its check's milliseconds); the reserving lines take fresh budgets each round. */
  check: (round: number, undecided: Undecided) => (worker: number) => Promise<number | void>;
  /** Each check's step is recorded after it, settling its reservation (CPU is then per step). */
  settles?: true;
  /** Its service sits idle between its rounds, long enough for its pool to close its connections (30 s): warm it again first. */
  idleBetweenRounds?: boolean;
  /** A line of the floor: its holds are cleared after each round, as the reserving lines' reservations are. */
  floor?: true;
}

// 1,000 input + 200 output tokens of gpt-4o ($2.50 and $10 per million): $0.0045 a step.
const ESTIMATE = { provider: 'openai', model: 'gpt-4o', inputTokens: 1000, maxOutputTokens: 200 };
const STEP_USAGE = { inputTokens: 1000, outputTokens: 200 };
// $1,000,000 at $0.0045 a step: no line comes near it, so every reserving check is allowed and reserves.
const NEVER_DENY = [{ scope: 'resource', window: '365d', maxCost: 1_000_000 }];
// The SDK's default: past it, the last busy answer is the answer.
const BUSY_DEADLINE_MS = 10_000;

let steps = 0;

/** One reserving check as the SDK makes it: a busy answer is sent again after retryAfterMs plus jitter, the same stepId. */
async function reserveCheck(
  t: Target,
  headers: Record<string, string>,
  context: Record<string, string>,
  undecided: Undecided,
  limits: readonly Record<string, unknown>[] = NEVER_DENY,
  stepId = `step-${++steps}`,
): Promise<string | undefined> {
  const body = JSON.stringify({ context, limits, estimate: ESTIMATE, reserve: true, stepId });
  const first = Date.now();
  for (;;) {
    const res = await t.http.request({ path: '/v1/guard/check', method: 'POST', headers, body });
    const answer = (await res.body.json()) as Answer;
    if (answer.reason === 'busy') {
      undecided.busy++;
      const base =
        answer.retryAfterMs !== undefined && answer.retryAfterMs > 0 ? Math.min(answer.retryAfterMs, 1000) : 100;
      const delay = base + Math.random() * base;
      if (Date.now() + delay - first > BUSY_DEADLINE_MS) return;
      await sleep(delay);
      continue;
    }
    if (answer.reason?.startsWith('guard unavailable')) {
      undecided.unavailable++;
      return;
    }
    if (res.statusCode !== 200 || answer.decision !== 'allow' || !answer.reservation)
      throw new Error(
        `a reserving check under a budget no line reaches answered ${res.statusCode} ${JSON.stringify(answer)}`,
      );
    return answer.reservation.id;
  }
}

/**
 * One step of an agent as the processors run it: the reserving check (timed: its milliseconds are
 * the answer), then the step recorded with its reservation, at the counts a real step settles at —
 * a few more input tokens than the estimate, an answer shorter than its maximum.
 */
async function settlingStep(
  t: Target,
  headers: Record<string, string>,
  context: Record<string, string>,
  undecided: Undecided,
  limits: readonly Record<string, unknown>[] = NEVER_DENY,
): Promise<number> {
  const n = ++steps;
  const started = process.hrtime.bigint();
  const reservationId = await reserveCheck(t, headers, context, undecided, limits, `step-${n}`);
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  if (!reservationId) return ms;
  const event = {
    eventId: `step-${n}`,
    occurredAt: new Date().toISOString(),
    ...context,
    entityType: 'agent',
    provider: ESTIMATE.provider,
    model: ESTIMATE.model,
    usage: { inputTokens: ESTIMATE.inputTokens + (n % 40), outputTokens: 60 + (n % 90) },
    reservationId,
  };
  const res = await t.http.request({
    path: '/v1/events',
    method: 'POST',
    headers,
    body: JSON.stringify({ events: [event] }),
  });
  const body = (await res.body.json()) as { accepted?: number };
  if (res.statusCode !== 200 || body.accepted !== 1)
    throw new Error(`a step's event answered ${res.statusCode} ${JSON.stringify(body)}`);
  return ms;
}

/** The guard's counters on /metrics: usage reads, and reserving commits by path (a missed one-trip commit is then made in two). */
async function countersOf(url: string): Promise<{ reads: number; oneTrip: number; twoTrips: number }> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const counter = (pattern: string) => Number(new RegExp(`^${pattern} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
  return {
    reads: counter('tollgate_guard_usage_reads_total'),
    oneTrip: counter('tollgate_guard_commits_total\\{path="one_trip"\\}'),
    twoTrips: counter('tollgate_guard_commits_total\\{path="two_trips"\\}'),
  };
}

function oneTripShare(
  a: { oneTrip: number; twoTrips: number },
  b: { oneTrip: number; twoTrips: number },
): number | null {
  const one = b.oneTrip - a.oneTrip;
  const commits = one + b.twoTrips - a.twoTrips;
  return commits ? one / commits : null;
}

async function sample(t: Target) {
  return { ...(await countersOf(t.url)), service: cpuMs(t.pid), postgres: postgresCpuMs(), client: process.cpuUsage() };
}

/**
 * Bench housekeeping between lines, outside any measurement: deletes the reserving project's
 * reservations, so that every line and round starts from the same table (a read's plan may walk
 * every open reservation, or every reservation of the project, whatever its budget), and vacuums
 * what the checks churned, since autovacuum is off on this machine. Answers how many there were,
 * how many were still open, and how many transactions wrote them (their distinct xmin: per
 * database, unlike the server-wide transaction counter, which tests beside the bench advance).
 */
async function clearReservations(
  pool: Pool,
  projectId: string,
): Promise<{ reservations: number; open: number; xacts: number }> {
  const { rows } = await pool.query<{ n: string; open: string; xacts: string }>(
    `WITH gone AS (DELETE FROM reservations WHERE project_id = $1 RETURNING status, xmin)
     SELECT count(*) AS n, count(*) FILTER (WHERE status = 'open') AS open, count(DISTINCT xmin::text) AS xacts FROM gone`,
    [projectId],
  );
  // What the deleted reservations held (the guard reads holds, not reservations).
  await pool.query('DELETE FROM reservation_holds WHERE project_id = $1', [projectId]);
  await pool.query('DELETE FROM reservation_hold_totals WHERE project_id = $1', [projectId]);
  await pool.query('VACUUM (ANALYZE) reservations, reservation_holds, reservation_hold_totals, usage_counters');
  await pool.query('VACUUM events, event_ids');
  return { reservations: Number(rows[0].n), open: Number(rows[0].open), xacts: Number(rows[0].xacts) };
}

const HERD = 1000;
// 14 steps reserve 14 × $0.0045 = $0.0630 < $0.0631; a 15th would bring it to $0.0675 ≥ $0.0631, and a
// limit is reached when usage + estimate ≥ it: exactly 14 fit.
const HERD_MAX_COST = 0.0631;

/**
 * 1,000 reserving checks at once on one budget that fits exactly 14 steps (each caller its own
 * trace, as agents are), in a project of its own; then each allowed step settles with its step
 * event. Checks the count, the fail-mode and busy answers, reservations no caller received, and
 * the spend against the budget.
 */
async function herd(t: Target, pool: Pool, label: string, resourceId: string): Promise<void> {
  const project = await createBenchProject(t.url);
  const headers = { authorization: `Bearer ${project.key}`, 'content-type': 'application/json' };
  const limits = [{ scope: 'resource', window: '24h', maxCost: HERD_MAX_COST }];
  const http = new HttpPool(t.url, { connections: HERD, headersTimeout: 60_000, bodyTimeout: 60_000 });
  try {
    // Every connection open first, so that the checks arrive together, not paced by TCP handshakes.
    await Promise.all(
      Array.from({ length: HERD }, async () => (await http.request({ path: '/health', method: 'GET' })).body.dump()),
    );
    const started = Date.now();
    const answers = await Promise.all(
      Array.from({ length: HERD }, async (_, n) => {
        const stepId = `${resourceId}-step-${n}`;
        const context = { resourceId, traceId: `${resourceId}-agent-${n}` };
        const res = await http.request({
          path: '/v1/guard/check',
          method: 'POST',
          headers,
          body: JSON.stringify({ context, limits, estimate: ESTIMATE, reserve: true, stepId }),
        });
        return { stepId, context, status: res.statusCode, answer: (await res.body.json()) as Answer };
      }),
    );
    const ms = Date.now() - started;
    const ok = answers.filter((a) => a.status === 200);
    const allowed = ok.filter((a) => a.answer.decision === 'allow' && a.answer.reason === undefined);
    const denied = ok.filter((a) => a.answer.decision === 'deny' && a.answer.reason === undefined).length;
    const unavailable = ok.filter((a) => a.answer.reason?.startsWith('guard unavailable')).length;
    const busy = ok.filter((a) => a.answer.reason === 'busy').length;
    const other = HERD - allowed.length - denied - unavailable - busy;
    const received = new Set(answers.flatMap((a) => (a.answer.reservation ? [a.answer.reservation.id] : [])));
    const { rows: open } = await pool.query<{ id: string }>(
      `SELECT id FROM reservations WHERE project_id = $1 AND status = 'open'`,
      [project.id],
    );
    const orphans = open.filter((r) => !received.has(r.id)).length;
    const estimated = allowed[0]?.answer.reservation?.estimatedCost;
    const perStep = typeof estimated === 'number' && estimated > 0 ? estimated : undefined;
    const fit = perStep ? Math.ceil(HERD_MAX_COST / perStep - 1e-9) - 1 : NaN;

    const settled = await Promise.all(
      allowed.map(async (a) => {
        const event = {
          eventId: `${a.stepId}-usage`,
          occurredAt: new Date().toISOString(),
          ...a.context,
          entityType: 'agent',
          provider: 'openai',
          model: 'gpt-4o',
          usage: STEP_USAGE,
          reservationId: a.answer.reservation?.id,
        };
        const res = await http.request({
          path: '/v1/events',
          method: 'POST',
          headers,
          body: JSON.stringify({ events: [event] }),
        });
        return ((await res.body.json()) as { accepted?: number }).accepted === 1;
      }),
    );
    const { rows: spent } = await pool.query<{ c: string }>(
      `SELECT coalesce(sum(cost_micros), 0)::bigint AS c FROM events WHERE project_id = $1 AND resource_id = $2 AND type = 'StepUsageRecorded'`,
      [project.id, resourceId],
    );
    const { rows: left } = await pool.query<{ n: string }>(
      `SELECT count(*) AS n FROM reservations WHERE project_id = $1 AND status = 'open'`,
      [project.id],
    );
    const spend = Number(spent[0].c) / 1e6;
    const pad = ' '.repeat(label.length + 2);
    console.log(
      `${label}: ${HERD} answers in ${ms} ms: allowed ${allowed.length} (must be 14${perStep ? `; ${fit} fit at the $${perStep.toFixed(6)} reserved per step` : ''}), denied ${denied}, busy ${busy}, guard unavailable ${unavailable} (must be 0)${other ? `, other ${other}` : ''}; open reservations no caller received ${orphans} (must be 0)`,
    );
    console.log(
      `${pad}settled ${settled.filter(Boolean).length} of ${allowed.length} steps: spend $${spend.toFixed(6)} of $${HERD_MAX_COST} = ${(spend / HERD_MAX_COST).toFixed(3)}× (must be ≤ 1.00×); reservations still open ${left[0].n}`,
    );
  } finally {
    await http.close();
  }
}

/**
 * The floor's tables, filled with usage rows for every scope its lines use (fresh ones each round,
 * as the service's lines take), then its process, on the bench database with the service's pool size.
 */
async function startFloor(pool: Pool, env: Record<string, string>) {
  await pool.query(FLOOR_TABLES);
  await pool.query(
    `INSERT INTO bench_floor_usage (scope, at, cost_micros)
     SELECT 'resource:r' || r || '-floor' || suffix, now() - h * interval '1 hour', 4500
       FROM generate_series(0, $1::int) AS r,
            (SELECT '' AS suffix UNION ALL SELECT '-' || w FROM generate_series(0, 63) AS w) AS scopes,
            generate_series(1, $2::int) AS h`,
    [ROUNDS, FLOOR_ROWS_PER_SCOPE],
  );
  await pool.query('VACUUM ANALYZE bench_floor_usage, bench_floor_holds');
  const server = await startServiceProcess('guard-floor', {
    DATABASE_URL: env.DATABASE_URL,
    DATABASE_POOL_SIZE: env.DATABASE_POOL_SIZE,
  });
  const target: Target = {
    url: server.url,
    pid: server.child.pid!,
    http: new HttpPool(server.url, { connections: 128 }),
  };
  return { server, target };
}

type Floor = Awaited<ReturnType<typeof startFloor>>;

async function stopFloor(floor: Floor | undefined): Promise<void> {
  await floor?.target.http.close();
  await floor?.server.stop();
}

/** Between lines, as clearReservations: every round of a floor line starts from an empty holds table. */
async function clearFloorHolds(pool: Pool): Promise<void> {
  await pool.query('TRUNCATE bench_floor_holds');
}

/** A headline line of the service against the floor's line of the same load and rounds. */
function printAgainstFloor(
  load: '1 agent' | '64 budgets',
  service: { p50: number; p99: number; rate: number },
  floor: { p50: number; p99: number; rate: number; cpu: number; service: number; postgres: number },
): void {
  const cpu = `CPU ${floor.cpu.toFixed(0)} µs per check (floor process ${floor.service.toFixed(0)} + PostgreSQL ${floor.postgres.toFixed(0)})`;
  if (load === '1 agent')
    console.log(
      `  against the floor, 1 agent (one durable transaction per check in a bare node:http process): p50 ${ms2(floor.p50)} ms, p99 ${ms2(floor.p99)} ms, ${cpu} → p50 ×${(service.p50 / floor.p50).toFixed(2)} (target ≤ 1.6×), p99 ×${(service.p99 / floor.p99).toFixed(2)}`,
    );
  else
    console.log(
      `  against the floor, 64 agents on 64 budgets: ${floor.rate.toFixed(0)} checks/s, p99 ${ms2(floor.p99)} ms, ${cpu} → checks/s ×${(service.rate / floor.rate).toFixed(2)}, p99 ×${(service.p99 / floor.p99).toFixed(2)}`,
    );
}

const ms2 = (x: number) => x.toFixed(2);
const medianOf = (rs: RoundResult[], f: (r: RoundResult) => number) => median(rs.map(f));

async function main() {
  await resetDatabase(DB);
  // The per-key rate limiter still runs (its Redis leases are part of the cost), above the load.
  const env = {
    DATABASE_URL: DB,
    DATABASE_POOL_SIZE: '24',
    GUARD_TIMEOUT_MS: '20000',
    RATE_LIMIT_PER_KEY_PER_SECOND: '1000000',
    RATE_LIMIT_BURST: '1000000',
  };
  const svc = await startServiceProcess('api', env);
  // The same service with each reserving check its own transaction, for the one-budget line's
  // comparison. Started after the first has migrated the database; idle but for its own lines.
  const svcOff = await startServiceProcess('guard-variant', { ...env, BENCH_GUARD_VARIANT: 'no-group-commit' }).catch(
    async (err: unknown) => {
      await svc.stop();
      throw err;
    },
  );
  // Each reserving check alone in two round trips (the two-trips variant), on loopback and, as both
  // services beside it, with PostgreSQL about 1 ms away each way (a delaying proxy): what one
  // round trip saves where PostgreSQL runs on another host.
  const proxy = await delayingProxy({ host: new URL(DB).hostname, port: Number(new URL(DB).port || 5432) }, 1);
  const farDb = Object.assign(new URL(DB), { port: String(proxy.port) }).toString();
  const few = { ...env, DATABASE_POOL_SIZE: '4' };
  const extra: Awaited<ReturnType<typeof startServiceProcess>>[] = [];
  try {
    extra.push(await startServiceProcess('guard-variant', { ...few, BENCH_GUARD_VARIANT: 'two-trips' }));
    extra.push(await startServiceProcess('api', { ...few, DATABASE_URL: farDb }));
    extra.push(
      await startServiceProcess('guard-variant', { ...few, DATABASE_URL: farDb, BENCH_GUARD_VARIANT: 'two-trips' }),
    );
  } catch (err) {
    for (const s of [svc, svcOff, ...extra]) await s.stop();
    await proxy.close();
    throw err;
  }
  const [two, far, farTwo] = extra.map((s): Target => ({
    url: s.url,
    pid: s.child.pid!,
    http: new HttpPool(s.url, { connections: 4 }),
  }));
  const pool = new Pool({ connectionString: DB, max: 16 });
  let floor: Floor | undefined;
  const on: Target = { url: svc.url, pid: svc.child.pid!, http: new HttpPool(svc.url, { connections: 128 }) };
  const off: Target = { url: svcOff.url, pid: svcOff.child.pid!, http: new HttpPool(svcOff.url, { connections: 128 }) };
  try {
    const project = await createBenchProject(svc.url);
    const resourceId = 'resource-with-a-year';
    let t = Date.now();
    await generate(pool, project.id, resourceId);
    console.log(
      `generated ${EVENTS} events over 365 days for one resource in ${((Date.now() - t) / 1000).toFixed(1)} s`,
    );

    floor = await startFloor(pool, env);

    const headers = { authorization: `Bearer ${project.key}`, 'content-type': 'application/json' };
    const body = JSON.stringify({
      context: { resourceId },
      limits: [{ scope: 'resource', window: '365d', maxCost: 1_000_000 }],
    });
    const http = on.http;
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
    // Checks of one budget share reads; checks of 64 different budgets cannot: one statement each.
    let agent = 0;
    const ownScope = async () => {
      const mine = `agent-${agent++ % 64}`;
      const res = await http.request({
        path: '/v1/guard/check',
        method: 'POST',
        headers,
        body: JSON.stringify({
          context: { resourceId: mine },
          limits: [{ scope: 'resource', window: '365d', maxCost: 1_000_000 }],
        }),
      });
      if (((await res.body.json()) as { decision: string }).decision !== 'allow') throw new Error('not allowed');
    };
    // Same answer both ways (sanity): the guard's usage equals the raw sum.
    await check();
    const { rows } = await pool.query(
      `SELECT sum(input_tokens)::bigint AS i FROM events WHERE project_id = $1 AND resource_id = $2 AND occurred_at >= now() - interval '365 days'`,
      [project.id, resourceId],
    );
    const guardInput = last.usage[`resource:${resourceId}@365d`].inputTokens;
    console.log(
      `sanity: guard input tokens ${guardInput}, raw sum ${rows[0].i} → ${Number(rows[0].i) === guardInput ? 'equal' : 'DIFFERENT'}`,
    );

    // The reserving lines write to a project of their own, whose reservations the bench clears between lines.
    const rsv = await createBenchProject(svc.url);
    const rsvHeaders = { authorization: `Bearer ${rsv.key}`, 'content-type': 'application/json' };
    const reserving = (
      name: string,
      target: Target,
      concurrency: number,
      context: (round: number, worker: number) => Record<string, string>,
    ): Line => ({
      name,
      target,
      concurrency,
      reserving: true,
      check: (round, undecided) => async (worker) => {
        await reserveCheck(target, rsvHeaders, context(round, worker), undecided);
      },
    });
    // Agents as the processors run them: each check's step recorded after it, settling its reservation.
    const settling = (
      name: string,
      concurrency: number,
      context: (round: number, worker: number) => Record<string, string>,
      limits = NEVER_DENY,
    ): Line => ({
      name,
      target: on,
      concurrency,
      reserving: true,
      settles: true,
      check: (round, undecided) => (worker) => settlingStep(on, rsvHeaders, context(round, worker), undecided, limits),
    });
    const solo = reserving('reserve     1 agent, own budget', on, 1, (r) => ({
      resourceId: `r${r}-solo`,
      traceId: `r${r}-solo`,
    }));
    const soloSettling = settling('reserve     1 agent, settling each step', 1, (r) => ({
      resourceId: `r${r}-settle`,
      traceId: `r${r}-settle`,
    }));
    // Their own budgets and one of their organization: every step of one moves the usage the others read.
    const orgSettling = settling(
      'reserve    16 agents, shared org budget, settling',
      16,
      (r, w) => ({ resourceId: `r${r}-org-${w}`, traceId: `r${r}-org-${w}`, organizationId: `r${r}-org` }),
      [...NEVER_DENY, { scope: 'organization', window: '365d', maxCost: 1_000_000 }],
    );
    const alone = (name: string, target: Target, tag: string): Line => ({
      ...reserving(name, target, 1, (r) => ({ resourceId: `r${r}-${tag}`, traceId: `r${r}-${tag}` })),
      idleBetweenRounds: true,
    });
    const soloTwo = alone('reserve     1 agent, 2 trips', two, 'solo-two');
    const soloFar = alone('reserve     1 agent, PG 1 ms away', far, 'solo-far');
    const soloFarTwo = alone('reserve     1 agent, PG 1 ms away, 2 trips', farTwo, 'solo-far-two');
    // Idle between their rounds, as the lines of the services beside `on` are: warmed again first,
    // so that they come to each round as the service's lines do, with every connection open.
    const floorSolo: Line = {
      ...reserving('floor       1 agent, own budget', floor.target, 1, (r) => ({ resourceId: `r${r}-floor` })),
      reserving: false,
      floor: true,
      idleBetweenRounds: true,
    };
    const floorSpread: Line = {
      ...reserving('floor      64 agents, 64 budgets', floor.target, 64, (r, w) => ({
        resourceId: `r${r}-floor-${w}`,
      })),
      reserving: false,
      floor: true,
      idleBetweenRounds: true,
    };
    const spread = reserving('reserve    64 agents, 64 budgets', on, 64, (r, w) => ({
      resourceId: `r${r}-own-${w}`,
      traceId: `r${r}-own-${w}`,
    }));
    const shared = reserving('reserve    64 agents, 1 budget', on, 64, (r, w) => ({
      resourceId: `r${r}-shared-on`,
      traceId: `r${r}-shared-on-${w}`,
    }));
    const sharedOff: Line = {
      ...reserving('reserve    64 agents, 1 budget, off', off, 64, (r, w) => ({
        resourceId: `r${r}-shared-off`,
        traceId: `r${r}-shared-off-${w}`,
      })),
      idleBetweenRounds: true,
    };
    const year = new Map(
      [1, 16, 64].map((c): [number, Line] => [
        c,
        {
          name: `no-reserve ${String(c).padStart(2)} agent${c === 1 ? '' : 's'}, year scope`,
          target: on,
          concurrency: c,
          reserving: false,
          check: () => check,
        },
      ]),
    );
    const spreadBase: Line = {
      name: 'no-reserve 64 agents, 64 budgets',
      target: on,
      concurrency: 64,
      reserving: false,
      check: () => ownScope,
    };
    const lines = [
      solo,
      floorSolo,
      soloSettling,
      soloTwo,
      soloFar,
      soloFarTwo,
      spread,
      floorSpread,
      shared,
      sharedOff,
      orgSettling,
      ...year.values(),
      spreadBase,
    ];

    // A running service is warm: 3 s of checks before anything is measured; 2 s of each
    // many-agent line, as the pools open and prepare their other connections (round 0's budgets).
    await measure(16, check, 3);
    await measure(64, ownScope, 2);
    for (const line of lines.filter((l) => (l.reserving || l.floor) && l.concurrency > 1))
      await measure(line.concurrency, line.check(0, { busy: 0, unavailable: 0 }), 2);
    await clearReservations(pool, rsv.id);
    await clearFloorHolds(pool);

    const width = Math.max(...lines.map((l) => l.name.length));
    console.log(
      `\nguard checks, ${ROUNDS} rounds of ${SECONDS} s per line, the reserving lines first (CPU per check: service process, PostgreSQL, this client)`,
    );
    console.log(
      '  reserve: reserve: true, a unique stepId and a gpt-4o estimate ($0.0045) per check, a $1,000,000 budget (never denies); fresh budgets each round',
    );
    console.log(
      "  settling: after each check its step is recorded with its reservation (a few more input tokens than estimated, fewer output tokens than the maximum), as the processors do; the latency is the check's, the CPU the whole step's",
    );
    console.log(
      '  year scope: the resource holding the year of events; "off": the second service, each check its own transaction (bench/guard/variant-service.ts); "2 trips": a service whose checks each take two round trips (the same); "PG 1 ms away": services whose PostgreSQL is behind a proxy in this process delaying each chunk 1 ms each way; floor: bench/guard/floor.ts, each check one transaction in one round trip (its "service µs" is the floor process\'s); xacts/check: transactions that wrote the reservations, per reservation; 1 trip: the share of the reserving commits made in one round trip (the others in two: a budget\'s first, a batch whose guessed usage missed, a service with it off)',
    );
    console.log(
      `${'line'.padEnd(width)} | round | p50 ms | p99 ms | checks/s | reads/check | xacts/check | 1 trip | service µs | postgres µs | client µs | busy | open at end`,
    );
    const results = new Map<string, RoundResult[]>();
    for (let round = 1; round <= ROUNDS; round++) {
      for (const line of lines) {
        if (line.idleBetweenRounds) {
          await measure(line.concurrency, line.check(-round, { busy: 0, unavailable: 0 }), 1);
          await clearReservations(pool, rsv.id);
          if (line.floor) await clearFloorHolds(pool);
        }
        const undecided: Undecided = { busy: 0, unavailable: 0 };
        const fn = line.check(round, undecided);
        const a = await sample(line.target);
        const g = await measure(line.concurrency, fn);
        const b = await sample(line.target);
        const written = line.reserving ? await clearReservations(pool, rsv.id) : null;
        if (line.floor) await clearFloorHolds(pool);
        const per = (ms: number) => (ms * 1000) / g.n;
        const r: RoundResult = {
          ...g,
          readsPerCheck: (b.reads - a.reads) / g.n,
          oneTripShare: oneTripShare(a, b),
          // A settled reservation's row was last written by the step that settled it.
          xactsPerCheck: written && !line.settles ? written.xacts / written.reservations : null,
          serviceUs: per(b.service - a.service),
          postgresUs: per(postgresCpuBetween(a.postgres, b.postgres)),
          clientUs: per((b.client.user - a.client.user + b.client.system - a.client.system) / 1000),
          ...undecided,
          openAtEnd: written && written.open,
        };
        results.set(line.name, [...(results.get(line.name) ?? []), r]);
        console.log(
          `${line.name.padEnd(width)} | ${String(round).padStart(5)} | ${ms2(r.p50).padStart(6)} | ${ms2(r.p99).padStart(6)} | ${r.rate.toFixed(0).padStart(8)} | ${r.readsPerCheck.toFixed(2).padStart(11)} | ${(r.xactsPerCheck?.toFixed(2) ?? '-').padStart(11)} | ${(r.oneTripShare === null ? '-' : `${(100 * r.oneTripShare).toFixed(0)} %`).padStart(6)} | ${r.serviceUs.toFixed(0).padStart(10)} | ${r.postgresUs.toFixed(0).padStart(11)} | ${r.clientUs.toFixed(0).padStart(9)} | ${String(r.busy).padStart(4)} | ${r.openAtEnd ?? '-'}${r.unavailable ? ` (guard unavailable: ${r.unavailable})` : ''}`,
        );
      }
    }
    // Done with the floor: its connections go back before the herds, which can fill the services' pools.
    await stopFloor(floor);
    floor = undefined;
    const med = (line: Line) => {
      const rs = results.get(line.name)!;
      const m = (f: (r: RoundResult) => number) => medianOf(rs, f);
      return {
        p50: m((r) => r.p50),
        p99: m((r) => r.p99),
        rate: m((r) => r.rate),
        reads: m((r) => r.readsPerCheck),
        xacts: m((r) => r.xactsPerCheck ?? NaN),
        service: m((r) => r.serviceUs),
        postgres: m((r) => r.postgresUs),
        cpu: m((r) => r.serviceUs + r.postgresUs),
        oneTrip: m((r) => r.oneTripShare ?? NaN),
      };
    };
    const [s1, s64, s1b, s1bOff, b1, b64] = [solo, spread, shared, sharedOff, year.get(1)!, spreadBase].map(med);
    console.log(
      `\nheadline: reserving checks, medians of ${ROUNDS} rounds, each against a baseline measured in the same rounds`,
    );
    console.log(`reserve, 1 agent (own budget):    p50 ${ms2(s1.p50)} ms, p99 ${ms2(s1.p99)} ms`);
    console.log(
      `  against no-reserve, 1 agent on the year scope: p50 ${ms2(b1.p50)} ms, p99 ${ms2(b1.p99)} ms → p50 ×${(s1.p50 / b1.p50).toFixed(2)}, p99 ×${(s1.p99 / b1.p99).toFixed(2)}`,
    );
    printAgainstFloor('1 agent', s1, med(floorSolo));
    const [s1Settling, orgS] = [soloSettling, orgSettling].map(med);
    const pct = (share: number) => `${(100 * share).toFixed(0)} %`;
    console.log(
      `  settling each step, as the processors do: p50 ${ms2(s1Settling.p50)} ms → ×${(s1Settling.p50 / s1.p50).toFixed(2)} the line that never settles; ${pct(s1Settling.oneTrip)} of its commits in one round trip`,
    );
    const [s1Two, s1Far, s1FarTwo] = [soloTwo, soloFar, soloFarTwo].map(med);
    console.log(
      `  one round trip against two (the two-trips variant): PostgreSQL on loopback p50 ${ms2(s1.p50)} vs ${ms2(s1Two.p50)} ms → ×${(s1.p50 / s1Two.p50).toFixed(2)}; PostgreSQL 1 ms away each way p50 ${ms2(s1Far.p50)} vs ${ms2(s1FarTwo.p50)} ms → ×${(s1Far.p50 / s1FarTwo.p50).toFixed(2)}`,
    );
    console.log(
      `reserve, 64 agents on 64 budgets: ${s64.rate.toFixed(0)} checks/s, p99 ${ms2(s64.p99)} ms, CPU ${s64.cpu.toFixed(0)} µs per check (service ${s64.service.toFixed(0)} + PostgreSQL ${s64.postgres.toFixed(0)})`,
    );
    console.log(
      `  against no-reserve, 64 agents on 64 budgets: ${b64.rate.toFixed(0)} checks/s, p99 ${ms2(b64.p99)} ms, CPU ${b64.cpu.toFixed(0)} µs → checks/s ×${(s64.rate / b64.rate).toFixed(2)}, CPU ×${(s64.cpu / b64.cpu).toFixed(2)}`,
    );
    printAgainstFloor('64 budgets', s64, med(floorSpread));
    console.log(
      `reserve, 64 agents on 1 budget:   ${s1b.rate.toFixed(0)} checks/s, p99 ${ms2(s1b.p99)} ms, CPU ${s1b.cpu.toFixed(0)} µs per check, ${s1b.reads.toFixed(2)} reads and ${s1b.xacts.toFixed(2)} transactions per check → ×${(s1b.rate / s64.rate).toFixed(2)} the 64-budgets checks/s`,
    );
    console.log(
      `  each check its own transaction: ${s1bOff.rate.toFixed(0)} checks/s, p99 ${ms2(s1bOff.p99)} ms, CPU ${s1bOff.cpu.toFixed(0)} µs per check, ${s1bOff.reads.toFixed(2)} reads and ${s1bOff.xacts.toFixed(2)} transactions per check → ×${(s1bOff.rate / s64.rate).toFixed(2)} the 64-budgets checks/s`,
    );
    console.log(
      `  group commit on ÷ off: checks/s ×${(s1b.rate / s1bOff.rate).toFixed(2)}, p99 ×${(s1b.p99 / s1bOff.p99).toFixed(2)}`,
    );
    console.log(
      `reserve, 16 agents settling each step, their own budgets and one shared organization budget: ${orgS.rate.toFixed(0)} steps/s, check p50 ${ms2(orgS.p50)} ms, p99 ${ms2(orgS.p99)} ms, CPU ${orgS.cpu.toFixed(0)} µs per step (check and event), ${pct(orgS.oneTrip)} of commits in one round trip`,
    );
    console.log(
      'targets: 1 agent p50 ≤ 2 ms; 64 budgets ≥ 1,500 checks/s, p99 ≤ 50 ms, ≤ 600 µs CPU (service + PostgreSQL) per check; 1 budget ≥ 0.8× the 64-budgets checks/s, p99 ≤ 60 ms',
    );

    console.log(
      `\n${HERD} reserving checks at once on one budget that fits exactly 14 steps ($${HERD_MAX_COST} in 24h; gpt-4o 1,000 in + 200 out = $0.0045 a step); then each allowed step settles`,
    );
    await herd(on, pool, 'group commit on ', 'herd-on');
    await herd(off, pool, 'group commit off', 'herd-off');

    const c0 = process.cpuUsage();
    const f = await measure(64, fetchCheck);
    const fc = process.cpuUsage(c0);
    console.log(
      `\n(non-reserving at 64 through global fetch(): ${f.rate.toFixed(0)} checks/s, p99 ${f.p99.toFixed(2)} ms, client ${((((fc.user + fc.system) / 1000) * 1000) / f.n).toFixed(0)} µs CPU per check)`,
    );
    console.log(
      `(64 agents on 64 different resources, nothing to share: ${b64.rate.toFixed(0)} checks/s, p50 ${b64.p50.toFixed(2)} ms, p99 ${b64.p99.toFixed(2)} ms, ${b64.reads.toFixed(2)} reads/check, service ${b64.service.toFixed(0)} µs per check)`,
    );

    console.log('\nnon-reserving checks, medians over the rounds, against the raw-sum baseline measured now:');
    console.log(
      'concurrency | guard p50 ms | guard p99 ms | checks/s | raw-sum p50 ms | raw-sum p99 ms | raw sums/s | p50 ratio raw/guard',
    );
    for (const c of [1, 16, 64]) {
      const g = med(year.get(c)!);
      const r = await measure(c, rawSum, 8);
      console.log(
        `${String(c).padStart(11)} | ${g.p50.toFixed(2).padStart(12)} | ${g.p99.toFixed(2).padStart(12)} | ${g.rate.toFixed(0).padStart(8)} | ${r.p50.toFixed(2).padStart(14)} | ${r.p99.toFixed(2).padStart(14)} | ${r.rate.toFixed(1).padStart(10)} | ${(r.p50 / g.p50).toFixed(1).padStart(6)}x`,
      );
    }
    console.log('targets: p50 ≤ 3 ms at concurrency 1; ≥ 2000 checks/s at 64 with p99 ≤ 25 ms');

    console.log('\novershoot: 64 agents, $1.00 budget, $0.03 steps (33 fit), 50 ms of LLM time per step');
    t = Date.now();
    for (const mode of ['reserve', 'no-reserve', 'lagging'] as const) {
      const cost = await race(svc.url, project.key, pool, project.id, mode);
      console.log(`${mode.padEnd(10)} final cost / budget = ${cost.toFixed(2)}`);
    }
    console.log('target: ≤ 1.00 with reservations');
  } finally {
    await on.http.close();
    await off.http.close();
    await stopFloor(floor);
    await pool.end();
    for (const t of [two, far, farTwo]) await t.http.close();
    for (const s of [svc, svcOff, ...extra]) await s.stop();
    await proxy.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
