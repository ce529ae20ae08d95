/**
 * `npm run sim -- --seed N --seconds S [--agents M] [--services K]`: a ledger simulator in the
 * spirit of TigerBeetle's VOPR and Jepsen's bank test. It starts K built services on a database
 * of its own, drives M agents with a workload drawn from the seed, injects faults at seeded
 * times (SIGKILL of a service, cut PostgreSQL connections, a Redis restart), lets every
 * reservation close, then checks the ledger's invariants. Exit 0: `invariants held (seed N)`;
 * 1: the first invariant broken, its evidence and the steps that led there; 2: the simulator
 * itself could not run.
 */
import { parseArgs } from 'node:util';
import type { Client } from 'pg';
import { createBenchProject, resetDatabase } from '../support/harness';
import { Agent, type SimContext } from './agent';
import { Cluster } from './cluster';
import { describeFault, planFaults, runFaults } from './faults';
import {
  acceptedOnce,
  noServerErrors,
  reservationsAccounted,
  verifyFindsNothing,
  type Inputs,
  type Violation,
} from './invariants';
import { Journal } from './journal';
import { failure, replayCommand, summary, type RunShape } from './report';
import { budgetsHold, type BudgetSpend } from './spend';
import { budgetInstances, limitBody, makeWorld, type World } from './world';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Options extends RunShape {
  keepDatabase: boolean;
}

function options(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      seed: { type: 'string' },
      seconds: { type: 'string', default: '30' },
      agents: { type: 'string', default: '16' },
      services: { type: 'string', default: '2' },
      'ttl-ms': { type: 'string', default: '2000' },
      keep: { type: 'boolean', default: false },
      'late-steps': { type: 'boolean', default: false },
    },
  });
  const int = (name: string, v: string | undefined, min: number, max: number) => {
    const n = Number(v);
    if (v === undefined || !Number.isInteger(n) || n < min || n > max)
      throw new Error(`--${name} must be an integer from ${min} to ${max}`);
    return n;
  };
  return {
    seed: int('seed', values.seed, 0, 2 ** 32 - 1),
    seconds: int('seconds', values.seconds, 5, 3600),
    agents: int('agents', values.agents, 1, 256),
    services: int('services', values.services, 1, 6),
    ttlMs: int('ttl-ms', values['ttl-ms'], 500, 60_000),
    keepDatabase: values.keep ?? false,
    lateSteps: values['late-steps'] ?? false,
  };
}

async function within(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((r) => (timer = setTimeout(() => r(false), ms)));
  const done = p.then(() => true as const);
  const ok = await Promise.race([done, timeout]);
  clearTimeout(timer);
  return ok;
}

/** A project with an admin key, and the world's policies stored before any check is made. */
async function setUp(cluster: Cluster, world: World): Promise<{ id: string; key: string }> {
  const url = cluster.url(0)!;
  const project = await createBenchProject(url);
  if (!project.id || !project.key) throw new Error('could not create the project');
  for (const b of world.budgets.filter((x) => x.source === 'policy')) {
    const res = await fetch(`${url}/v1/policies/${b.name}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${project.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ ...limitBody(b), strategy: 'block' }),
    });
    if (!res.ok) throw new Error(`PUT /v1/policies/${b.name}: ${res.status} ${await res.text()}`);
  }
  return project;
}

/** Runs the agents and the faults to the deadline; every loop bounded (the agents' steps in flight end first). */
async function load(sim: SimContext, cluster: Cluster, opts: Options): Promise<void> {
  const faults = planFaults(opts.seed, opts.seconds, opts.services, cluster.ownRedis);
  const agents = sim.world.agents.map((spec) => new Agent(spec, sim));
  sim.journal.begin();
  const agentsDone = Promise.all(agents.map((a) => a.run()));
  // Settled at once, so that a failed restart is reported after the agents stop, not as an unhandled rejection.
  const faultsDone = runFaults(faults, cluster, sim.journal, sim.deadline).then(
    () => undefined,
    (err: unknown) => err,
  );
  const budget = opts.seconds * 1000 + 90_000;
  if (!(await within(agentsDone, budget))) {
    sim.stopped.now = true;
    if (!(await within(agentsDone, 40_000))) throw new Error('the agents did not stop');
  }
  if (!(await within(faultsDone, 120_000))) throw new Error('the fault injector did not stop');
  const failed = await faultsDone;
  if (failed) throw failed;
}

/** Every reservation's TTL passes, then the sweeper (every 30 s, in the main service) lapses what is open. */
async function waitClosed(sql: Client, projectId: string, ttlMs: number): Promise<number> {
  const deadline = Date.now() + ttlMs + 75_000;
  let open = -1;
  while (Date.now() < deadline) {
    const { rows } = await sql.query<{ open: number }>(
      `SELECT count(*)::int AS open FROM reservations WHERE project_id = $1 AND status = 'open'`,
      [projectId],
    );
    open = rows[0].open;
    if (open === 0) return 0;
    await sleep(500);
  }
  return open;
}

async function checkAll(inputs: Inputs): Promise<{ violations: Violation[]; spends: BudgetSpend[] }> {
  const violations = [...noServerErrors(inputs), ...(await acceptedOnce(inputs))];
  violations.push(...(await reservationsAccounted(inputs)));
  const budgets = await budgetsHold(inputs);
  violations.push(...budgets.violations, ...(await verifyFindsNothing(inputs)));
  return { violations, spends: budgets.spends };
}

function describeWorld(world: World, opts: Options, redis: boolean): string[] {
  const policies = world.budgets.filter((b) => b.source === 'policy');
  return [
    `${world.agents.length} agents (own run each) on ${new Set(world.agents.map((a) => a.context.resourceId)).size} resources; ` +
      `${world.budgets.length - policies.length} request budgets, ${policies.length} policies ` +
      `(${budgetInstances(world).length} budgets in all); reservation TTL ${opts.ttlMs} ms${opts.lateSteps ? '; some steps outlive it (--late-steps)' : ''}`,
    ...planFaults(opts.seed, opts.seconds, opts.services, redis).map(
      (f) => `  fault at +${(f.atMs / 1000).toFixed(1)}s: ${describeFault(f)}`,
    ),
  ];
}

async function simulate(opts: Options): Promise<number> {
  const databaseUrl = process.env.SIM_DATABASE_URL ?? `postgresql://postgres@127.0.0.1:5432/tollgate_sim_${opts.seed}`;
  const world = makeWorld(opts.seed, opts);
  const journal = new Journal();
  const env = { GUARD_RESERVATION_TTL_MS: String(opts.ttlMs), DATABASE_POOL_SIZE: '10', LOG_LEVEL: 'error' };
  const cluster = new Cluster(databaseUrl, opts.services, env);
  const say = (lines: string[]) => process.stdout.write(lines.map((l) => `${l}\n`).join(''));
  let code = 2;
  try {
    say([
      `sim seed ${opts.seed}: ${opts.seconds} s, ${opts.services} services, database ${new URL(databaseUrl).pathname.slice(1)}`,
    ]);
    await cluster.start();
    say(describeWorld(world, opts, cluster.ownRedis));
    const project = await setUp(cluster, world);
    const sim: SimContext = {
      ...{ seed: opts.seed, key: project.key, world, journal, ttlMs: opts.ttlMs, lateSteps: opts.lateSteps },
      services: cluster,
      deadline: Date.now() + opts.seconds * 1000,
      stopped: { now: false },
    };
    say([
      `load for ${opts.seconds} s (Redis: ${cluster.ownRedis ? 'its own, restarted by a fault' : 'REDIS_URL, not restarted'})`,
    ]);
    await load(sim, cluster, opts);
    say([`waiting for every reservation to close (TTL ${opts.ttlMs} ms, then the sweeper)`]);
    const waited = Date.now();
    const open = await waitClosed(cluster.sql, project.id, opts.ttlMs);
    say([`${open ? `${open} still open` : 'all closed'} after ${((Date.now() - waited) / 1000).toFixed(1)} s`]);
    const inputs: Inputs = { sql: cluster.sql, projectId: project.id, journal, world, env: cluster.env() };
    const { violations, spends } = await checkAll(inputs);
    say(await summary(cluster.sql, project.id, journal, spends));
    say(violations.length ? failure(opts, violations, journal) : [`invariants held (seed ${opts.seed})`]);
    code = violations.length ? 1 : 0;
  } catch (err) {
    say([
      `the simulator could not run (seed ${opts.seed}): ${(err as Error).stack ?? String(err)}`,
      `replay: ${replayCommand(opts)}`,
    ]);
  } finally {
    await cluster.stop();
  }
  if (code === 0 && !opts.keepDatabase) await resetDatabase(databaseUrl).catch(() => undefined);
  else say([`database kept for a look: ${databaseUrl}`]);
  return code;
}

// Ctrl-C or a kill: exit, so that the exit hook SIGKILLs every process the simulator started.
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(130));
// Exit 1 means an invariant broke: a bug of the simulator's own must not look like one.
process.on('unhandledRejection', (err) => {
  process.stderr.write(`the simulator failed: ${String((err as Error)?.stack ?? err)}\n`);
  process.exit(2);
});

let opts: Options;
try {
  opts = options(process.argv.slice(2));
} catch (err) {
  process.stderr.write(
    `${(err as Error).message}\nUsage: npm run sim -- --seed N --seconds S [--agents M] [--services K] [--ttl-ms T] [--late-steps] [--keep]\n`,
  );
  process.exit(2);
}
simulate(opts).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`${String(err)}\n`);
    process.exit(2);
  },
);
