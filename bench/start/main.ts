/**
 * `npm run bench:start`: how long a user waits, on a built tree, for `npm start` to be ready and
 * for a CLI command to answer — against what every one of them cost before dist/ was reused: a
 * full build (measured here into a scratch directory, so dist/ is left alone).
 *
 *   BENCH_ROUNDS (default 3)  BENCH_DATABASE_URL (default …/tollgate_bench_start, dropped first)
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BENCH_ADMIN_TOKEN, median, resetDatabase } from '../support/harness';

const ROOT = join(__dirname, '..', '..', '..');
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const DATABASE_URL = process.env.BENCH_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/tollgate_bench_start';
const PORT = 4900 + Math.floor(Math.random() * 90);
const env = {
  ...process.env,
  DATABASE_URL,
  PORT: String(PORT),
  HOST: '127.0.0.1',
  TOLLGATE_ADMIN_TOKEN: BENCH_ADMIN_TOKEN,
  QUEUE_PREFIX: `bench-start-${randomUUID().slice(0, 8)}`,
  LOG_LEVEL: 'warn',
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Seconds from `npm start` to a 200 from /health/ready; then the process group is stopped. */
async function timeStart(): Promise<number> {
  const started = performance.now();
  const child = spawn('npm', ['start', '--silent'], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'ignore', 'pipe'],
    detached: true,
  });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += String(d)));
  try {
    for (;;) {
      if (child.exitCode !== null) throw new Error(`npm start exited with ${child.exitCode}: ${stderr}`);
      const ok = await fetch(`http://127.0.0.1:${PORT}/health/ready`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) break;
      if (performance.now() - started > 120_000) throw new Error('npm start was not ready within 120 s');
      await sleep(25);
    }
    if (stderr.includes('building')) throw new Error(`npm start built although dist/ was current: ${stderr}`);
    return (performance.now() - started) / 1000;
  } finally {
    const exited = new Promise((r) => child.once('exit', r));
    process.kill(-child.pid!, 'SIGTERM');
    await exited;
    await sleep(200);
  }
}

/** Seconds a command takes, run to its end; it must succeed. */
function timeCommand(cmd: string, args: string[]): number {
  const started = performance.now();
  const r = spawnSync(cmd, args, { cwd: ROOT, env, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited with ${r.status}: ${r.stderr}`);
  if (r.stderr.includes('building')) throw new Error(`${cmd} ${args.join(' ')} built although dist/ was current`);
  return (performance.now() - started) / 1000;
}

const fmt = (s: number) => `${s.toFixed(2)} s`;
const verdict = (s: number, target: number) => `${fmt(s)}  (target ≤ ${target} s: ${s <= target ? 'met' : 'MISSED'})`;

async function main() {
  await resetDatabase(DATABASE_URL);
  // The tree is built once (a no-op when current), then every measured command finds it current.
  timeCommand(process.execPath, [join(ROOT, 'scripts/ensure-built.mjs')]);
  // The first start creates the database and applies the migrations; it is not counted.
  await timeStart();
  const created = spawnSync('node', ['dist/apps/cli/src/main.js', 'projects', 'create', '--name', 'bench', '--json'], {
    cwd: ROOT,
    env,
    encoding: 'utf8',
  });
  if (created.status !== 0) throw new Error(`projects create: ${created.stderr}`);
  const projectId = String(JSON.parse(created.stdout).id);

  const rows: Record<string, number[]> = { fingerprint: [], start: [], help: [], keysList: [], keysListNode: [] };
  for (let i = 0; i < ROUNDS; i++) {
    rows.fingerprint.push(timeCommand(process.execPath, [join(ROOT, 'scripts/ensure-built.mjs')]));
    rows.start.push(await timeStart());
    rows.help.push(timeCommand('npm', ['run', '--silent', 'tollgate', '--', 'help']));
    rows.keysList.push(
      timeCommand('npm', ['run', '--silent', 'tollgate', '--', 'keys', 'list', '--project', projectId]),
    );
    rows.keysListNode.push(
      timeCommand(process.execPath, ['dist/apps/cli/src/main.js', 'keys', 'list', '--project', projectId]),
    );
  }

  // The baseline: what each of these paid before — a full build (prisma generate, tsc, tsc-alias).
  const scratch = mkdtempSync(join(tmpdir(), 'tollgate-bench-build-'));
  let fullBuild: number;
  try {
    const started = performance.now();
    timeCommand(join(ROOT, 'node_modules/.bin/prisma'), ['generate']);
    timeCommand(join(ROOT, 'node_modules/.bin/tsc'), ['-p', 'tsconfig.build.json', '--outDir', scratch]);
    timeCommand(join(ROOT, 'node_modules/.bin/tsc-alias'), ['-p', 'tsconfig.build.json', '--outDir', scratch]);
    fullBuild = (performance.now() - started) / 1000;
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }

  const start = median(rows.start);
  const keys = median(rows.keysList);
  const out = [
    `bench:start — medians of ${ROUNDS} rounds on a built tree (dist/ current)`,
    `  fingerprint check (scripts/ensure-built.mjs)     ${fmt(median(rows.fingerprint))}`,
    `  npm start → /health/ready 200                    ${verdict(start, 5)}`,
    `  npm run tollgate -- help                          ${verdict(median(rows.help), 2)}`,
    `  npm run tollgate -- keys list --project …         ${verdict(keys, 2)}`,
    `  node dist/apps/cli/src/main.js keys list …        ${fmt(median(rows.keysListNode))}  (without npm's own start-up)`,
    `baseline, measured in this run: a full build (what each of them ran first before)  ${fmt(fullBuild)}`,
    `  npm start: ${((fullBuild + start) / start).toFixed(1)}× faster than build + start; keys list: ${((fullBuild + keys) / keys).toFixed(1)}× faster than build + command`,
  ];
  process.stdout.write(out.join('\n') + '\n');
  await resetDatabase(DATABASE_URL);
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
