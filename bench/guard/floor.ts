import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { Pool, type PoolClient } from 'pg';

/**
 * The floor of bench:guard: the least a reserving check can cost here, to hold the service's
 * reserving lines against. A bare node:http server that makes each check one durable PostgreSQL
 * transaction, sent in one round trip: BEGIN; an advisory lock on the budget's scope; one usage sum
 * over indexed rows with the hold inserted when it fits; COMMIT. No auth, no pricing catalog, no
 * batching, no idempotent step ids, and its holds are written but never summed back (the service
 * keeps a running total of its holds for that, one more row per check): what is left is the HTTP
 * exchange and the durable transaction any guard check needs, so it is a floor, not a guard. The
 * bench starts it as its own process, as it starts the service, and drives it with the same client
 * code, so a ratio of the two is what the service costs above that floor.
 */

/** The floor's tables, in the bench database: usage rows to sum (an index on (scope, at)) and holds. */
export const FLOOR_TABLES = `
  DROP TABLE IF EXISTS bench_floor_usage, bench_floor_holds;
  CREATE TABLE bench_floor_usage (scope text NOT NULL, at timestamptz NOT NULL, cost_micros bigint NOT NULL);
  CREATE INDEX ON bench_floor_usage (scope, at);
  CREATE TABLE bench_floor_holds (
    id uuid PRIMARY KEY, scope text NOT NULL, at timestamptz NOT NULL, cost_micros bigint NOT NULL)`;

/** Usage rows each scope starts with (one an hour over the last day), so that the sum reads something. */
export const FLOOR_ROWS_PER_SCOPE = 24;

// Prepared in the first check on each connection, so that checks run on a plan cached for the
// connection, as the service's do, and the first costs no extra round trip.
const PREPARE = `
  PREPARE floor_lock(text) AS SELECT pg_advisory_xact_lock(hashtextextended($1, 0));
  PREPARE floor_reserve(text, int, uuid, bigint, bigint) AS
    WITH used AS (
      SELECT coalesce(sum(cost_micros), 0)::bigint AS micros FROM bench_floor_usage
       WHERE scope = $1 AND at > now() - $2 * interval '1 second'),
    held AS (
      INSERT INTO bench_floor_holds (id, scope, at, cost_micros)
      SELECT $3, $1, now(), $4 FROM used WHERE micros + $4 < $5 RETURNING id)
    SELECT micros, (SELECT count(*) FROM held)::int AS held FROM used;`;

/** The pool's connections that have the statements prepared (pg hands out the same client objects). */
const prepared = new WeakSet<PoolClient>();

// Priced as gpt-4o ($2.50 and $10 per million tokens), the only model bench:guard sends.
const INPUT_MICROS_PER_TOKEN = 2.5;
const OUTPUT_MICROS_PER_TOKEN = 10;
const WINDOW_SECONDS: Record<string, number> = { h: 3600, d: 86400 };

/** What the floor reads of a check's body: the first limit only (the bench's reserving lines send one). */
interface FloorCheck {
  scope: string;
  windowSeconds: number;
  maxMicros: number;
  costMicros: number;
}

function parseCheck(raw: string): FloorCheck | null {
  const body = JSON.parse(raw) as {
    context?: Record<string, string>;
    limits?: { scope?: string; window?: string; maxCost?: number }[];
    estimate?: { inputTokens?: number; maxOutputTokens?: number };
  };
  const limit = body.limits?.[0];
  const id = limit?.scope ? body.context?.[`${limit.scope}Id`] : undefined;
  const window = /^(\d+)([hd])$/.exec(limit?.window ?? '');
  if (!limit || !id || !window || typeof limit.maxCost !== 'number') return null;
  const cost =
    (body.estimate?.inputTokens ?? 0) * INPUT_MICROS_PER_TOKEN +
    (body.estimate?.maxOutputTokens ?? 0) * OUTPUT_MICROS_PER_TOKEN;
  return {
    scope: `${limit.scope}:${id}`,
    windowSeconds: Number(window[1]) * WINDOW_SECONDS[window[2]],
    maxMicros: Math.round(limit.maxCost * 1e6),
    costMicros: Math.ceil(cost),
  };
}

/** Checks made, for GET /metrics: each is one usage read and one commit in one round trip. */
let checks = 0;

/** One check: one transaction in one simple query (BEGIN … COMMIT), on a pooled connection. */
async function reserve(pool: Pool, check: FloorCheck): Promise<{ id?: string; usedMicros: number }> {
  const client: PoolClient = await pool.connect();
  const id = randomUUID();
  const scope = client.escapeLiteral(check.scope);
  const text = `BEGIN; ${prepared.has(client) ? '' : PREPARE} EXECUTE floor_lock(${scope});
    EXECUTE floor_reserve(${scope}, ${check.windowSeconds}, '${id}', ${check.costMicros}, ${check.maxMicros}); COMMIT`;
  try {
    const results = (await client.query(text)) as unknown as { rows: { micros: string; held: number }[] }[];
    prepared.add(client);
    client.release();
    checks++;
    const row = results[results.length - 2].rows[0]; // floor_reserve's, before COMMIT's
    return { id: row.held ? id : undefined, usedMicros: Number(row.micros) };
  } catch (err) {
    // A failed simple query may leave its transaction open, and what it PREPAREd is not known:
    // the connection is closed rather than reused.
    client.release(err as Error);
    throw err;
  }
}

function answer(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

async function handleCheck(pool: Pool, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  let check: FloorCheck | null;
  try {
    check = parseCheck(Buffer.concat(chunks).toString('utf8'));
  } catch {
    check = null;
  }
  if (!check) return answer(res, 400, { error: 'the floor takes a limit with its scope id, a window and a maxCost' });
  try {
    const { id, usedMicros } = await reserve(pool, check);
    const usage = { costMicros: usedMicros };
    if (!id) return answer(res, 200, { decision: 'deny', usage });
    answer(res, 200, { decision: 'allow', usage, reservation: { id, estimatedCost: check.costMicros / 1e6 } });
  } catch (err) {
    // The reason the bench counts as a fail-mode answer, as the service's.
    answer(res, 503, { decision: 'allow', reason: `guard unavailable: ${(err as Error).message}` });
  }
}

async function main() {
  const pool = new Pool({
    connectionString: process.env.DATABASE_URL,
    max: Number(process.env.DATABASE_POOL_SIZE ?? 20),
    // Never closed while idle: the floor sits idle while the bench measures the service's other
    // lines, and a reconnect inside its next line would be counted against the floor. The bench
    // stops it once its lines are measured, which gives the connections back.
    idleTimeoutMillis: 0,
  });
  await pool.query('SELECT 1');
  const server = createServer((req, res) => {
    if (req.method === 'POST' && req.url === '/v1/guard/check')
      return void handleCheck(pool, req, res).catch(() => res.destroy()); // a request aborted mid-body
    if (req.url === '/health/ready') return answer(res, 200, { status: 'ok' });
    // The counters bench:guard reads from the service's /metrics, with the same meaning.
    if (req.url === '/metrics') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      return void res.end(
        `tollgate_guard_usage_reads_total ${checks}\ntollgate_guard_commits_total{path="one_trip"} ${checks}\n`,
      );
    }
    answer(res, 404, { error: 'not found' });
  });
  // Fastify's default, which the service runs with: neither closes the bench's idle keep-alive connections.
  server.keepAliveTimeout = 72_000;
  // Stopped by SIGTERM's default action: PostgreSQL rolls back whatever a killed connection had open.
  server.listen(Number(process.env.PORT), process.env.HOST ?? '127.0.0.1');
}

if (require.main === module)
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
