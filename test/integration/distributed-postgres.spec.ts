import { PrismaService } from '@tollgate/database';
import { Client } from 'pg';
import { TEST_DATABASE_URL } from '../support/env';
import { call, createProject, stepEvent } from '../support/http';
import type { RunningService } from '../support/service';
import {
  acceptedEventIds,
  eventually,
  startReceiver,
  startServiceWithWorker,
  webhookExporter,
} from '../exporters/support';

/**
 * The distributed-PostgreSQL path (README "Running at scale"): every table that grows with usage
 * can be distributed by project_id (e.g. on Citus) without changing a query. That needs
 * (1) project_id in each such table's primary key and unique indexes (a distributed table's
 * uniqueness must include its distribution column), and (2) every hot statement — ingest, guard,
 * metric queries, exporter reads — to filter each of those tables on project_id, so it routes to
 * one shard. (1) is checked over the catalog, (2) over the text of every statement the service
 * sends while doing that work.
 */

/** Every table of the schema, classified: a new table fails here until it is placed. */
const DISTRIBUTED = [
  'events',
  'event_ids',
  'usage_counters',
  'reservations',
  'reservation_holds',
  'reservation_hold_totals',
  'metric_dimensions',
  'metric_rollups',
  'metric_scope_hours',
  'estimate_ratio_bins',
  'budget_alert_states',
  // A project's budgets, read by every guard check with its usage (co-located with it).
  'policies',
] as const;

/** Views over distributed tables: statements that read them must filter on project_id too. */
const DISTRIBUTED_VIEWS = ['metric_scope_rollups'] as const;

/** Small tables that do not grow with usage, and why they are not distributed by project_id. */
const NOT_DISTRIBUTED: Record<string, string> = {
  projects: 'the reference table (one row per project, joined from every shard)',
  api_keys: 'looked up by key id before the project is known (a reference table: one row per key)',
  price_overrides: "a project's prices, a few rows changed by hand (a reference table)",
  exporters: 'a few rows per project, changed once per delivered batch (a reference table)',
  export_batches:
    'at most one in-flight batch per exporter plus dead letters, keyed by exporter id (a local table on the coordinator, next to the queues)',
  projection_checkpoints: "one row per projection (the projector reads each shard's log: see README)",
  _prisma_migrations: "the migration runner's bookkeeping",
};

interface Statement {
  phase: string;
  text: string;
}

/** The statements of a phase that touch a distributed table, with the references that are not filtered on project_id. */
export function unfilteredReferences(text: string): string[] {
  const sql = text
    .replace(/--[^\n]*/g, ' ')
    .replace(/\s+/g, ' ')
    .toLowerCase();
  const bad: string[] = [];
  for (const table of [...DISTRIBUTED, ...DISTRIBUTED_VIEWS]) {
    // A monthly partition of the log, read by its name, is the log.
    const name = table === 'events' ? 'events(?:_\\d{4}_\\d{2})?' : table;
    const ref = new RegExp(
      `\\b(from|join|into|update|using)\\s+(only\\s+)?${name}\\b(\\s+(as\\s+)?(?!where|on|set|join|left|inner|cross|group|order|limit|values|select|returning|union|for|default)([a-z_][a-z0-9_]*))?`,
      'g',
    );
    for (const m of sql.matchAll(ref)) {
      const alias = m[5] ?? table;
      if (m[1] === 'into') {
        // An insert names project_id among its columns (NOT NULL everywhere).
        const cols = sql.slice((m.index ?? 0) + m[0].length).match(/^\s*\(([^)]*)\)/);
        if (!cols || !/\bproject_id\b/.test(cols[1])) bad.push(`${m[0]} (no project_id column)`);
        continue;
      }
      const qualified = new RegExp(`\\b${alias}\\.project_id\\b`).test(sql);
      // Unqualified project_id counts inside the reference's own (sub)query when no other table there could own it.
      const segment = enclosing(sql, m.index ?? 0);
      const bare = /(^|[^.a-z_])project_id\s*(=|in\b)/.test(segment) && countTables(segment) === 1;
      if (!qualified && !bare) bad.push(m[0]);
    }
  }
  return bad;
}

/** The statements of a simple query: split at each `;` outside quotes and parentheses. */
export function statementsOf(text: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let quoted = false;
  let from = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === "'") quoted = !quoted;
    else if (quoted) continue;
    else if (c === '(') depth++;
    else if (c === ')') depth--;
    else if (c === ';' && depth === 0) {
      out.push(text.slice(from, i).trim());
      from = i + 1;
    }
  }
  out.push(text.slice(from).trim());
  return out.filter((st) => st.length > 0);
}

/** The parenthesized level (and UNION branch) of `sql` that holds position `at` (the whole statement at the top). */
function enclosing(sql: string, at: number): string {
  let from = 0;
  for (let i = at, depth = 0; i >= 0; i--) {
    if (sql[i] === ')') depth++;
    else if (depth === 0 && sql.startsWith(' union ', i)) {
      from = i + 7;
      break;
    } else if (sql[i] === '(' && depth-- === 0) {
      from = i + 1;
      break;
    }
  }
  let to = sql.length;
  for (let i = at, depth = 0; i < sql.length; i++) {
    if (sql[i] === '(') depth++;
    else if ((depth === 0 && sql.startsWith(' union ', i)) || (sql[i] === ')' && depth-- === 0)) {
      to = i;
      break;
    }
  }
  // Nested subqueries belong to their own level: drop them (innermost first), keep other brackets' contents.
  let segment = sql.slice(from, to);
  for (let prev = ''; prev !== segment;) {
    prev = segment;
    segment = segment.replace(/\(([^()]*)\)/g, (group, inner: string) =>
      /\bselect\b/.test(inner) ? ' ' : `[${inner}]`,
    );
  }
  return segment;
}

function countTables(sql: string): number {
  return new Set(
    [...sql.matchAll(/\b(?:from|join|into|update)\s+(?:only\s+)?([a-z_][a-z0-9_]*)\b/g)]
      .map((m) => m[1])
      .filter((t) => t !== 'jsonb_to_recordset' && t !== 'unnest' && t !== 'lateral'),
  ).size;
}

/**
 * Statements that read across projects on purpose, with the reason. Anything else that touches a
 * distributed table without project_id fails the test.
 */
const CROSS_PROJECT: { match: RegExp; why: string }[] = [
  {
    match:
      /from events where \(tx, position\) > \(\$1::xid8, \$2::bigint\) and tx < pg_snapshot_xmin\(pg_current_snapshot\(\)\) order by/,
    why: "the projector reads the whole log in commit order (on a distributed cluster: each shard's log)",
  },
];

describe('the distributed-PostgreSQL path', () => {
  const prisma = new PrismaService(TEST_DATABASE_URL, 2);
  afterAll(() => prisma.onModuleDestroy());

  describe('the catalog', () => {
    it('classifies every table of the schema', async () => {
      const rows = await prisma.$queryRawUnsafe<{ name: string }[]>(
        `SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND NOT c.relispartition ORDER BY 1`,
      );
      const known = new Set<string>([...DISTRIBUTED, ...Object.keys(NOT_DISTRIBUTED)]);
      expect(rows.map((r) => r.name).filter((n) => !known.has(n))).toEqual([]);
    });

    it('has project_id, NOT NULL, in the primary key and every unique index of each distributed table', async () => {
      const rows = await prisma.$queryRawUnsafe<
        { tbl: string; idx: string; cols: string[] | null; notnull: boolean | null }[]
      >(
        `SELECT t.relname AS tbl, coalesce(i.relname, '(no primary key)') AS idx,
                (SELECT array_agg(a.attname::text ORDER BY a.attnum) FROM pg_attribute a WHERE a.attrelid = t.oid AND a.attnum = ANY(x.indkey)) AS cols,
                (SELECT a.attnotnull FROM pg_attribute a WHERE a.attrelid = t.oid AND a.attname = 'project_id') AS notnull
           FROM pg_class t
           JOIN pg_namespace n ON n.oid = t.relnamespace AND n.nspname = current_schema()
           LEFT JOIN pg_index x ON x.indrelid = t.oid AND (x.indisunique OR x.indisprimary)
           LEFT JOIN pg_class i ON i.oid = x.indexrelid
          WHERE t.relname = ANY($1::text[]) AND NOT t.relispartition`,
        [...DISTRIBUTED],
      );
      expect(new Set(rows.map((r) => r.tbl))).toEqual(new Set(DISTRIBUTED));
      const failing = rows
        .filter((r) => !r.notnull || !(r.cols ?? []).includes('project_id'))
        .map((r) => `${r.tbl}: ${r.idx} (${(r.cols ?? []).join(', ')})`);
      expect(failing).toEqual([]);
      const withoutPk = await prisma.$queryRawUnsafe<{ tbl: string }[]>(
        `SELECT t.relname AS tbl FROM pg_class t WHERE t.relname = ANY($1::text[]) AND t.relnamespace = current_schema()::regnamespace
            AND NOT EXISTS (SELECT 1 FROM pg_index x WHERE x.indrelid = t.oid AND x.indisprimary)`,
        [...DISTRIBUTED],
      );
      expect(withoutPk).toEqual([]);
    });
  });

  it('the statement check finds a table read across projects', () => {
    // The metric queries' log tail as it was before this check: every project's unprojected events.
    expect(
      unfilteredReferences(`WITH cp AS (SELECT tx, position FROM projection_checkpoints WHERE name = 'metric_rollups'),
      tail AS MATERIALIZED (SELECT * FROM events WHERE (tx, position) > ((SELECT tx FROM cp), (SELECT position FROM cp)) ORDER BY tx, position LIMIT 10001)
      SELECT count(*) FROM tail WHERE project_id = $1`),
    ).toEqual(['from events']);
    expect(
      unfilteredReferences(
        `SELECT count(*)::int AS n FROM events, projection_checkpoints cp WHERE cp.name = 'x' AND (events.tx, events.position) > (cp.tx, cp.position)`,
      ),
    ).toEqual(['from events']);
    expect(
      unfilteredReferences(
        `SELECT d.id FROM metric_rollups r JOIN metric_dimensions d ON d.id = r.dims_id WHERE r.project_id = $1`,
      ),
    ).toEqual(['join metric_dimensions d']);
    expect(unfilteredReferences(`INSERT INTO event_ids (event_id, occurred_at) VALUES ($1, $2)`)).toEqual([
      'into event_ids (no project_id column)',
    ]);
    expect(
      unfilteredReferences(
        `SELECT v FROM metric_dimensions WHERE project_id = $1 UNION SELECT v FROM tail WHERE project_id = $1`,
      ),
    ).toEqual([]);
    expect(unfilteredReferences(`UPDATE reservations SET status = $1 WHERE project_id = $2 AND id = $3`)).toEqual([]);
    // A month of the log read by its partition's name is the log.
    expect(unfilteredReferences(`SELECT count(*) FROM events_2026_03 e WHERE e.resource_id = $1`)).toEqual([
      'from events_2026_03 e',
    ]);
    expect(unfilteredReferences(`SELECT count(*) FROM events_2026_03 e WHERE e.project_id = $1`)).toEqual([]);
    // A simple query's statements are checked one by one.
    expect(
      statementsOf(
        `BEGIN; SELECT 'a;b' FROM reservations WHERE project_id = 'p'; PREPARE x AS SELECT (1; 2) FROM events`,
      ),
    ).toEqual([
      'BEGIN',
      "SELECT 'a;b' FROM reservations WHERE project_id = 'p'",
      'PREPARE x AS SELECT (1; 2) FROM events',
    ]);
  });

  describe('the hot statements', () => {
    let svc: RunningService;
    const seen: Statement[] = [];
    let phase = 'setup';
    const original = Client.prototype.query;

    beforeAll(async () => {
      // Every statement any pool of this process sends (Prisma's adapter and the hot-path SQL both go through pg's Client).
      (Client.prototype as any).query = function (this: Client, config: any, ...rest: any[]) {
        const text = typeof config === 'string' ? config : config?.text;
        // A simple query may hold several statements (a transaction's opening): each is checked alone.
        if (typeof text === 'string' && phase !== 'setup')
          for (const statement of statementsOf(text)) seen.push({ phase, text: statement });
        return (original as any).call(this, config, ...rest);
      };
      svc = await startServiceWithWorker({ EXPORTS_TICK_MS: '100' });
    });
    afterAll(async () => {
      await svc?.close();
      Client.prototype.query = original;
    });

    it('filters every distributed table on project_id in ingest, guard, metric queries and exporter reads', async () => {
      const receiver = await startReceiver();
      try {
        const p = await createProject(svc.url);
        const put = await call(svc.url, 'PUT', '/v1/exporters/hook', {
          token: p.key,
          body: webhookExporter(receiver.url),
        });
        expect(put.status).toBe(200);
        await call(svc.url, 'PUT', '/v1/policies/daily', {
          token: p.key,
          body: { scope: 'resource', window: '24h', maxCost: 100 },
        });
        const context = {
          traceId: 'run-dist',
          resourceId: 'customer-1',
          threadId: 'thread-1',
          userId: 'user-1',
          organizationId: 'org-1',
          sessionId: 'session-1',
        };

        phase = 'ingest';
        const events = [
          stepEvent({ ...context }),
          stepEvent({ ...context, usage: { inputTokens: 10, outputTokens: 5 } }),
        ];
        expect((await call(svc.url, 'POST', '/v1/events', { token: p.key, body: { events } })).body.accepted).toBe(2);

        phase = 'guard';
        const limits = [
          { scope: 'resource', window: '24h', maxCost: 5 },
          { scope: 'thread', window: '7d', maxTotalTokens: 1_000_000 },
          { scope: 'run', maxCost: 5 },
        ];
        const estimate = { provider: 'openai', model: 'gpt-4o', inputTokens: 2000, maxOutputTokens: 500 };
        const plain = await call(svc.url, 'POST', '/v1/guard/check', {
          token: p.key,
          body: { context, limits, estimate },
        });
        expect([plain.status, plain.body.decision]).toEqual([200, 'allow']);
        const reserved = await call(svc.url, 'POST', '/v1/guard/check', {
          token: p.key,
          body: { context, limits, estimate, reserve: true, stepId: 'step-dist-1' },
        });
        expect(reserved.body.reservation?.id).toBeDefined();
        const settle = stepEvent({ ...context, reservationId: reserved.body.reservation.id });
        phase = 'ingest';
        expect(
          (await call(svc.url, 'POST', '/v1/events', { token: p.key, body: { events: [settle] } })).body.accepted,
        ).toBe(1);
        phase = 'guard';
        const second = await call(svc.url, 'POST', '/v1/guard/check', {
          token: p.key,
          body: { context, limits, estimate, reserve: true, stepId: 'step-dist-2' },
        });
        expect(
          (
            await call(svc.url, 'POST', `/v1/guard/reservations/${second.body.reservation.id}/release`, {
              token: p.key,
              body: {},
            })
          ).status,
        ).toBeLessThan(300);

        phase = 'metrics';
        const TOTALS = ['mastra_model_total_input_tokens', 'mastra_model_total_output_tokens'];
        const m = (path: string, body?: unknown) =>
          call(svc.url, body ? 'POST' : 'GET', `/api/observability/${path}`, { token: p.key, body });
        for (const filters of [{}, { resourceId: 'customer-1' }, { threadId: 'thread-1' }]) {
          expect((await m('metrics/aggregate', { name: TOTALS, aggregation: 'sum', filters })).status).toBe(200);
          expect(
            (await m('metrics/breakdown', { name: TOTALS, groupBy: ['model'], aggregation: 'sum', filters })).status,
          ).toBe(200);
          expect(
            (await m('metrics/timeseries', { name: TOTALS, interval: '1h', aggregation: 'sum', filters })).status,
          ).toBe(200);
          expect(
            (
              await m('metrics/percentiles', {
                name: 'mastra_model_total_input_tokens',
                percentiles: [0.5],
                interval: '1h',
                filters,
              })
            ).status,
          ).toBe(200);
        }
        for (const path of [
          'metric-names',
          'metric-label-keys?metricName=mastra_model_total_input_tokens',
          'entity-types',
          'entity-names',
          'service-names',
          'environments',
          'tags',
        ]) {
          expect((await m(`discovery/${path}`)).status).toBe(200);
        }

        phase = 'exporters';
        expect(
          (await call(svc.url, 'POST', '/v1/events', { token: p.key, body: { events: [stepEvent(context)] } })).body
            .accepted,
        ).toBe(1);
        await eventually(
          () => acceptedEventIds(receiver).length >= 4 && acceptedEventIds(receiver),
          'the exporter delivering the steps',
        );
      } finally {
        phase = 'setup';
        await receiver.close();
      }

      const phases = new Set(seen.map((s) => s.phase));
      expect([...phases].sort()).toEqual(['exporters', 'guard', 'ingest', 'metrics']);
      // The exporter's read of its project's log was among them.
      expect(seen.some((s) => /from events\s+where \(tx, position\) > .* and project_id = \$4/is.test(s.text))).toBe(
        true,
      );
      const failing = seen
        .filter((s) => !CROSS_PROJECT.some((c) => c.match.test(s.text.replace(/\s+/g, ' ').toLowerCase())))
        .map((s) => ({
          phase: s.phase,
          refs: unfilteredReferences(s.text),
          text: s.text.replace(/\s+/g, ' ').slice(0, 300),
        }))
        .filter((s) => s.refs.length > 0);
      const unique = [...new Map(failing.map((f) => [f.text, f])).values()];
      expect(unique).toEqual([]);
    }, 60_000);
  });
});
