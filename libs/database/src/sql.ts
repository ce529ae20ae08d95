import { createHash } from 'node:crypto';
import type { Pool, PoolClient } from 'pg';

/**
 * SQL for the hot paths (ingest, guard, auth), straight to the pg pool that Prisma's adapter runs
 * on. Measured on this machine: a Prisma model query costs ~700 µs of CPU, the same statement
 * through `$queryRawUnsafe` ~330 µs, through the driver ~110 µs. At thousands of guard checks a
 * second that is the difference between meeting the latency target and not.
 */
export interface Sql {
  query<T = Record<string, unknown>>(text: string, ...params: unknown[]): Promise<T[]>;
}

const names = new Map<string, string>();

/**
 * Statements are prepared once per connection (named by a hash of their text): the guard's usage
 * read is a UNION of up to seven parts whose planning would otherwise be paid on every check.
 */
function statementName(text: string): string {
  let name = names.get(text);
  if (!name) {
    name = `tg_${createHash('sha1').update(text).digest('hex').slice(0, 20)}`;
    if (names.size > 5000) names.clear();
    names.set(text, name);
  }
  return name;
}

/** A transaction's connection. */
export interface TxSql extends Sql {
  /**
   * Runs `text` (statements without parameters: see {@link sqlLiteral}) and COMMIT in one round
   * trip, and returns the rows of `text`'s last statement. The transaction ends there.
   */
  commitWith<T = Record<string, unknown>>(text: string): Promise<T[]>;
}

export function poolSql(pool: Pool | PoolClient): Sql {
  return {
    async query<T>(text: string, ...params: unknown[]): Promise<T[]> {
      const result = await pool.query({ name: statementName(text), text, values: params });
      return result.rows as T[];
    },
  };
}

/**
 * Runs `fn` in one transaction on one pooled connection. `timeoutMs` bounds every lock wait and
 * every statement inside it, so a transaction never holds a connection forever behind a stuck
 * lock holder or a slow statement (it is then rolled back, and nothing of it remains).
 * `opening` are statements without parameters sent with BEGIN in the same round trip (a simple
 * query may hold several); `fn` gets the rows of the last of them.
 */
export async function inTransaction<T>(
  pool: Pool,
  fn: (sql: TxSql, opened: Record<string, unknown>[]) => Promise<T>,
  timeoutMs?: number,
  opening: readonly string[] = [],
): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  let committed = false;
  const tx: TxSql = {
    ...poolSql(client),
    async commitWith<R>(text: string): Promise<R[]> {
      const results = (await client.query(`${text}; COMMIT`)) as unknown as { rows: R[] }[];
      committed = true;
      return results[results.length - 2].rows;
    },
  };
  try {
    const ms = timeoutMs === undefined ? undefined : Math.max(1, Math.floor(timeoutMs));
    const statements = [
      'BEGIN',
      ...(ms === undefined ? [] : [`SET LOCAL lock_timeout = ${ms}`, `SET LOCAL statement_timeout = ${ms}`]),
      ...opening,
    ];
    const results = (await client.query(statements.join('; '))) as unknown as
      { rows: Record<string, unknown>[] } | { rows: Record<string, unknown>[] }[];
    const last = Array.isArray(results) ? results[results.length - 1] : results;
    const result = await fn(tx, opening.length ? last.rows : []);
    if (!committed) await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch((e: Error) => (broken = e));
    throw err;
  } finally {
    client.release(broken);
  }
}

/**
 * A SQL string literal for statements sent without parameters (see `opening` above). Safe with
 * standard_conforming_strings on (PostgreSQL's default since 9.1, checked by a spec); NUL, which
 * no text value can hold, is refused.
 */
export function sqlLiteral(value: string): string {
  if (value.includes('\u0000')) throw new Error('a SQL literal cannot hold NUL');
  return `'${value.replace(/'/g, "''")}'`;
}

/** `text` with its `$n` placeholders replaced by the literals of `params` (strings, numbers, null). */
export function inlineParams(text: string, params: readonly (string | number | null)[]): string {
  return text.replace(/\$(\d+)/g, (_, n: string) => {
    const v = params[Number(n) - 1];
    if (v === null) return 'NULL';
    if (typeof v === 'number') {
      if (!Number.isFinite(v)) throw new Error('a SQL literal cannot be a non-finite number');
      return String(v);
    }
    return sqlLiteral(v);
  });
}
