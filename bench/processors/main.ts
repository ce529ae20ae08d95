/**
 * TokenLimiterProcessor benchmark: ours against @mastra/core's own, and against ours without its
 * count cache, on a 1,000-message thread that grows by one message per step over 20 steps.
 *
 *   npm run bench:processors
 *
 * Each repetition is one run of a thread: the history is reloaded as new message objects (same
 * ids), as Mastra does from memory, and `processInputStep` is timed at each of 20 steps. Lines:
 * - warm: our processor instance lives across runs of the same thread, so its count cache is warm;
 * - new thread, warm process: a thread never seen (new ids, other text), on a new processor (no
 *   count cached) in a process whose tokenizer is loaded — the common case in a server;
 * - process start-up: a fresh Node process builds the limiter (ours loads the tokenizer then) and
 *   runs one new thread, everything cold; the limiter's own time is measured.
 * Each against Mastra's on the same threads in the same run. Prints medians and ratios; asserts nothing.
 */
import { MessageList } from '@mastra/core/agent/message-list';
import { TokenLimiterProcessor as MastraTokenLimiter } from '@mastra/core/processors';
import { getEncoding } from 'js-tiktoken';
import { execFileSync } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { TokenLimiterProcessor, TOKENS_PER_MESSAGE } from '../../libs/processors/src';
import { costGuardOverhead } from './cost-guard-overhead';

const HISTORY = 1_000;
const STEPS = 20;
const REPETITIONS = Number(process.env.BENCH_REPETITIONS ?? 5);
const STARTUP_RUNS = Number(process.env.BENCH_STARTUP_RUNS ?? 5);
const CASES = [
  { name: 'keeps everything', limit: 10_000_000 },
  { name: 'trims to 20,000', limit: 20_000 },
];

/** Deterministic pseudo-random numbers, so every run benchmarks the same thread. */
function prng(seed: number) {
  return () => {
    seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
    return seed / 2_147_483_648;
  };
}

const WORDS = (
  'the invoice for march was paid twice so we need a refund of 1,250.00 EUR to account FR76 3000 6000 0112 3456 7890 189 ' +
  'please check the order status: shipped via DHL, tracking JD014600006254123456, ETA 3 days; customer asked about café opening hours ' +
  'and whether the naïve approach to caching is fine — it is not 😅 because keys collide when ids are reused across tenants'
).split(' ');

interface Template {
  id: string;
  role: 'user' | 'assistant';
  content: { format: 2; parts: Array<Record<string, unknown>> };
  createdAt: Date;
}

function makeThread(count: number, seed = 42, prefix = 'bench'): Template[] {
  const random = prng(seed);
  const sentence = (n: number) => Array.from({ length: n }, () => WORDS[Math.floor(random() * WORDS.length)]).join(' ');
  const start = Date.UTC(2025, 0, 1);
  return Array.from({ length: count }, (_, i) => {
    const id = `${prefix}-msg-${i}`;
    const createdAt = new Date(start + i * 1_000);
    if (i % 10 === 9) {
      const args = { query: sentence(6), limit: 5 };
      const result = { hits: Array.from({ length: 3 }, () => ({ title: sentence(5), snippet: sentence(20) })) };
      const toolInvocation = {
        state: 'result',
        toolCallId: `call-${i}`,
        toolName: 'searchKnowledgeBase',
        args,
        result,
      };
      return {
        id,
        role: 'assistant',
        createdAt,
        content: { format: 2, parts: [{ type: 'tool-invocation', toolInvocation }] },
      };
    }
    const role = i % 2 === 0 ? 'user' : 'assistant';
    return {
      id,
      role,
      createdAt,
      content: { format: 2, parts: [{ type: 'text', text: sentence(20 + Math.floor(random() * 120)) }] },
    };
  });
}

interface Limiter {
  processInputStep(args: never): Promise<unknown>;
}

/** One run: reload the history, then time processInputStep at each of the 20 steps. */
async function timeRun(limiter: Limiter, history: Template[], extra: Template[], prefix = 'bench'): Promise<number> {
  const list = new MessageList({ threadId: 'bench-thread', resourceId: 'bench-user' });
  list.addSystem('You are a support agent. Answer briefly and cite the knowledge base.');
  list.add(structuredClone(history) as never, 'memory');
  let elapsed = 0;
  for (let step = 0; step < STEPS; step++) {
    list.add({ ...structuredClone(extra[step]!), id: `${prefix}-${extra[step]!.id}` } as never, 'input');
    const args = {
      messages: list.get.all.db(),
      messageList: list,
      systemMessages: list.getAllSystemMessages(),
      stepNumber: step,
      steps: [],
      state: {},
      retryCount: 0,
      abort: (reason?: string) => {
        throw new Error(reason);
      },
    };
    const t0 = performance.now();
    await limiter.processInputStep(args as never);
    elapsed += performance.now() - t0;
  }
  return elapsed;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const ms = (x: number) => `${x.toFixed(1)} ms`;

/** How far each counter is from exact o200k counts, over the text messages of the thread. */
async function accuracy(history: Template[]) {
  const o200k = getEncoding('o200k_base');
  const exact = (s: string) => o200k.encode(s, [], []).length;
  const ours = new TokenLimiterProcessor({ limit: 1, countCache: false });
  const mastra = new MastraTokenLimiter({ limit: 1 });
  const MASTRA_TOKENS_PER_MESSAGE = 3.8; // Mastra's fixed framing per message (token-limiter.ts)
  let exactOurs = 0,
    estOurs = 0,
    exactMastra = 0,
    estMastra = 0,
    worstOurs = 0,
    worstMastra = 0;
  for (const m of history) {
    const part = m.content.parts[0]!;
    if (part.type !== 'text') continue;
    const body = part.text as string;
    // Ours encodes role and text as the separate segments they are in the prompt.
    const e1 = exact(m.role) + exact(body);
    const o = ours.counter.countMessage(m as never) - TOKENS_PER_MESSAGE;
    // Mastra estimates role and text joined as one string.
    const e2 = exact(m.role + body);
    const t = (await mastra.countMessage(m as never)) - MASTRA_TOKENS_PER_MESSAGE;
    exactOurs += e1;
    estOurs += o;
    exactMastra += e2;
    estMastra += t;
    worstOurs = Math.max(worstOurs, Math.abs(o - e1) / e1);
    worstMastra = Math.max(worstMastra, Math.abs(t - e2) / e2);
  }
  const pct = (x: number) => `${(x * 100).toFixed(2)}%`;
  console.log('\nAccuracy against exact o200k_base counts (text messages, framing excluded):');
  console.log(
    `  ours    total ${estOurs} vs exact ${exactOurs}: ${pct((estOurs - exactOurs) / exactOurs)} off, worst message ${pct(worstOurs)}`,
  );
  console.log(
    `  mastra  total ${estMastra.toFixed(0)} vs exact ${exactMastra}: ${pct((estMastra - exactMastra) / exactMastra)} off, worst message ${pct(worstMastra)}`,
  );
}

/** The follow-up messages added one per step. */
function followUps(thread: Template[]): Template[] {
  return thread.slice(HISTORY).map(
    (m, i) =>
      ({
        ...m,
        role: 'user',
        content: {
          format: 2,
          parts: [{ type: 'text', text: `Follow-up ${i}: ${(m.content.parts[0]!.text as string) ?? 'and then?'}` }],
        },
      }) as Template,
  );
}

/**
 * Child mode (`--startup ours|mastra LIMIT`): what a fresh process pays for its first run: the
 * limiter's construction (ours loads its tokenizer then: the o200k rank table file) plus its
 * 20 `processInputStep` calls, cold. Module code is loaded first for both (a Mastra app has
 * loaded @mastra/core; ours reads the rank table only when a limiter is built). Prints the milliseconds.
 */
async function startup(which: string, limit: number) {
  const thread = makeThread(HISTORY + STEPS, 7, 'startup');
  const t0 = performance.now();
  const limiter: Limiter =
    which === 'ours'
      ? // eslint-disable-next-line @typescript-eslint/no-require-imports
        new (require('../../libs/processors/src') as typeof import('../../libs/processors/src')).TokenLimiterProcessor({
          limit,
        })
      : // eslint-disable-next-line @typescript-eslint/no-require-imports
        new (require('@mastra/core/processors') as typeof import('@mastra/core/processors')).TokenLimiterProcessor({
          limit,
        });
  const constructed = performance.now() - t0;
  // The limiter's own time: building it (ours loads the tokenizer then) and its 20 steps.
  const steps = await timeRun(limiter, thread.slice(0, HISTORY), followUps(thread), 'startup');
  if (process.env.BENCH_DEBUG) console.error(`${which}: construct ${ms(constructed)}, steps ${ms(steps)}`);
  process.stdout.write(String(constructed + steps));
}

/** Median start-up time of each limiter over `runs` fresh processes, interleaved. */
function startupTimes(limit: number, runs: number) {
  const times = { ours: [] as number[], mastra: [] as number[] };
  for (let i = 0; i < runs; i++) {
    for (const which of ['mastra', 'ours'] as const) {
      const out = execFileSync(process.execPath, [__filename, '--startup', which, String(limit)], { encoding: 'utf8' });
      times[which].push(Number(out));
    }
  }
  return times;
}

async function main() {
  const thread = makeThread(HISTORY + STEPS);
  const history = thread.slice(0, HISTORY);
  const extra = followUps(thread);
  console.log(
    `TokenLimiterProcessor.processInputStep — ${HISTORY} history messages, +1 message per step, ${STEPS} steps, ${REPETITIONS} runs of the same thread`,
  );
  console.log(`Node ${process.version}, @mastra/core ${require('@mastra/core/package.json').version}\n`);

  for (const { name, limit } of CASES) {
    const ours = new TokenLimiterProcessor({ limit });
    const uncached = new TokenLimiterProcessor({ limit, countCache: false });
    const mastra = new MastraTokenLimiter({ limit });
    // Warm-up: load the encoder and JIT both code paths on a throwaway thread.
    const warm = makeThread(50).map((m) => ({ ...m, id: `warm-${m.id}` }));
    await timeRun(new TokenLimiterProcessor({ limit, countCache: false }), warm, extra);
    await timeRun(new MastraTokenLimiter({ limit }), warm, extra);

    const times = {
      ours: [] as number[],
      uncached: [] as number[],
      mastra: [] as number[],
      fresh: [] as number[],
      mastraFresh: [] as number[],
    };
    for (let rep = 0; rep < REPETITIONS; rep++) {
      // Interleaved, so drift in machine load hits all alike.
      times.mastra.push(await timeRun(mastra, history, extra));
      times.ours.push(await timeRun(ours, history, extra));
      times.uncached.push(await timeRun(uncached, history, extra));
      // A thread this process has never seen, on a new processor: nothing counted yet.
      const other = makeThread(HISTORY + STEPS, 1_000 + rep, `thread-${rep}`);
      const [otherHistory, otherExtra] = [other.slice(0, HISTORY), followUps(other)];
      times.mastraFresh.push(
        await timeRun(new MastraTokenLimiter({ limit }), otherHistory, otherExtra, `thread-${rep}`),
      );
      times.fresh.push(await timeRun(new TokenLimiterProcessor({ limit }), otherHistory, otherExtra, `thread-${rep}`));
    }
    const start = startupTimes(limit, STARTUP_RUNS);
    const m = median(times.mastra),
      o = median(times.ours),
      u = median(times.uncached),
      cold = times.ours[0]!;
    const f = median(times.fresh),
      mf = median(times.mastraFresh),
      so = median(start.ours),
      sm = median(start.mastra);
    const kept = await (async () => {
      const list = new MessageList();
      list.addSystem('You are a support agent. Answer briefly and cite the knowledge base.');
      list.add(structuredClone(history) as never, 'memory');
      await ours.processInputStep({
        messageList: list,
        messages: [],
        abort: () => {
          throw new Error('abort');
        },
      } as never);
      return list.get.all.db().length;
    })();
    console.log(
      `Case: ${name} (limit ${limit.toLocaleString('en-US')}; ours keeps ${kept} of ${HISTORY} history messages)`,
    );
    console.log(`  @mastra/core TokenLimiterProcessor  median ${ms(m)}   runs: ${times.mastra.map(ms).join(', ')}`);
    console.log(
      `  ours (count cache)                  median ${ms(o)}   runs: ${times.ours.map(ms).join(', ')}   (first run, cold cache: ${ms(cold)})`,
    );
    console.log(`  ours (cache disabled)               median ${ms(u)}   runs: ${times.uncached.map(ms).join(', ')}`);
    console.log(
      `  ratio ours/mastra ${(o / m).toFixed(3)}×   cold ours/mastra ${(cold / m).toFixed(3)}×   uncached/mastra ${(u / m).toFixed(3)}×`,
    );
    console.log(
      `  new thread, warm process:  ours median ${ms(f)} vs mastra ${ms(mf)}   ratio ${(f / mf).toFixed(3)}×   runs: ${times.fresh.map(ms).join(', ')}`,
    );
    console.log(
      `  process start-up:          ours median ${ms(so)} vs mastra ${ms(sm)}   ratio ${(so / sm).toFixed(3)}×   runs: ${start.ours.map(ms).join(', ')}\n`,
    );
  }
  await accuracy(history);
  await costGuardOverhead();
}

const entry = process.argv[2] === '--startup' ? () => startup(process.argv[3]!, Number(process.argv[4])) : main;
entry().catch((error) => {
  console.error(error);
  process.exit(1);
});
