import { freePort } from '../sdk/support';
import {
  buildOnce,
  ensurePostgres,
  ensureRedis,
  Load,
  newQueuePrefix,
  pg,
  processEnv,
  ServiceProcess,
  sleep,
} from './harness';
import { exportTo } from './projections';
import { LEDGER_CHECKS, SCENARIOS, type FaultContext, type Ledger } from './scenarios';

/** FAULTS=api,worker selects scenarios (all by default, PostgreSQL last). */
const selected = process.env.FAULTS
  ? SCENARIOS.filter((s) => process.env.FAULTS!.split(',').includes(s.key))
  : SCENARIOS;

interface Row {
  scenario: string;
  sent: number;
  acknowledged: number;
  stored: number;
  duplicates: number;
  lost: number;
  retries: string;
  guard: string;
  notes: string;
}

function lastLines(text: string, n: number): string {
  return text.split('\n').slice(-n).join('\n');
}

async function readLedger(projectId: string): Promise<Ledger> {
  return pg(async (c) => {
    const res = await c.query(
      `SELECT event_id, count(*)::int AS n, sum(input_tokens + output_tokens)::bigint AS tokens
         FROM events WHERE project_id = $1 AND type = 'StepUsageRecorded' GROUP BY event_id`,
      [projectId],
    );
    return {
      rows: new Map(res.rows.map((r) => [r.event_id as string, r.n as number])),
      tokens: res.rows.reduce((n, r) => n + Number(r.tokens), 0),
    };
  });
}

describe('faults: the ledger holds what producers were told, through crashes and outages', () => {
  let api: ServiceProcess;
  let worker: ServiceProcess;
  let env: Record<string, string>;
  const rows: Row[] = [];

  beforeAll(async () => {
    buildOnce();
    env = processEnv(newQueuePrefix());
    api = new ServiceProcess('api', env, await freePort());
    worker = new ServiceProcess('worker', env);
    await api.start();
    await worker.start();
  }, 180_000);

  afterAll(async () => {
    await ensurePostgres();
    await ensureRedis();
    await worker?.kill();
    await api?.kill();
    const lines = [
      '',
      'scenario | events sent | acknowledged | stored | duplicates | lost | SDK retries (by answer) | guard checks (fail-open) | during the fault',
    ];
    for (const r of rows)
      lines.push(
        `${r.scenario} | ${r.sent} | ${r.acknowledged} | ${r.stored} | ${r.duplicates} | ${r.lost} | ${r.retries} | ${r.guard} | ${r.notes}`,
      );
    process.stdout.write(lines.join('\n') + '\n');
  });

  for (const scenario of selected) {
    it(
      scenario.name,
      async () => {
        const load = await Load.start(api.url);
        const receiver = await exportTo(api.url, load.result.project.key);
        const ctx: FaultContext = { api, worker, load, env, receiver, notes: [], problems: [] };
        await sleep(3000);
        try {
          await scenario.inject(ctx);
        } finally {
          await ensurePostgres();
          await ensureRedis();
          if (!api.running) await api.start();
          if (!worker.running) await worker.start();
        }
        // The load goes on for a while after the recovery, then every producer flushes and stops.
        await sleep(3000);
        const result = await load.stop();
        const ledger = await readLedger(result.project.id);
        const problems = [...ctx.problems];
        try {
          for (const check of LEDGER_CHECKS)
            problems.push(...(await check.check(ctx, result, ledger)).map((p) => `${check.name}: ${p}`));
        } finally {
          await receiver.close();
        }

        const acknowledged = [...result.recorded].filter((id) => !result.notAcknowledged.has(id));
        rows.push({
          scenario: scenario.name,
          sent: result.recorded.size,
          acknowledged: acknowledged.length,
          stored: ledger.rows.size,
          duplicates: [...ledger.rows.values()].reduce((n, c) => n + c - 1, 0),
          lost: acknowledged.filter((id) => !ledger.rows.has(id)).length,
          retries: `${result.retries}${result.retries ? ` (${[...result.retryStatuses].map(([s, n]) => `${s}×${n}`).join(' ')})` : ''}`,
          guard: `${result.guardChecks} (${result.guardFailOpen})${result.guardErrors ? `, ${result.guardErrors} threw` : ''}`,
          notes: [
            ...ctx.notes,
            result.duplicateAcks ? `${result.duplicateAcks} retried events answered "duplicate"` : '',
          ]
            .filter(Boolean)
            .join('; '),
        });
        // What the processes said last, to tell a hang from a crash (FAULTS_LOG_LEVEL=debug says more).
        if (problems.length)
          for (const p of [api, worker])
            process.stdout.write(`\n${scenario.name}: the ${p.kind}'s last output\n${lastLines(p.output, 40)}\n`);
        expect(problems).toEqual([]);
      },
      300_000,
    );
  }
});
