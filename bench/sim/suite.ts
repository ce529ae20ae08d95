/**
 * `npm run test:sim`: the simulator on a few fixed seeds, one after the other, each as its own
 * process (a seed's services, Redis and database are its own). Fails when any seed breaks an
 * invariant or cannot run. SIM_SEEDS (comma-separated) and SIM_SECONDS change what runs.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

const SEEDS = (process.env.SIM_SEEDS ?? '1,2,3').split(',').map((s) => Number(s.trim()));
const SECONDS = Number(process.env.SIM_SECONDS ?? 40);
const SERVICES = 2;

const results: { seed: number; code: number | null; seconds: number }[] = [];
for (const seed of SEEDS) {
  const started = Date.now();
  const args = ['--seed', String(seed), '--seconds', String(SECONDS), '--services', String(SERVICES)];
  // A seed's run ends by itself well within this (load, TTL, a sweep, verify); past it, SIGTERM
  // makes it stop every process it started and exit.
  const run = spawnSync(process.execPath, [join(__dirname, 'main.js'), ...args], {
    stdio: 'inherit',
    timeout: (SECONDS + 400) * 1000,
  });
  results.push({ seed, code: run.status, seconds: Math.round((Date.now() - started) / 1000) });
  process.stdout.write('\n');
}

const verdict = (code: number | null) =>
  code === 0 ? 'invariants held' : code === 1 ? 'INVARIANT BROKEN' : `could not run (exit ${code ?? 'timeout'})`;
process.stdout.write(
  `test:sim, ${SECONDS} s a seed, ${SERVICES} services:\n` +
    results.map((r) => `  seed ${r.seed}: ${verdict(r.code)} (${r.seconds} s)\n`).join(''),
);
process.exit(results.every((r) => r.code === 0) ? 0 : 1);
