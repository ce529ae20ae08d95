/**
 * What a cost guard adds to each step of an agent run: ours in exact mode (check + reserve before
 * the step, record + settle after it, against a real Tollgate service on this machine) against
 * `@mastra/core`'s TokenCostControl on its default store (InMemoryStore), in the same run.
 *
 * A 5-step agent (4 tool calls, then the answer) on an instant mock model and an instant tool, so
 * what is timed is the agent loop and the guard. Agents registered with Mastra instances: no guard
 * (the baseline), Mastra's guard, ours, and ours with `checkAhead: false` (each step's check on
 * that step's path, to show what checking ahead during the tools saves). Mastra's guard reads
 * the metrics an observability exporter writes; none runs here, so the bench writes each of its
 * runs' step metrics into the store itself (untimed), and Mastra's guard is measured twice: on a
 * store holding only those, and on one prefilled with BENCH_MASTRA_PREFILL_STEPS steps of other
 * resources (default 10,000: the InMemoryStore scans every metric per query, so its cost grows
 * with the store). After
 * BENCH_GUARD_WARMUP_ROUNDS rounds of every agent (default 25: a server's guard runs warm; they
 * write no metrics, so Mastra's stores hold what they would without them), rounds are
 * interleaved so that drift in machine load hits all alike; a guard's overhead per step is (its
 * run − the baseline run) ÷ steps, medians over the rounds. Also printed: the time spent inside
 * each guard's own hooks per step, and our round trips per step.
 *
 * The service runs as its own process from a built tree: TOLLGATE_DIST (default `dist`, built with
 * `npm run build`, or `tsc -p tsconfig.build.json --outDir <dir>` + tsc-alias), on
 * BENCH_DATABASE_URL (default: a database of its own, dropped before and after). Prints; asserts nothing.
 */
import { Agent } from '@mastra/core/agent';
import { Mastra } from '@mastra/core/mastra';
import { TokenCostControl as MastraTokenCostControl } from '@mastra/core/processors';
import { RequestContext } from '@mastra/core/request-context';
import { InMemoryStore } from '@mastra/core/storage';
import { createTool } from '@mastra/core/tools';
import { MockLanguageModelV3 } from 'ai/test';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Client } from 'pg';
import { z } from 'zod';
import { CostGuardProcessor, type TollgateGuardClient } from '../../libs/processors/src';
import { pooledFetch, TollgateClient, type FetchLike } from '../../libs/sdk/src';
import {
  BENCH_ADMIN_TOKEN,
  createBenchProject,
  freePort,
  median,
  resetDatabase,
  serviceNodeFlags,
} from '../support/harness';

// Its own database per run (dropped after), so that two runs at once never drop each other's.
const DB =
  process.env.BENCH_DATABASE_URL ?? `postgresql://postgres@127.0.0.1:5432/tollgate_bench_cost_guard_${process.pid}`;
const DIST = resolve(process.env.TOLLGATE_DIST ?? 'dist');
const ROUNDS = Number(process.env.BENCH_GUARD_ROUNDS ?? 9);
const RUNS_PER_ROUND = Number(process.env.BENCH_GUARD_RUNS ?? 8);
const STEPS = 5;
const WARMUP_ROUNDS = Number(process.env.BENCH_GUARD_WARMUP_ROUNDS ?? 25);
const PREFILL_STEPS = Number(process.env.BENCH_MASTRA_PREFILL_STEPS ?? 10_000);

const usage = {
  inputTokens: { total: 120, noCache: 120, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 30, text: 30, reasoning: 0 },
};

/** An instant model: four tool calls, then the answer, one per call. */
function model() {
  let call = 0;
  return new MockLanguageModelV3({
    provider: 'openai',
    modelId: 'gpt-4o',
    doGenerate: async () => {
      const n = call++ % STEPS;
      if (n < STEPS - 1) {
        return {
          content: [
            {
              type: 'tool-call',
              toolCallId: `call-${call}`,
              toolName: 'lookup',
              input: JSON.stringify({ q: `q${n}` }),
            },
          ],
          finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
          usage,
          warnings: [],
        } as never;
      }
      return {
        content: [{ type: 'text', text: 'Done.' }],
        finishReason: { unified: 'stop', raw: 'stop' },
        usage,
        warnings: [],
      } as never;
    },
  });
}

const lookup = createTool({
  id: 'lookup',
  description: 'Looks something up',
  inputSchema: z.object({ q: z.string() }),
  execute: async () => ({ found: 'yes' }),
});

/** Time spent inside a processor's own hooks, summed, and per hook. */
function timed<T extends object>(
  processor: T,
  hooks: string[],
): { processor: T; ms: () => number; byHook: Record<string, number>; reset: () => void } {
  let total = 0;
  const byHook: Record<string, number> = {};
  for (const hook of hooks) {
    const original = (processor as Record<string, unknown>)[hook];
    if (typeof original !== 'function') continue;
    (processor as Record<string, unknown>)[hook] = async (...args: unknown[]) => {
      const t0 = performance.now();
      try {
        return await (original as (...a: unknown[]) => unknown).apply(processor, args);
      } finally {
        const spent = performance.now() - t0;
        total += spent;
        byHook[hook] = (byHook[hook] ?? 0) + spent;
      }
    };
  }
  return { processor, ms: () => total, byHook, reset: () => (total = 0) };
}

/** The client's transport (the SDK's default, pooledFetch), counting the requests sent per route. */
function countingFetch(): {
  fetch: FetchLike;
  requests: (path: string) => number;
  close: () => void;
  reset: () => void;
} {
  const inner = pooledFetch();
  const counts = new Map<string, number>();
  const fetch: FetchLike = (url, init) => {
    const path = new URL(url).pathname;
    counts.set(path, (counts.get(path) ?? 0) + 1);
    return inner(url, init);
  };
  return { fetch, requests: (path) => counts.get(path) ?? 0, close: () => inner.close(), reset: () => counts.clear() };
}

/** Counts the flushes our guard waits on or starts, and times its checks and flushes as it sees them. */
function counting(client: TollgateClient): {
  client: TollgateGuardClient;
  flushes: () => number;
  /** Checks sent ahead of their step (tentative), while the step before ran its tools. */
  ahead: () => number;
  /** Median wall time of a guard check, and of a flush, in the rounds since the last reset. */
  checkMs: () => number;
  flushMs: () => number;
  reset: () => void;
} {
  let flushes = 0;
  let ahead = 0;
  let checks: number[] = [];
  let flushTimes: number[] = [];
  const timedCall = async <T>(into: number[], call: () => Promise<T>): Promise<T> => {
    const t0 = performance.now();
    try {
      return await call();
    } finally {
      into.push(performance.now() - t0);
    }
  };
  const wrapped: TollgateGuardClient = {
    guard: {
      check: (request, options) => {
        if (request.tentative) ahead++;
        return timedCall(checks, () => client.guard.check(request as never, options) as never);
      },
      release: (id) => client.guard.release(id),
    },
    events: {
      record: (event) => client.events.record(event as never),
      flush: () => {
        flushes++;
        return timedCall(flushTimes, () => client.events.flush());
      },
    },
  };
  return {
    client: wrapped,
    flushes: () => flushes,
    ahead: () => ahead,
    checkMs: () => (checks.length ? median(checks) : NaN),
    flushMs: () => (flushTimes.length ? median(flushTimes) : NaN),
    reset: () => {
      flushes = 0;
      ahead = 0;
      checks = [];
      flushTimes = [];
    },
  };
}

async function startService(env: Record<string, string>): Promise<{ url: string; stop: () => Promise<void> }> {
  const port = await freePort();
  const child = spawn(process.execPath, [...serviceNodeFlags(), resolve(DIST, 'apps/api/src/main.js')], {
    env: {
      ...process.env,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      TOLLGATE_ADMIN_TOKEN: BENCH_ADMIN_TOKEN,
      QUEUE_PREFIX: `bench-${randomUUID().slice(0, 8)}`,
      ...env,
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 300; i++) {
    if (child.exitCode !== null) throw new Error(`service exited with ${child.exitCode} (is ${DIST} built?)`);
    try {
      if ((await fetch(`${url}/health/ready`)).ok) break;
    } catch {
      /* not up yet */
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const stop = () =>
    new Promise<void>((done) => {
      if (child.exitCode !== null) return done();
      child.once('exit', () => done());
      child.kill('SIGTERM');
    });
  return { url, stop };
}

const ms = (x: number) => `${x.toFixed(2)} ms`;

async function analyze(url: string): Promise<void> {
  const db = new Client({ connectionString: url });
  await db.connect();
  try {
    await db.query('ANALYZE');
  } finally {
    await db.end();
  }
}

type ObservabilityStore = { batchCreateMetrics(args: { metrics: unknown[] }): Promise<void> };
let metricSeq = 0;
/** The two token metrics Mastra's exporters write per model call, with their estimated cost. */
function stepMetrics(resourceId: string, traceId: string, steps: number): unknown[] {
  const timestamp = new Date();
  return Array.from({ length: steps }, (_, i) =>
    (['mastra_model_total_input_tokens', 'mastra_model_total_output_tokens'] as const).map((name) => ({
      metricId: `bench-${++metricSeq}`,
      name,
      metricType: 'counter',
      value: name.includes('input') ? 120 : 30,
      timestamp,
      traceId,
      spanId: `${traceId}-${i}`,
      entityType: 'agent',
      entityName: 'mastra',
      resourceId,
      provider: 'openai',
      model: 'gpt-4o',
      estimatedCost: name.includes('input') ? 0.0003 : 0.0003,
      costUnit: 'USD',
      labels: {},
    })),
  ).flat();
}

/** The cost guard's line of `npm run bench:processors`. */
export async function costGuardOverhead(): Promise<void> {
  console.log(
    `\nCostGuardProcessor overhead per step, exact mode (check + reserve + record + settle, local service) vs @mastra/core TokenCostControl on InMemoryStore`,
  );
  console.log(
    `  ${STEPS}-step agent with a tool, instant mock model; ${ROUNDS} interleaved rounds of ${RUNS_PER_ROUND} runs per agent`,
  );
  if (!existsSync(resolve(DIST, 'apps/api/src/main.js'))) {
    console.log(
      `  skipped: no built service at ${resolve(DIST, 'apps/api/src/main.js')} (npm run build first, or set TOLLGATE_DIST to a built tree)`,
    );
    return;
  }
  await resetDatabase(DB);
  const svc = await startService({
    DATABASE_URL: DB,
    RATE_LIMIT_PER_KEY_PER_SECOND: '1000000',
    RATE_LIMIT_BURST: '1000000',
  });
  const sdk = { client: undefined as TollgateClient | undefined, ownPath: undefined as TollgateClient | undefined };
  try {
    const project = await createBenchProject(svc.url);
    const price = await fetch(`${svc.url}/v1/prices/openai/gpt-4o`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${project.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        inputPerMillion: 2.5,
        outputPerMillion: 10,
        effectiveFrom: new Date(Date.now() - 60_000).toISOString(),
      }),
    });
    if (!price.ok) throw new Error(`price: ${price.status} ${await price.text()}`);
    const transport = countingFetch();
    sdk.client = new TollgateClient({ baseUrl: svc.url, apiKey: project.key, fetch: transport.fetch });
    sdk.ownPath = new TollgateClient({ baseUrl: svc.url, apiKey: project.key });
    const ours = counting(sdk.client);
    const oursGuard = timed(
      new CostGuardProcessor({ maxCost: 1_000, client: ours.client, logger: { warn: () => undefined } }),
      ['processInputStep', 'processLLMResponse', 'processAPIError'],
    );
    // The same guard with each step's check on that step's path (no check ahead during the tools).
    const ownPathGuard = timed(
      new CostGuardProcessor({
        maxCost: 1_000,
        client: sdk.ownPath,
        checkAhead: false,
        logger: { warn: () => undefined },
      }),
      ['processInputStep', 'processLLMResponse', 'processAPIError'],
    );
    // Ours against a client that answers at once: the processor's own work, without the service.
    const instant: TollgateGuardClient = {
      guard: {
        check: async () => ({
          decision: 'allow',
          violations: [],
          warnings: [],
          skipped: [],
          usage: {},
          reservation: { id: 'rsv', estimatedCost: 0, costUnit: 'USD', inputTokens: 0, outputTokens: 0, expiresAt: '' },
          asOf: '',
        }),
        release: async () => undefined,
      },
      events: { record: () => undefined, flush: async () => undefined },
    };
    const localGuard = timed(
      new CostGuardProcessor({ maxCost: 1_000, client: instant, logger: { warn: () => undefined } }),
      ['processInputStep', 'processLLMResponse', 'processAPIError'],
    );
    const mastraGuard = timed(new MastraTokenCostControl({ maxCost: 1_000 }), ['processInputStep']);
    const busyGuard = timed(new MastraTokenCostControl({ maxCost: 1_000 }), ['processInputStep']);
    const agent = (id: string, inputProcessors: unknown[] = []) =>
      new Agent({
        id,
        name: id,
        instructions: 'Use the lookup tool.',
        model: model(),
        tools: { lookup },
        inputProcessors: inputProcessors as never,
      });
    const own = new InMemoryStore();
    const busy = new InMemoryStore();
    const mastra = new Mastra({
      agents: {
        baseline: agent('baseline'),
        mastra: agent('mastra', [mastraGuard.processor]),
        ours: agent('ours', [oursGuard.processor]),
        ownPath: agent('ownPath', [ownPathGuard.processor]),
        local: agent('local', [localGuard.processor]),
      },
      storage: own,
      logger: false,
    });
    const mastraBusy = new Mastra({
      agents: { mastra: agent('mastra', [busyGuard.processor]) },
      storage: busy,
      logger: false,
    });
    const stores = {
      mastra: own.stores.observability as unknown as ObservabilityStore,
      busy: busy.stores.observability as unknown as ObservabilityStore,
    };
    for (let i = 0; i < PREFILL_STEPS; i += 1_000)
      await stores.busy.batchCreateMetrics({
        metrics: stepMetrics(`other-${i % 97}`, `prefill-${i}`, Math.min(1_000, PREFILL_STEPS - i)),
      });
    const registered = {
      baseline: mastra.getAgent('baseline'),
      mastra: mastra.getAgent('mastra'),
      busy: mastraBusy.getAgent('mastra'),
      ours: mastra.getAgent('ours'),
      ownPath: mastra.getAgent('ownPath'),
      local: mastra.getAgent('local'),
    };
    type Name = keyof typeof registered;
    const storeOf: Partial<Record<Name, ObservabilityStore>> = { mastra: stores.mastra, busy: stores.busy };

    /** Runs the agent RUNS_PER_ROUND times; the time of each run's metric writes (the exporter's job) is left out. */
    const runAll = async (name: Name, warmUp = false): Promise<number> => {
      let elapsed = 0;
      for (let i = 0; i < RUNS_PER_ROUND; i++) {
        const resourceId = `bench-${randomUUID()}`;
        const requestContext = new RequestContext();
        requestContext.set('mastra__resourceId', resourceId);
        const t0 = performance.now();
        const result = await registered[name].generate('Look it up four times.', {
          maxSteps: STEPS + 1,
          requestContext,
          modelSettings: { maxOutputTokens: 500 },
        });
        elapsed += performance.now() - t0;
        if (result.tripwire || result.steps.length !== STEPS)
          throw new Error(`run ended after ${result.steps.length} steps: ${JSON.stringify(result.tripwire)}`);
        // The warm-up's runs leave Mastra's stores as they were: each line reads what it did before.
        if (!warmUp) await storeOf[name]?.batchCreateMetrics({ metrics: stepMetrics(resourceId, randomUUID(), STEPS) });
      }
      return elapsed;
    };

    // Warm-up, every agent alike: JIT (of this process and of the service: a server's guard runs
    // warm), connections, the tokenizer, the service's caches.
    for (let w = 0; w < WARMUP_ROUNDS; w++)
      for (const name of Object.keys(registered) as Name[]) await runAll(name, true);
    // Statistics as a running deployment keeps them (the worker's TableStatistics, every minute, or
    // autovacuum): the API process alone, as here, never takes them, and the plans its connections
    // made on the near-empty tables of its first requests would walk every reservation of the
    // project on every settlement. ANALYZE makes each connection plan its statements again.
    await analyze(DB);
    const perStep: Record<Name, number[]> = { baseline: [], mastra: [], busy: [], ours: [], ownPath: [], local: [] };
    const hooks: Record<Name, number[]> = { baseline: [], mastra: [], busy: [], ours: [], ownPath: [], local: [] };
    const hookTimers: Partial<Record<Name, { ms: () => number; reset: () => void }>> = {
      mastra: mastraGuard,
      busy: busyGuard,
      ours: oursGuard,
      ownPath: ownPathGuard,
      local: localGuard,
    };
    ours.reset();
    transport.reset();
    const steps = RUNS_PER_ROUND * STEPS;
    for (let round = 0; round < ROUNDS; round++) {
      const order: Name[] =
        round % 2 === 0
          ? ['baseline', 'mastra', 'busy', 'ours', 'ownPath', 'local']
          : ['local', 'ownPath', 'ours', 'busy', 'mastra', 'baseline'];
      for (const name of order) {
        hookTimers[name]?.reset();
        perStep[name].push((await runAll(name)) / steps);
        hooks[name].push((hookTimers[name]?.ms() ?? 0) / steps);
      }
    }
    const base = median(perStep.baseline);
    const added = (name: Name) => median(perStep[name].map((x, i) => x - perStep.baseline[i]!));
    const totalSteps = ROUNDS * steps;
    const oursAdded = added('ours');
    const oursHook = median(hooks.ours);
    console.log(`  no guard (baseline)                                   median ${ms(base)} per step`);
    for (const [name, label] of [
      ['mastra', `@mastra/core TokenCostControl, its runs' metrics only`],
      ['busy', `@mastra/core TokenCostControl, +${PREFILL_STEPS.toLocaleString('en-US')} steps stored`],
    ] as const) {
      console.log(`  ${label.padEnd(54)}adds ${ms(added(name))} per step   (in its hook: ${ms(median(hooks[name]))})`);
    }
    console.log(
      `  ${'ours, exact (TollgateClient, local service)'.padEnd(54)}adds ${ms(oursAdded)} per step   (in its hooks: ${ms(oursHook)}; per step ${(transport.requests('/v1/guard/check') / totalSteps).toFixed(2)} guard checks, ${(ours.ahead() / totalSteps).toFixed(2)} of them sent ahead during the tools; ${(transport.requests('/v1/events') / totalSteps).toFixed(2)} event requests, ${(ours.flushes() / totalSteps).toFixed(2)} flushes, each run's last awaited)`,
    );
    console.log(
      `  ${''.padEnd(54)}a guard check takes ${ms(ours.checkMs())} from request to answer, a run's last flush ${ms(ours.flushMs())} (medians)`,
    );
    console.log(
      `  ${'ours, each step checked on its path (checkAhead off)'.padEnd(54)}adds ${ms(added('ownPath'))} per step   (in its hooks: ${ms(median(hooks.ownPath))}; check ahead saves ${ms(added('ownPath') - oursAdded)} per step)`,
    );
    console.log(
      `  ${'ours, against a client that answers at once'.padEnd(54)}adds ${ms(added('local'))} per step   (in its hooks: ${ms(median(hooks.local))}: the processor's own work)`,
    );
    // The hooks' totals run from the warm-up on: its rounds of steps too.
    const perHook = Object.entries(oursGuard.byHook).map(
      ([hook, total]) => `${hook} ${ms(total / (totalSteps + WARMUP_ROUNDS * steps))}`,
    );
    console.log(`  ours per hook and step, mean over every round and the warm-up: ${perHook.join(', ')}`);
    for (const name of ['mastra', 'busy'] as const) {
      console.log(
        `  ratio ours/mastra (${name === 'mastra' ? "its runs' metrics" : 'prefilled store'})  added per step ${(oursAdded / added(name)).toFixed(3)}×   in-hook ${(oursHook / median(hooks[name])).toFixed(3)}×   (target ≤ 1.0)`,
      );
    }
  } finally {
    await sdk.client?.shutdown();
    await sdk.ownPath?.shutdown();
    await svc.stop();
    if (!process.env.BENCH_DATABASE_URL) await resetDatabase(DB);
  }
}
