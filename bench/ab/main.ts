/**
 * bench:ab — the guard's reserving lines, this build against another commit's, in one run.
 *
 *   npm run bench:ab -- <git ref>     (default: the commit before HEAD)
 *
 * The other commit is checked out into a temporary worktree and built there (sharing this
 * checkout's node_modules); each build's API runs as its own process, with its own database.
 * Every round measures every line on both, one build after the other (the order swapped each
 * round), so a line and its baseline see the machine in the same state; each line prints the
 * medians over the rounds and the median of the per-round ratios (this build ÷ the other).
 * Lines: one agent, p50 of a reserving check; 64 agents on 64 budgets and 64 on one budget,
 * reserving, checks per second and p99.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Pool as HttpPool } from 'undici';
import {
  BENCH_ADMIN_TOKEN,
  createBenchProject,
  freePort,
  median,
  percentile,
  resetDatabase,
  serviceNodeFlags,
} from '../support/harness';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 4);
const DB = process.env.BENCH_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/tollgate_bench_ab';
const REPO = resolve(__dirname, '..', '..', '..');
const ESTIMATE = { provider: 'openai', model: 'gpt-4o', inputTokens: 400, maxOutputTokens: 200 };
const NEVER_DENY = [{ scope: 'resource', window: '24h', maxCost: 1e9 }];

interface Build {
  name: string;
  entry: string;
  url?: string;
  child?: ChildProcess;
  http?: HttpPool;
  key?: string;
}

/** The other commit, built in a worktree of its own. */
function buildRef(ref: string): { dir: string; commit: string } {
  const commit = execFileSync('git', ['rev-parse', '--short', ref], { cwd: REPO, encoding: 'utf8' }).trim();
  const dir = mkdtempSync(join(tmpdir(), `tollgate-ab-${commit}-`));
  execFileSync('git', ['worktree', 'add', '--detach', dir, commit], { cwd: REPO, stdio: 'ignore' });
  symlinkSync(join(REPO, 'node_modules'), join(dir, 'node_modules'));
  console.log(`building ${commit} in ${dir}…`);
  execFileSync('npm', ['run', 'build', '--silent'], { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] });
  return { dir, commit };
}

async function start(build: Build, database: string): Promise<void> {
  const port = await freePort();
  const url = Object.assign(new URL(DB), { pathname: `/${database}` }).toString();
  await resetDatabase(url);
  build.child = spawn(process.execPath, [...serviceNodeFlags(), build.entry], {
    env: {
      ...process.env,
      DATABASE_URL: url,
      DATABASE_POOL_SIZE: '24',
      GUARD_TIMEOUT_MS: '20000',
      RATE_LIMIT_PER_KEY_PER_SECOND: '1000000',
      RATE_LIMIT_BURST: '1000000',
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      TOLLGATE_ADMIN_TOKEN: BENCH_ADMIN_TOKEN,
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  build.url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 300; i++) {
    if (
      await fetch(`${build.url}/health/ready`).then(
        (r) => r.ok,
        () => false,
      )
    )
      break;
    if (build.child.exitCode !== null) throw new Error(`${build.name} exited with ${build.child.exitCode}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  build.http = new HttpPool(build.url, { connections: 128, pipelining: 1 });
  build.key = (await createBenchProject(build.url)).key;
}

let steps = 0;

/** One reserving check under a budget no line reaches; its latency in ms. A busy answer is retried. */
async function reserve(b: Build, scope: string): Promise<number> {
  const headers = { authorization: `Bearer ${b.key}`, 'content-type': 'application/json' };
  const body = JSON.stringify({
    context: { traceId: `run-${scope}`, resourceId: scope },
    limits: NEVER_DENY,
    estimate: ESTIMATE,
    reserve: true,
    stepId: `ab-${++steps}`,
  });
  const t = process.hrtime.bigint();
  for (let attempt = 0; attempt < 100; attempt++) {
    const res = await b.http!.request({ path: '/v1/guard/check', method: 'POST', headers, body });
    const answer = (await res.body.json()) as { decision: string; reason?: string };
    if (answer.reason === 'busy') continue;
    if (res.statusCode !== 200 || answer.decision !== 'allow')
      throw new Error(`${b.name}: ${res.statusCode} ${JSON.stringify(answer)}`);
    return Number(process.hrtime.bigint() - t) / 1e6;
  }
  throw new Error(`${b.name}: busy 100 times in a row`);
}

async function phase(b: Build, agents: number, budgets: number) {
  const latencies: number[] = [];
  const end = Date.now() + SECONDS * 1000;
  const run = randomTag();
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: agents }, async (_, n) => {
      while (Date.now() < end) latencies.push(await reserve(b, `${run}-${n % budgets}`));
    }),
  );
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  return { p50: percentile(latencies, 0.5), p99: percentile(latencies, 0.99), rate: latencies.length / seconds };
}

const randomTag = () => Math.random().toString(36).slice(2, 10);

const LINES = [
  { name: 'one agent, reserving: p50 ms', agents: 1, budgets: 1, pick: (r: Phase) => r.p50, better: 'lower' },
  { name: '64 agents, 64 budgets: checks/s', agents: 64, budgets: 64, pick: (r: Phase) => r.rate, better: 'higher' },
  { name: '64 agents, 64 budgets: p99 ms', agents: 64, budgets: 64, pick: (r: Phase) => r.p99, better: 'lower' },
  { name: '64 agents, one budget: checks/s', agents: 64, budgets: 1, pick: (r: Phase) => r.rate, better: 'higher' },
] as const;
type Phase = Awaited<ReturnType<typeof phase>>;

async function measure(head: Build, base: Build) {
  const shapes = [...new Map(LINES.map((l) => [`${l.agents}/${l.budgets}`, l])).values()];
  const results = new Map<string, { head: Phase[]; base: Phase[] }>();
  for (const s of shapes) results.set(`${s.agents}/${s.budgets}`, { head: [], base: [] });
  // Warm both (JIT, plan caches, partitions) before the first measured round.
  for (const b of [head, base]) for (const s of shapes) await phase(b, s.agents, s.budgets);
  for (let round = 0; round < ROUNDS; round++) {
    for (const s of shapes) {
      const order = round % 2 === 0 ? [head, base] : [base, head];
      for (const b of order)
        results
          .get(`${s.agents}/${s.budgets}`)!
          [b === head ? 'head' : 'base'].push(await phase(b, s.agents, s.budgets));
    }
    console.log(`round ${round + 1} of ${ROUNDS} done`);
  }
  return results;
}

function report(results: Awaited<ReturnType<typeof measure>>, baseName: string) {
  console.log(`\nbench:ab — HEAD against ${baseName}, ${ROUNDS} rounds of ${SECONDS} s per line and build (medians)`);
  for (const line of LINES) {
    const r = results.get(`${line.agents}/${line.budgets}`)!;
    const head = r.head.map(line.pick);
    const base = r.base.map(line.pick);
    const ratio = median(head.map((h, i) => h / base[i]));
    const worse = line.better === 'higher' ? 1 / ratio : ratio;
    console.log(
      `  ${line.name.padEnd(34)} HEAD ${median(head).toFixed(2).padStart(9)}   ${baseName} ${median(base).toFixed(2).padStart(9)}   ×${ratio.toFixed(3)} (${worse <= 1 ? 'not slower' : `${((worse - 1) * 100).toFixed(1)}% slower`})`,
    );
  }
}

async function main() {
  const ref = process.argv[2] ?? 'HEAD~1';
  const { dir, commit } = buildRef(ref);
  const head: Build = { name: 'HEAD', entry: join(REPO, 'dist', 'apps', 'api', 'src', 'main.js') };
  const base: Build = { name: commit, entry: join(dir, 'dist', 'apps', 'api', 'src', 'main.js') };
  try {
    if (!existsSync(base.entry)) throw new Error(`${commit} has no ${base.entry} after its build`);
    await start(head, 'tollgate_bench_ab_head');
    await start(base, 'tollgate_bench_ab_base');
    report(await measure(head, base), commit);
  } finally {
    for (const b of [head, base]) {
      await b.http?.close();
      b.child?.kill('SIGTERM');
    }
    execFileSync('git', ['worktree', 'remove', '--force', dir], { cwd: REPO, stdio: 'ignore' });
    rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
