import type { Client } from 'pg';
import type { Violation } from './invariants';
import { formatEntry, type Journal } from './journal';
import type { BudgetSpend } from './spend';

export interface RunShape {
  seed: number;
  seconds: number;
  agents: number;
  services: number;
  ttlMs: number;
  lateSteps: boolean;
}

export const replayCommand = (s: RunShape) =>
  `npm run sim -- --seed ${s.seed} --seconds ${s.seconds} --agents ${s.agents} --services ${s.services}` +
  `${s.ttlMs !== 2000 ? ` --ttl-ms ${s.ttlMs}` : ''}${s.lateSteps ? ' --late-steps' : ''}`;

function counted(m: Map<string, number>): string[] {
  return [...m].sort(([a], [b]) => a.localeCompare(b)).map(([k, n]) => `  ${k}: ${n}`);
}

/** What the run did, so that a pass shows it exercised something: answers, reservations, events, budgets. */
export async function summary(
  sql: Client,
  projectId: string,
  journal: Journal,
  spends: BudgetSpend[],
): Promise<string[]> {
  const { rows: reservations } = await sql.query<{ status: string; n: number }>(
    'SELECT status, count(*)::int AS n FROM reservations WHERE project_id = $1 GROUP BY status ORDER BY status',
    [projectId],
  );
  const { rows: events } = await sql.query<{ type: string; n: number }>(
    'SELECT type, count(*)::int AS n FROM events WHERE project_id = $1 GROUP BY type ORDER BY type',
    [projectId],
  );
  const { rows: stored } = await sql.query<{ id: string; step_id: string }>(
    'SELECT id, step_id FROM reservations WHERE project_id = $1',
    [projectId],
  );
  const unreceived = stored.filter((r) => !journal.received.has(r.id));
  const { rows: late } = await sql.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM reservations WHERE project_id = $1 AND status = 'settled' AND closed_at > expires_at`,
    [projectId],
  );
  const tallies = [...journal.ingest.values()];
  const sum = (k: 'accepted' | 'duplicate' | 'rejected' | 'lost') => tallies.reduce((s, t) => s + t[k], 0);
  const near = spends.filter((s) => s.spend >= 0.5 * s.limit).sort((a, b) => b.spend / b.limit - a.spend / a.limit);
  return [
    'faults:',
    ...journal.entries.filter((e) => e.who === 'fault').map(formatEntry),
    'answers (route status: count):',
    ...counted(journal.statuses),
    `reservations received ${journal.received.size}; checks whose answer was lost ${journal.lostChecks.size}, answered by failMode ${journal.failModeChecks.size}`,
    `reservations stored: ${reservations.map((r) => `${r.status} ${r.n}`).join(', ')}; no caller received ${unreceived.length}` +
      ` (of checks whose answer was lost ${unreceived.filter((r) => journal.lostChecks.has(r.step_id)).length},` +
      ` answered by failMode ${unreceived.filter((r) => journal.failModeChecks.has(r.step_id)).length})`,
    `reservations settled after they expired (before a sweep lapsed them): ${late[0].n}`,
    `ingest answers: accepted ${sum('accepted')}, duplicate ${sum('duplicate')}, rejected ${sum('rejected')}, lost ${sum('lost')}`,
    `events stored: ${events.map((e) => `${e.type} ${e.n}`).join(', ')}`,
    `budgets: ${spends.length} limits checked, ${near.length} spent half or more:`,
    ...near.map(
      (s) =>
        `  ${((100 * s.spend) / s.limit).toFixed(1).padStart(5)} % ${s.label} ${s.limitType}: ${s.spend} of ${s.limit}` +
        ` over ${s.steps} steps (excess recorded ${s.excess})`,
    ),
    ...(journal.notes.size ? ['notes:', ...counted(journal.notes)] : []),
  ];
}

/** The first broken invariant, its evidence, the steps about it and the last steps of the run. */
export function failure(shape: RunShape, violations: Violation[], journal: Journal): string[] {
  const [first, ...rest] = violations;
  const about = first.keys.length ? journal.tail(30, first.keys) : [];
  return [
    `INVARIANT BROKEN (seed ${shape.seed}): ${first.invariant}`,
    ...first.details.map((d) => `  ${d}`),
    ...(rest.length ? [`also broken: ${rest.map((v) => v.invariant).join('; ')}`] : []),
    ...(about.length ? ['last steps about it:', ...about.map(formatEntry)] : []),
    'last steps of the run:',
    ...journal.tail(20).map(formatEntry),
    `replay: ${replayCommand(shape)}`,
  ];
}
