import type { Receiver } from '../exporters/support';
import {
  ensurePostgres,
  ensureRedis,
  postgres,
  redisStop,
  sleep,
  type Load,
  type LoadResult,
  type ServiceProcess,
} from './harness';
import { compareWithRebuild, metricTotal, receiverHasAll } from './projections';

/** What a scenario and the checks work with. */
export interface FaultContext {
  api: ServiceProcess;
  worker: ServiceProcess;
  load: Load;
  /** The environment of the service processes (the replay CLI runs with it too). */
  env: Record<string, string>;
  /** The webhook receiver of the scenario's exporter (configured from the log's beginning). */
  receiver: Receiver;
  /** What the fault looked like from outside, for the printed table. */
  notes: string[];
  /** Anything that broke a promise during the fault (a hang, a 5xx other than 503, …). */
  problems: string[];
}

/**
 * One row of the fault table: the fault is injected while the load runs, and `inject` returns
 * once it is recovered. Scenarios for projections (issue 4) and exporters (issue 5) are added as
 * rows here; their extra assertions go into LEDGER_CHECKS.
 */
export interface Scenario {
  /** Short key for FAULTS=… selection. */
  key: string;
  name: string;
  inject(ctx: FaultContext): Promise<void>;
}

/** What the event log holds for the scenario's project. */
export interface Ledger {
  /** event id → rows with that id (more than 1 is a double count). */
  rows: Map<string, number>;
  tokens: number;
}

/** Checked after every scenario: each returns the problems it found. */
export interface LedgerCheck {
  name: string;
  check(ctx: FaultContext, result: LoadResult, ledger: Ledger): Promise<string[]>;
}

export const LEDGER_CHECKS: LedgerCheck[] = [
  {
    name: 'events in the log = events acknowledged, none twice',
    async check(_ctx, r, ledger) {
      const problems: string[] = [];
      const acknowledged = [...r.recorded].filter((id) => !r.notAcknowledged.has(id));
      const lost = acknowledged.filter((id) => !ledger.rows.has(id));
      const twice = [...ledger.rows.values()].filter((n) => n > 1).length;
      if (lost.length)
        problems.push(`${lost.length} acknowledged events are not in the log (e.g. ${lost.slice(0, 3).join(', ')})`);
      if (twice) problems.push(`${twice} events are in the log more than once`);
      if (r.acknowledgedBySdk !== acknowledged.length)
        problems.push(`the SDK counted ${r.acknowledgedBySdk} acknowledgements for ${acknowledged.length} events`);
      if (r.notAcknowledged.size) problems.push(`${r.notAcknowledged.size} events were dropped or rejected by the SDK`);
      return problems;
    },
  },
  {
    name: 'guard usage = the sum of the log',
    async check(ctx, r, ledger) {
      const res = await fetch(`${ctx.api.url}/v1/guard/check`, {
        method: 'POST',
        headers: { authorization: `Bearer ${r.project.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          context: { resourceId: r.resourceId },
          limits: [{ scope: 'resource', window: '24h', maxTotalTokens: 1e12 }],
        }),
      });
      const body = (await res.json()) as {
        usage: Record<string, { totalTokens: number; reservedInputTokens: number }>;
      };
      const usage = body.usage?.[`resource:${r.resourceId}@24h`];
      return usage?.totalTokens === ledger.tokens
        ? []
        : [`guard usage ${usage?.totalTokens} ≠ log sum ${ledger.tokens}`];
    },
  },
  {
    name: 'projections = a rebuild from the log; metric total = the sum of the log',
    async check(ctx, r, ledger) {
      const problems = await compareWithRebuild(r.project.id, ctx.env);
      const total = await metricTotal(ctx.api.url, r.project.key, { resourceId: r.resourceId });
      if (total.value !== ledger.tokens)
        problems.push(`metric aggregate ${total.value} ≠ log sum ${ledger.tokens} (lag ${total.lag})`);
      return problems;
    },
  },
  {
    name: "the exporter's receiver has every stored event",
    async check(ctx, _r, ledger) {
      const { problems, duplicates, received } = await receiverHasAll(ctx.receiver, new Set(ledger.rows.keys()));
      ctx.notes.push(`receiver got ${received} deliveries${duplicates ? ` (${duplicates} repeats)` : ''}`);
      return problems;
    },
  },
];

interface Probe {
  status: number | 'no answer';
  ms: number;
  retryAfter: string | null;
}

/** Requests a user would make during an outage, each with a 15 s deadline: the service must answer every one. */
async function probeWhile(ctx: FaultContext, until: () => boolean): Promise<Probe[]> {
  const probes: Probe[] = [];
  const key = ctx.load.result.project.key;
  const requests = [
    () =>
      fetch(`${ctx.api.url}/v1/policies`, {
        headers: { authorization: `Bearer ${key}` },
        signal: AbortSignal.timeout(15_000),
      }),
    () =>
      fetch(`${ctx.api.url}/v1/events`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        // Invalid on purpose (no usage): it must never be stored, whatever the outage does.
        body: JSON.stringify({
          events: [
            {
              eventId: `probe-${Date.now()}`,
              occurredAt: new Date().toISOString(),
              traceId: 'probe',
              entityType: 'agent',
              provider: 'openai',
              model: 'gpt-4o',
            },
          ],
        }),
        signal: AbortSignal.timeout(15_000),
      }),
  ];
  let i = 0;
  while (!until()) {
    const started = Date.now();
    const res = await requests[i++ % requests.length]().then(
      (r) => r,
      () => null,
    );
    probes.push({
      status: res ? res.status : 'no answer',
      ms: Date.now() - started,
      retryAfter: res?.headers.get('retry-after') ?? null,
    });
    await sleep(200);
  }
  return probes;
}

function judgeProbes(ctx: FaultContext, probes: Probe[]): void {
  const by = new Map<string, number>();
  for (const p of probes) by.set(String(p.status), (by.get(String(p.status)) ?? 0) + 1);
  ctx.notes.push(
    `probes ${[...by].map(([s, n]) => `${s}×${n}`).join(' ')}, slowest ${Math.max(0, ...probes.map((p) => p.ms))} ms`,
  );
  for (const p of probes) {
    if (p.status === 'no answer') ctx.problems.push(`a request got no answer within 15 s (${p.ms} ms)`);
    else if (p.status >= 500 && p.status !== 503) ctx.problems.push(`a request got ${p.status}`);
    else if (p.status === 503 && !p.retryAfter) ctx.problems.push('a 503 came without Retry-After');
  }
}

export const SCENARIOS: Scenario[] = [
  {
    key: 'api',
    name: 'API SIGKILL mid-request ×3',
    async inject(ctx) {
      for (let i = 0; i < 3; i++) {
        await sleep(2000);
        await ctx.api.kill();
        await sleep(500);
        await ctx.api.start();
      }
      ctx.notes.push(`API restarted 3×`);
    },
  },
  {
    key: 'worker',
    name: 'worker SIGKILL ×10',
    async inject(ctx) {
      for (let i = 0; i < 10; i++) {
        // Some kills land during boot (migrations, queue connections), some while it works.
        await sleep(400 + (i % 3) * 600);
        await ctx.worker.kill();
        await ctx.worker.start(false);
      }
      await sleep(3000);
      if (!ctx.worker.running)
        ctx.problems.push(`the worker did not stay up after the 10th restart: ${ctx.worker.output.slice(-500)}`);
      ctx.notes.push(`worker started ${ctx.worker.starts}× in all`);
    },
  },
  {
    key: 'redis',
    name: 'Redis stopped 10 s',
    async inject(ctx) {
      const before = ctx.load.acknowledgedSoFar;
      const failOpenBefore = ctx.load.result.guardFailOpen;
      try {
        redisStop();
        await sleep(10_000);
        const during = ctx.load.acknowledgedSoFar - before;
        ctx.notes.push(`${during} events acknowledged while Redis was down`);
        if (during === 0) ctx.problems.push('ingest stopped committing while Redis was down');
        if (ctx.load.result.guardFailOpen > failOpenBefore)
          ctx.problems.push(
            `${ctx.load.result.guardFailOpen - failOpenBefore} guard checks fell back to failMode while Redis was down`,
          );
      } finally {
        await ensureRedis();
      }
      const started = Date.now();
      while (
        !(await fetch(`${ctx.api.url}/health/ready`).then(
          (r) => r.ok,
          () => false,
        ))
      ) {
        if (Date.now() - started > 30_000) {
          ctx.problems.push('the API was not ready 30 s after Redis came back');
          break;
        }
        await sleep(200);
      }
      ctx.notes.push(`API ready again ${Date.now() - started} ms after Redis was back`);
      if (!ctx.worker.running)
        ctx.problems.push(`the worker exited during the Redis outage: ${ctx.worker.output.slice(-500)}`);
    },
  },
  {
    // Stops the machine's shared PostgreSQL: keep it last, and always start it again.
    key: 'postgres',
    name: 'PostgreSQL stopped 10 s',
    async inject(ctx) {
      let done = false;
      const probing = probeWhile(ctx, () => done);
      try {
        postgres('stop');
        await sleep(10_000);
      } finally {
        await ensurePostgres();
      }
      await sleep(2000);
      done = true;
      judgeProbes(ctx, await probing);
      if (!ctx.api.running)
        ctx.problems.push(`the API exited during the PostgreSQL outage: ${ctx.api.output.slice(-500)}`);
      if (!ctx.worker.running)
        ctx.problems.push(`the worker exited during the PostgreSQL outage: ${ctx.worker.output.slice(-500)}`);
    },
  },
];
