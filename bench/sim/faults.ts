import type { Cluster } from './cluster';
import type { Journal } from './journal';
import { Random } from './prng';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface Fault {
  /** Milliseconds after the load began. */
  atMs: number;
  kind: 'kill' | 'cut' | 'redis';
  /** For a kill: the service (0 is the one running the worker too). */
  service: number;
  /** How long a killed service or Redis stays down before it is started again. */
  downMs: number;
  /** For a cut: only the connections inside a statement or a transaction, else every one. */
  onlyBusy: boolean;
}

/**
 * The faults of a run, drawn from the seed: a SIGKILL of a service (started again after a
 * while) about every 25 s, a cut of the services' PostgreSQL connections about every 12 s, a
 * restart of Redis (the simulator's own) about every 40 s; at least one of each. All between
 * 10 % and 80 % of the run, so the end of the run shows the recovery.
 */
export function planFaults(seed: number, seconds: number, services: number, redis: boolean): Fault[] {
  const r = new Random(seed, 'faults');
  const counts = {
    kill: Math.max(1, Math.round(seconds / 25)),
    cut: Math.max(1, Math.round(seconds / 12)),
    redis: redis ? Math.max(1, Math.round(seconds / 40)) : 0,
  };
  const faults: Fault[] = [];
  for (const kind of ['kill', 'cut', 'redis'] as const)
    for (let i = 0; i < counts[kind]; i++)
      faults.push({
        kind,
        atMs: Math.round(r.between(0.1, 0.8) * seconds * 1000),
        service: r.int(0, services - 1),
        downMs: r.int(300, 3000),
        onlyBusy: r.chance(0.5),
      });
  return faults.sort((a, b) => a.atMs - b.atMs);
}

export function describeFault(f: Fault): string {
  if (f.kind === 'kill') return `SIGKILL service ${f.service}${f.service === 0 ? ' (main)' : ''}, down ${f.downMs} ms`;
  if (f.kind === 'cut') return `pg_terminate_backend on the services' ${f.onlyBusy ? 'busy ' : ''}connections`;
  return `Redis restarted without its data, down ${f.downMs} ms`;
}

/**
 * Runs the faults at their times, none after `until` (Date.now()). A killed service is started
 * again in the background (a start takes seconds), so the faults after it keep their times; every
 * service is up again when this returns.
 */
export async function runFaults(faults: Fault[], cluster: Cluster, journal: Journal, until: number): Promise<void> {
  const restarts: Promise<void>[] = [];
  try {
    for (const f of faults) {
      const wait = f.atMs - journal.now();
      if (wait > 0) await sleep(Math.min(wait, until - Date.now()));
      if (Date.now() >= until) break;
      journal.log('fault', describeFault(f), ['fault']);
      if (f.kind === 'cut') {
        const n = await cluster.cutConnections(f.onlyBusy);
        journal.log('fault', `${n} connections terminated`, ['fault']);
      } else if (f.kind === 'redis') {
        await cluster.restartRedis(f.downMs);
        journal.log('fault', 'Redis up again', ['fault']);
      } else if (!cluster.url(f.service)) {
        journal.log('fault', `service ${f.service} is down already`, ['fault']);
      } else {
        await cluster.kill(f.service);
        restarts.push(sleep(f.downMs).then(() => restart(cluster, journal, f.service)));
      }
    }
  } finally {
    await Promise.allSettled(restarts);
    for (let i = 0; i < cluster.size; i++) if (!cluster.url(i)) await restart(cluster, journal, i);
  }
}

/** Starts a service again (a few tries: a start can fail while the machine is loaded). */
async function restart(cluster: Cluster, journal: Journal, i: number): Promise<void> {
  for (let attempt = 1; attempt <= 3; attempt++) {
    try {
      await cluster.startService(i);
      journal.log('fault', `service ${i} up again at ${cluster.url(i)}`, ['fault']);
      return;
    } catch (err) {
      journal.log('fault', `service ${i} failed to start (attempt ${attempt}): ${String(err)}`, ['fault']);
      await sleep(1000);
    }
  }
  throw new Error(`service ${i} could not be started again`);
}
