import { createHash } from 'node:crypto';
import { Pool, type PoolClient } from 'pg';
import { retryOnContention } from './contention';
import { memoized } from '@tollgate/contracts';

/**
 * SQL for the hot paths (ingest, guard, auth), straight to the pg pool that Prisma's adapter runs
 * on. Measured on this machine: a Prisma model query costs ~700 µs of CPU, the same statement
 * through `$queryRawUnsafe` ~330 µs, through the driver ~110 µs. At thousands of guard checks a
 * second that is the difference between meeting the latency target and not.
 */
export interface Sql {
  query<T = Record<string, unknown>>(text: string, ...params: unknown[]): Promise<T[]>;
}

/**
 * Statements are prepared once per connection (named by a hash of their text): the guard's usage
 * read is a UNION of up to seven parts whose planning would otherwise be paid on every check.
 */
const statementName = memoized(
  5000,
  (text: string) => `tg_${createHash('sha1').update(text).digest('hex').slice(0, 20)}`,
);

/**
 * A statement with its values, to run inside a simple query (sharing a round trip with others):
 * it is PREPAREd on the connection the first time and EXECUTEd with its values as literals, so it
 * runs on the plan cached for the connection rather than being parsed and planned each time.
 */
export interface Executable {
  text: string;
  params: readonly SqlValue[];
}

/** One statement of a simple query: a text without parameters (see {@link sqlLiteral}), or an {@link Executable}. */
export type Statement = string | Executable;

/** A transaction's connection. */
export interface TxSql extends Sql {
  /**
   * Runs `statement` and COMMIT in one round trip, and returns the rows of `statement` (of its
   * last statement, when it is a text of several). The transaction ends there. `before` are sent
   * ahead of it in the same trip (a setting its plan needs, such as {@link INDEX_PLANS}).
   */
  commitWith<T = Record<string, unknown>>(statement: Statement, before?: readonly Statement[]): Promise<T[]>;
  /** Ends the transaction now (its callback may go on with work that needs no transaction). */
  commit(): Promise<void>;
  /** `statements` in one round trip inside the transaction (a simple query); the rows of each. */
  statements(statements: readonly Statement[]): Promise<Record<string, unknown>[][]>;
}

/**
 * Statements on `db`. On a pool each is its own transaction, run again when PostgreSQL rolled it
 * back for contention (see retryOnContention); on a transaction's client it is not, since the
 * failure aborted the transaction: the transaction as a whole is run again.
 */
export function poolSql(db: Pool | PoolClient): Sql {
  const once = async <T>(text: string, params: unknown[]): Promise<T[]> =>
    (await db.query({ name: statementName(text), text, values: params })).rows as T[];
  return {
    query: <T>(text: string, ...params: unknown[]): Promise<T[]> =>
      db instanceof Pool ? retryOnContention(() => once<T>(text, params)) : once<T>(text, params),
  };
}

/** The name a statement is PREPAREd under on a connection (apart from the protocol-level names above). */
function preparedName(text: string): string {
  return `tx_${statementName(text).slice(3)}`;
}

/** The statements each connection has PREPAREd (a pooled client is one connection, for its whole life). */
const preparedOn = new WeakMap<object, Set<string>>();

/** A value of an {@link Executable}. */
export type SqlValue = string | number | bigint | boolean | null | Date | readonly (string | number | null)[];

function sqlValue(v: SqlValue): string {
  if (v === null) return 'NULL';
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) throw new Error('a SQL literal cannot be a non-finite number');
    return String(v);
  }
  if (typeof v === 'bigint' || typeof v === 'boolean') return String(v);
  if (v instanceof Date) return sqlLiteral(v.toISOString());
  if (Array.isArray(v)) return sqlLiteral(arrayLiteral(v));
  return sqlLiteral(v as string);
}

/** An element PostgreSQL reads as it is, unquoted: nothing to trim, escape or take for NULL. */
const PLAIN_ELEMENT = /^[\w.:+-]+$/;

/**
 * An array element's text (its type comes from the statement's parameter). A guard check writes
 * about 80 (ids, timestamps, numbers), and almost all are plain: those are used as they are, the
 * others quoted, with a replace run only over those holding a quote or a backslash.
 */
function arrayElement(v: string | number | null): string {
  if (v === null) return 'NULL';
  if (typeof v === 'number') return String(v);
  if (PLAIN_ELEMENT.test(v) && !(v.length === 4 && v.toUpperCase() === 'NULL')) return v;
  return v.includes('"') || v.includes('\\') ? `"${v.replace(/[\\"]/g, '\\$&')}"` : `"${v}"`;
}

/** An array's text form. */
function arrayLiteral(values: readonly (string | number | null)[]): string {
  return `{${values.map(arrayElement).join(',')}}`;
}

/**
 * An Executable as a text with its values in place, planned with them on every run instead of
 * prepared: for a cheap statement whose best plan depends on how large its tables are now. A
 * prepared statement keeps the generic plan of its first run for the life of the connection, and
 * one made on an empty table may be any index at all (they all cost the same there).
 */
export function inlined(statement: Executable): string {
  return statement.text.replace(/\$(\d+)/g, (_, n: string) => {
    const i = Number(n) - 1;
    if (i >= statement.params.length) throw new Error(`no value for $${n}`);
    return sqlValue(statement.params[i]);
  });
}

/**
 * Statements as one simple query on `client`: an Executable not yet prepared on it is PREPAREd in
 * the same query. `results` maps each statement to its result's position; `preparing` are the
 * names the query prepares (known once it succeeds; unknown which, if it fails).
 */
function simpleQuery(client: object, statements: readonly Statement[]) {
  const known = preparedOn.get(client) ?? new Set<string>();
  preparedOn.set(client, known);
  const parts: string[] = [];
  const results: number[] = [];
  const preparing: string[] = [];
  for (const st of statements) {
    if (typeof st === 'string') {
      parts.push(st);
    } else {
      const name = preparedName(st.text);
      if (!known.has(name) && !preparing.includes(name)) {
        parts.push(`PREPARE ${name} AS ${st.text}`);
        preparing.push(name);
      }
      parts.push(`EXECUTE ${name}(${st.params.map(sqlValue).join(', ')})`);
    }
    results.push(parts.length - 1);
  }
  return { text: parts.join('\n; '), results, preparing, known };
}

/**
 * A function that runs statements on `client` in one round trip and gives the rows of each; a
 * failure of a query that PREPAREd something marks the connection broken (a PREPARE outlives the
 * failed query it was in, or not: which, is not known, so the connection is not reused).
 */
function roundTrips(client: PoolClient) {
  const state: { broken?: Error } = {};
  const run = async (statements: readonly Statement[]): Promise<Record<string, unknown>[][]> => {
    const q = simpleQuery(client, statements);
    let raw: unknown;
    try {
      raw = await client.query(q.text);
    } catch (err) {
      if (q.preparing.length) state.broken = err as Error;
      throw err;
    }
    q.preparing.forEach((name) => q.known.add(name));
    const all = (Array.isArray(raw) ? raw : [raw]) as { rows: Record<string, unknown>[] }[];
    return q.results.map((i) => all[i].rows);
  };
  return { run, state };
}

const timeouts = (timeoutMs?: number): string[] => {
  if (timeoutMs === undefined) return [];
  const ms = Math.max(1, Math.floor(timeoutMs));
  return [`SET LOCAL lock_timeout = ${ms}`, `SET LOCAL statement_timeout = ${ms}`];
};

/** What {@link withIndexPlans} opens with: for statements that end the transaction (see commitWith). */
export const INDEX_PLANS = 'SET LOCAL enable_seqscan = off';

/**
 * `statements` of a transaction planned without sequential scans, the setting restored after
 * them: for statements prepared once per connection (their plan kept for its life) on tables that
 * may be nearly empty when the plan is made — a new deployment, a new month's partition, a quiet
 * hour's open reservations — and must not be scanned whole once they have grown.
 */
export function withIndexPlans(statements: readonly Statement[]): Statement[] {
  return [INDEX_PLANS, ...statements, 'SET LOCAL enable_seqscan = on'];
}

/**
 * Runs `fn` in one transaction on one pooled connection. `timeoutMs` bounds every lock wait and
 * every statement inside it, so a transaction never holds a connection forever behind a stuck
 * lock holder or a slow statement (it is then rolled back, and nothing of it remains).
 * `opening` are statements sent with BEGIN in the same round trip (a simple query may hold
 * several); `fn` gets the rows of each of them, in order. A transaction PostgreSQL rolls back for
 * contention is run again from BEGIN (see retryOnContention): what `fn` does outside the database
 * before its commit must be safe to do again.
 */
export function inTransaction<T>(
  pool: Pool,
  fn: (sql: TxSql, opened: Record<string, unknown>[][]) => Promise<T>,
  timeoutMs?: number,
  opening: readonly Statement[] = [],
): Promise<T> {
  return retryOnContention(() => transactionOnce(pool, fn, timeoutMs, opening));
}

async function transactionOnce<T>(
  pool: Pool,
  fn: (sql: TxSql, opened: Record<string, unknown>[][]) => Promise<T>,
  timeoutMs: number | undefined,
  opening: readonly Statement[],
): Promise<T> {
  const client = await pool.connect();
  const { run, state } = roundTrips(client);
  let committed = false;
  const tx: TxSql = {
    ...poolSql(client),
    statements: run,
    async commitWith<R>(statement: Statement, before: readonly Statement[] = []): Promise<R[]> {
      const rows = (await run([...before, statement, 'COMMIT']))[before.length];
      committed = true;
      return rows as R[];
    },
    async commit(): Promise<void> {
      await run(['COMMIT']);
      committed = true;
    },
  };
  try {
    const opened = await run(['BEGIN', ...timeouts(timeoutMs), ...opening]);
    const result = await fn(tx, opened.slice(opened.length - opening.length));
    if (!committed) await client.query('COMMIT');
    return result;
  } catch (err) {
    if (!state.broken) await client.query('ROLLBACK').catch((e: Error) => (state.broken = e));
    throw err;
  } finally {
    client.release(state.broken);
  }
}

/**
 * Runs `statements` as one transaction in ONE round trip (BEGIN; …; COMMIT) and gives the rows of
 * each: for statements that need transaction-local settings (`SET LOCAL`) but nothing in between.
 */
export function inOneTrip(
  pool: Pool,
  statements: readonly Statement[],
  timeoutMs?: number,
): Promise<Record<string, unknown>[][]> {
  return retryOnContention(() => oneTripOnce(pool, statements, timeoutMs));
}

async function oneTripOnce(
  pool: Pool,
  statements: readonly Statement[],
  timeoutMs: number | undefined,
): Promise<Record<string, unknown>[][]> {
  const client = await pool.connect();
  const { run, state } = roundTrips(client);
  try {
    const rows = await run(['BEGIN', ...timeouts(timeoutMs), ...statements, 'COMMIT']);
    return rows.slice(rows.length - 1 - statements.length, rows.length - 1);
  } catch (err) {
    // The query stopped at the failure, inside the transaction it opened.
    if (!state.broken) await client.query('ROLLBACK').catch((e: Error) => (state.broken = e));
    throw err;
  } finally {
    client.release(state.broken);
  }
}

/** The texts of recent timestamps: a guard check writes a dozen, mostly the same hour edges and `now`. */
const isoText = memoized(4096, (ms: number) => new Date(ms).toISOString());

/** A timestamptz value's text for a parameter, ±Infinity as PostgreSQL's ±infinity (an open window edge). */
export const timestampText = (ms: number): string =>
  ms === Infinity ? 'infinity' : ms === -Infinity ? '-infinity' : isoText(ms);

/**
 * A SQL string literal for statements sent without parameters (see `opening` above). Safe with
 * standard_conforming_strings on (PostgreSQL's default since 9.1, checked by a spec); NUL, which
 * no text value can hold, is refused.
 */
export function sqlLiteral(value: string): string {
  if (value.includes('\u0000')) throw new Error('a SQL literal cannot hold NUL');
  return value.includes("'") ? `'${value.replace(/'/g, "''")}'` : `'${value}'`;
}
