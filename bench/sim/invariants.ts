import { execFile } from 'node:child_process';
import { join } from 'node:path';
import type { Client } from 'pg';
import type { IngestTally, Journal } from './journal';
import type { World } from './world';

/** A broken invariant: what, the evidence, and the ids to look the last steps up by. */
export interface Violation {
  invariant: string;
  details: string[];
  keys: string[];
}

export interface Inputs {
  sql: Client;
  projectId: string;
  journal: Journal;
  world: World;
  /** Environment for the CLI (DATABASE_URL, REDIS_URL). */
  env: Record<string, string>;
}

/** Every answer was a 2xx, 3xx or 4xx, or a 503 with Retry-After: load is answered as load. */
export function noServerErrors({ journal }: Inputs): Violation[] {
  return journal.badAnswers.slice(0, 1).map((b) => ({
    invariant: 'no 5xx answer other than 503 with Retry-After',
    details: [
      `${journal.badAnswers.length} such answers; the first at +${(b.t / 1000).toFixed(3)}s to ${b.who}: ${b.route} → ${b.status}` +
        ` (Retry-After: ${b.retryAfter ?? 'none'})`,
      `body: ${b.body}`,
    ],
    keys: [],
  }));
}

/** What is wrong with one event id, given its answers and how many times it is stored. */
function eventProblem(t: IngestTally, stored: number): string | undefined {
  if (t.accepted > 1) return `answered accepted ${t.accepted} times`;
  if ((t.accepted === 1 || t.duplicate > 0) && stored !== 1)
    return `answered accepted ${t.accepted}× and duplicate ${t.duplicate}×, stored ${stored} times`;
  if (stored > 1) return `stored ${stored} times`;
  // Only rejections, and no attempt whose answer was lost: nothing of it may be stored.
  if (t.accepted === 0 && t.duplicate === 0 && t.lost === 0 && t.rejected > 0 && stored > 0)
    return `rejected (${t.reasons.join('; ')}) yet stored`;
  return undefined;
}

/** An event answered `accepted` is stored exactly once; one answered only `duplicate` was stored before. */
export async function acceptedOnce({ sql, projectId, journal }: Inputs): Promise<Violation[]> {
  const { rows } = await sql.query<{ event_id: string; n: number }>(
    `SELECT event_id, count(*)::int AS n FROM events WHERE project_id = $1 AND type = 'StepUsageRecorded' GROUP BY event_id`,
    [projectId],
  );
  const stored = new Map(rows.map((r) => [r.event_id, r.n]));
  const broken = [...journal.ingest].flatMap(([id, t]) => {
    const why = eventProblem(t, stored.get(id) ?? 0);
    return why ? [{ id, why }] : [];
  });
  if (!broken.length) return [];
  return [
    {
      invariant: 'every accepted event is stored exactly once',
      details: [`${broken.length} events break it, e.g.:`, ...broken.slice(0, 5).map((b) => `${b.id}: ${b.why}`)],
      keys: broken.slice(0, 5).map((b) => b.id),
    },
  ];
}

/**
 * Every reservation in the database was received by a caller, or its check's answer was lost to
 * a fault (no answer, or the service's failMode answer); every one is closed; every reservation a
 * caller received exists.
 */
export async function reservationsAccounted({ sql, projectId, journal }: Inputs): Promise<Violation[]> {
  const { rows } = await sql.query<{ id: string; step_id: string; status: string; expires_at: Date; created_at: Date }>(
    'SELECT id, step_id, status, expires_at, created_at FROM reservations WHERE project_id = $1 ORDER BY created_at',
    [projectId],
  );
  const out: Violation[] = [];
  const unknown = rows.filter(
    (r) => !journal.received.has(r.id) && !journal.lostChecks.has(r.step_id) && !journal.failModeChecks.has(r.step_id),
  );
  if (unknown.length)
    out.push({
      invariant: 'every reservation was received by a caller (or its answer was lost to a fault)',
      details: [
        `${unknown.length} reservations no caller received, e.g.:`,
        ...unknown.slice(0, 5).map((r) => `${r.id} step ${r.step_id} ${r.status}, made ${r.created_at.toISOString()}`),
      ],
      keys: unknown.slice(0, 5).flatMap((r) => [r.id, r.step_id]),
    });
  const open = rows.filter((r) => r.status === 'open');
  if (open.length)
    out.push({
      invariant: 'every reservation ends settled, released or lapsed',
      details: [
        `${open.length} still open after their TTL and a sweep, e.g.:`,
        ...open.slice(0, 5).map((r) => `${r.id} step ${r.step_id}, expired ${r.expires_at.toISOString()}`),
      ],
      keys: open.slice(0, 5).flatMap((r) => [r.id, r.step_id]),
    });
  const ids = new Set(rows.map((r) => r.id));
  const phantom = [...journal.received].filter(([id]) => !ids.has(id));
  if (phantom.length)
    out.push({
      invariant: 'every reservation a caller received exists',
      details: [
        `${phantom.length} answered but not stored, e.g.:`,
        ...phantom.slice(0, 5).map(([id, h]) => `${id} (${h.stepId})`),
      ],
      keys: phantom.slice(0, 5).flatMap(([id, h]) => [id, h.stepId]),
    });
  return out;
}

/** `tollgate verify --json`: counters, hold totals, holds and statuses recomputed from the log. */
export async function verifyFindsNothing({ projectId, env }: Inputs): Promise<Violation[]> {
  const cli = join(__dirname, '..', '..', 'apps', 'cli', 'src', 'main.js');
  const run = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      [cli, 'verify', '--project', projectId, '--json'],
      { env: { ...process.env, ...env, LOG_LEVEL: 'error' }, timeout: 180_000, maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) =>
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
    );
  });
  if (run.code === 0) return [];
  let differences: {
    table: string;
    key: Record<string, unknown>;
    stored: unknown;
    expected: unknown;
    issue: string;
  }[] = [];
  try {
    differences = (JSON.parse(run.stdout) as { differences: typeof differences }).differences;
  } catch {
    /* not JSON: verify itself failed, reported below */
  }
  if (run.code !== 1 || !differences.length)
    return [{ invariant: 'tollgate verify ran', details: [`exit ${run.code}`, run.stderr.slice(-2000)], keys: [] }];
  return [
    {
      invariant: 'tollgate verify finds no difference between the derived state and the log',
      details: [
        `${differences.length} differences, e.g.:`,
        ...differences
          .slice(0, 8)
          .map(
            (d) =>
              `${d.table} ${JSON.stringify(d.key)}: ${d.issue}; stored ${JSON.stringify(d.stored)}, expected ${JSON.stringify(d.expected)}`,
          ),
      ],
      keys: differences.slice(0, 8).flatMap((d) => Object.values(d.key).map(String)),
    },
  ];
}
