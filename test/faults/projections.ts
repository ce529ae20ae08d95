import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { acceptedEventIds, startReceiver, webhookExporter, type Receiver } from '../exporters/support';
import { pg, ROOT, sleep } from './harness';

/**
 * What the checks after a scenario need beyond the log: the rollups of a project compared with a
 * rebuild, and a webhook receiver that must end up with every event.
 */

const ROLLUP_ROWS = `
  SELECT 'p' AS cube, r.granularity, r.name, r.bucket_start, d.key, r.cost_unit, r.count::text, r.sum::text, r.min, r.max, r.cost_micros::text, r.cost_count::text
    FROM metric_rollups r JOIN metric_dimensions d ON d.id = r.dims_id WHERE r.project_id = $1
  UNION ALL
  SELECT 's', NULL, r.name, r.bucket_start, d.key, NULL, r.count::text, r.sum::text, r.min, r.max, r.cost_micros::text, r.cost_count::text
    FROM metric_scope_rollups r JOIN metric_dimensions d ON d.id = r.dims_id WHERE r.project_id = $1
  ORDER BY 1, 2, 3, 4, 5, 6`;

/** Every rollup row of one project, by dimension key (not id), as comparable strings. */
export async function rollupRows(projectId: string): Promise<string[]> {
  return pg(async (c) => (await c.query(ROLLUP_ROWS, [projectId])).rows.map((r) => JSON.stringify(r)));
}

/** Events of the project past the projection's checkpoint. */
export async function unprojected(projectId: string): Promise<number> {
  return pg(async (c) => {
    const res = await c.query(
      `SELECT count(*)::int AS n FROM events e, projection_checkpoints cp
        WHERE cp.name = 'metric_rollups' AND e.project_id = $1 AND (e.tx, e.position) > (cp.tx, cp.position)`,
      [projectId],
    );
    return res.rows[0].n as number;
  });
}

/** Polls until `ok()` holds; false when it did not within `timeoutMs`. */
export async function waitUntil(ok: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await ok()) return true;
    if (Date.now() > deadline) return false;
    await sleep(250);
  }
}

/** `tollgate replay metric_rollups` (the built CLI), as an operator would run it. */
export async function replayRollups(env: Record<string, string>): Promise<void> {
  await promisify(execFile)(process.execPath, [join(ROOT, 'dist/apps/cli/src/main.js'), 'replay', 'metric_rollups'], {
    cwd: ROOT,
    env: { ...process.env, ...env, LOG_LEVEL: 'error' },
    timeout: 120_000,
  });
}

/**
 * Projections equal a rebuild from the log: once the worker has projected every event of the
 * project, its rollup rows are compared with those of a replay from position 0.
 */
export async function compareWithRebuild(projectId: string, env: Record<string, string>): Promise<string[]> {
  if (!(await waitUntil(async () => (await unprojected(projectId)) === 0, 60_000)))
    return [`${await unprojected(projectId)} events still unprojected 60 s after the load`];
  const live = await rollupRows(projectId);
  await replayRollups(env);
  // The replay stops at the commit-safe horizon; a long transaction elsewhere may hold it back.
  if (!(await waitUntil(async () => (await unprojected(projectId)) === 0, 60_000)))
    return [`${await unprojected(projectId)} events unprojected 60 s after the replay`];
  const rebuilt = await rollupRows(projectId);
  if (live.length === 0) return ['the project has no rollup rows'];
  const liveSet = new Set(live);
  const rebuiltSet = new Set(rebuilt);
  const onlyLive = live.filter((r) => !rebuiltSet.has(r));
  const onlyRebuilt = rebuilt.filter((r) => !liveSet.has(r));
  if (onlyLive.length || onlyRebuilt.length)
    return [
      `${onlyLive.length} live rollup rows differ from the rebuild (${onlyRebuilt.length} rebuilt rows unmatched), e.g. live ${onlyLive[0]} / rebuilt ${onlyRebuilt[0]}`,
    ];
  return [];
}

/** The metric aggregate of the project's totals (API, after catch-up) = the sum of the log. */
export async function metricTotal(
  apiUrl: string,
  key: string,
  filters: Record<string, unknown> = {},
): Promise<{ value: number | null; lag: number }> {
  const res = await fetch(`${apiUrl}/api/observability/metrics/aggregate`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      name: ['mastra_model_total_input_tokens', 'mastra_model_total_output_tokens'],
      aggregation: 'sum',
      filters,
    }),
  });
  const body = (await res.json()) as { value: number | null; lag: { events: number } };
  return { value: body.value, lag: body.lag?.events };
}

/** A webhook receiver on 127.0.0.1 and an exporter of the project pointing at it, from the log's beginning. */
export async function exportTo(apiUrl: string, adminKey: string, name = 'faults-receiver'): Promise<Receiver> {
  const receiver = await startReceiver();
  const res = await fetch(`${apiUrl}/v1/exporters/${name}`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(
      webhookExporter(receiver.url, {
        batch: { maxEvents: 500, maxWaitMs: 100 },
        retry: { maxAttempts: 50, initialBackoffMs: 100, maxBackoffMs: 1000 },
        pauseAfterFailures: 1000,
        startFrom: 'beginning',
      }),
    ),
  });
  if (res.status !== 200) throw new Error(`PUT exporter: ${res.status} ${await res.text()}`);
  return receiver;
}

/**
 * Every stored event reached the receiver (at least once): the ids it accepted ⊇ the stored ids.
 * Returns the problems and, for the table, how many deliveries were repeats.
 */
export async function receiverHasAll(
  receiver: Receiver,
  stored: Set<string>,
  timeoutMs = 60_000,
): Promise<{ problems: string[]; duplicates: number; received: number }> {
  const missing = () => {
    const got = new Set(acceptedEventIds(receiver));
    return [...stored].filter((id) => !got.has(id));
  };
  await waitUntil(async () => missing().length === 0, timeoutMs);
  const ids = acceptedEventIds(receiver);
  const unique = new Set(ids);
  const problems: string[] = [];
  const lost = missing();
  if (lost.length)
    problems.push(
      `${lost.length} of ${stored.size} stored events never reached the receiver (e.g. ${lost.slice(0, 3).join(', ')})`,
    );
  const strangers = [...unique].filter((id) => !stored.has(id));
  if (strangers.length) problems.push(`the receiver got ${strangers.length} events that are not in the log`);
  return { problems, duplicates: ids.length - unique.size, received: ids.length };
}
