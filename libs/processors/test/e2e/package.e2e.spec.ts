import { execFileSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';

// @tollgate/processors as another project gets it: built (scripts/build.mjs, the build `npm run pack`
// runs), packed, installed from the tarball in a scratch directory, and used from there.
const ROOT = resolve(__dirname, '../../../..');
const PACKAGE = join(ROOT, 'libs/processors');

const run = (cmd: string, args: string[], cwd: string) =>
  execFileSync(cmd, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

// Loads the package alone: which of its modules and of zod's it loaded, and whether the token
// counter found its rank table beside its compiled code.
const cjsScript = `
const path = require('node:path');
const p = require('@tollgate/processors');
const client = { guard: { check: async () => ({}) }, events: { record() {} } };
const built = [
  new p.TokenLimiterProcessor({ limit: 8000, guard: { client } }),
  new p.CostGuardProcessor({ maxCost: 5, scope: 'resource', window: '24h', client }),
  new p.TokenCostControl({ maxCost: 1 }),
];
const tokens = new p.MessageTokenCounter().countText('hello world, how are you?');
const o200k = require(path.join(path.dirname(require.resolve('@tollgate/processors')), 'token-count/o200k.js'));
console.log(JSON.stringify({
  ids: built.map((b) => b.id),
  tokens,
  ranks: o200k.o200kSource,
  zodLoaded: Object.keys(require.cache).some((f) => /[\\\\/]node_modules[\\\\/]zod[\\\\/]/.test(f)),
}));
`;

// One generate() of a real Mastra Agent with both processors, a model that answers in one step
// and a client that allows every check with a reservation.
const esmScript = `
import { CostGuardProcessor, TokenLimiterProcessor } from '@tollgate/processors';
import { Agent } from '@mastra/core/agent';
import { RequestContext } from '@mastra/core/request-context';

const usage = { inputTokens: { total: 12, noCache: 12, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 4, text: 4, reasoning: 0 } };
const finish = { type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage };
const parts = [{ type: 'stream-start', warnings: [] }, { type: 'text-start', id: 't' }, { type: 'text-delta', id: 't', delta: 'Hello there.' }, { type: 'text-end', id: 't' }, finish];
const model = {
  specificationVersion: 'v3', provider: 'openai.chat', modelId: 'gpt-4o-mini', supportedUrls: {},
  doGenerate: async () => ({ content: [{ type: 'text', text: 'Hello there.' }], finishReason: finish.finishReason, usage, warnings: [] }),
  doStream: async () => ({ stream: new ReadableStream({ start(c) { for (const p of parts) c.enqueue(p); c.close(); } }) }),
};
const checks = [];
const events = [];
const reservation = { id: 'res-1', estimatedCost: 0.01, costUnit: 'USD', inputTokens: 1, outputTokens: 1, expiresAt: new Date(Date.now() + 60_000).toISOString() };
const client = {
  guard: { check: async (r) => (checks.push(r), { decision: 'allow', violations: [], warnings: [], skipped: [], usage: {}, asOf: new Date().toISOString(), reservation }) },
  events: { record: (e) => void events.push(e) },
};
const agent = new Agent({
  id: 'a', name: 'a', instructions: 'Say hello.', model,
  inputProcessors: [new TokenLimiterProcessor({ limit: 1000 }), new CostGuardProcessor({ maxCost: 1, scope: 'resource', client })],
});
const requestContext = new RequestContext();
requestContext.set('mastra__resourceId', 'r1');
const result = await agent.generate('Hi', { requestContext, modelSettings: { maxOutputTokens: 100 } });
console.log(JSON.stringify({
  text: result.text,
  tripwire: result.tripwire ?? null,
  checks: checks.map((c) => ({ resourceId: c.context.resourceId, estimate: c.estimate, reserve: c.reserve })),
  events: events.map((e) => ({ usage: e.usage, reservationId: e.reservationId })),
}));
`;

// Compiled against the installed declarations. The wire types compiled in from libs/contracts are
// inferred from zod's: were zod's types missing, they would be `any` (skipLibCheck hides why) and
// the two @ts-expect-error lines would fail.
const consumerTs = `
import {
  CostGuardProcessor, TokenLimiterProcessor,
  type GuardCheckRequest, type GuardCheckResponse, type GuardLimit, type StepUsageEvent, type TollgateGuardClient,
} from '@tollgate/processors';
declare const client: TollgateGuardClient;
const limits: GuardLimit[] = [{ scope: 'resource', maxCost: 1 }];
export const request: GuardCheckRequest = { context: { runId: 'r' }, limits, reserve: true, stepId: 's',
  estimate: { provider: 'openai', model: 'm', inputTokens: 1, maxOutputTokens: 1 } };
export const decision = (r: GuardCheckResponse): 'allow' | 'deny' => r.decision;
export const eventId = (e: StepUsageEvent): string => e.eventId;
// @ts-expect-error a limit names its scope
export const unscoped: GuardLimit = { maxCost: 1 };
// @ts-expect-error an event names its provider
export const anonymous: StepUsageEvent = { eventId: 'e', occurredAt: 'x', traceId: 't', entityType: 'agent', model: 'm', usage: { inputTokens: 1, outputTokens: 1 } };
export const built = [new CostGuardProcessor({ maxCost: 1, client }), new TokenLimiterProcessor({ limit: 1, guard: { client, limits } })];
`;

describe('@tollgate/processors as a package', () => {
  let scratch: string;
  let app: string;

  beforeAll(() => {
    scratch = mkdtempSync(join(tmpdir(), 'tollgate-processors-'));
    // Built and packed from a copy, so the package's own dist/ is left alone.
    const pkg = join(scratch, 'pkg');
    mkdirSync(pkg);
    for (const f of ['package.json', 'README.md']) copyFileSync(join(PACKAGE, f), join(pkg, f));
    run('node', [join(PACKAGE, 'scripts/build.mjs'), '--out', join(pkg, 'dist')], ROOT);
    const tarball = join(
      scratch,
      JSON.parse(run('npm', ['pack', '--json', '--pack-destination', scratch], pkg))[0].filename,
    );
    app = join(scratch, 'app');
    mkdirSync(app);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'scratch', version: '1.0.0', private: true }));
    run('npm', ['install', tarball, '--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts'], app);
    // @mastra/core (an optional peer) from this repository, as the user's project would have it.
    mkdirSync(join(app, 'node_modules/@mastra'), { recursive: true });
    symlinkSync(dirname(require.resolve('@mastra/core/package.json')), join(app, 'node_modules/@mastra/core'), 'dir');
    writeFileSync(join(app, 'use.cjs'), cjsScript);
    writeFileSync(join(app, 'use.mjs'), esmScript);
    writeFileSync(join(app, 'use.ts'), consumerTs);
  }, 180_000);

  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it('installs with js-tiktoken and zod as its dependencies, the contracts compiled in', () => {
    const installed = join(app, 'node_modules/@tollgate/processors');
    const pkg = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8'));
    expect(Object.keys(pkg.dependencies)).toEqual(['js-tiktoken', 'zod']);
    for (const f of [
      'dist/processors/src/index.js',
      'dist/processors/src/index.d.ts',
      'dist/processors/src/token-count/o200k_base.bpe',
      'dist/contracts/src/guard.d.ts',
      'dist/contracts/src/usage/normalize-usage.js',
    ]) {
      expect([f, existsSync(join(installed, f))]).toEqual([f, true]);
    }
  });

  it('loads from CommonJS without zod, with its rank table', () => {
    expect(JSON.parse(run('node', ['use.cjs'], app))).toEqual({
      ids: ['token-limiter', 'cost-guard', 'token-cost-control'],
      tokens: 7,
      ranks: 'file',
      zodLoaded: false,
    });
  });

  it('guards a Mastra Agent imported from ESM: one check, one record settling its reservation', () => {
    expect(JSON.parse(run('node', ['use.mjs'], app))).toEqual({
      text: 'Hello there.',
      tripwire: null,
      checks: [
        {
          resourceId: 'r1',
          estimate: { provider: 'openai', model: 'gpt-4o-mini', inputTokens: 15, maxOutputTokens: 100 },
          reserve: true,
        },
      ],
      events: [{ usage: { inputTokens: 12, outputTokens: 4 }, reservationId: 'res-1' }],
    });
  }, 60_000);

  it('type-checks a consumer against its declarations, zod-inferred types included', () => {
    const tsc = require.resolve('typescript/bin/tsc');
    const args = ['--noEmit', '--strict', '--skipLibCheck', '--module', 'nodenext', '--moduleResolution'];
    const types = [
      'nodenext',
      '--target',
      'es2022',
      '--types',
      'node',
      '--typeRoots',
      join(ROOT, 'node_modules/@types'),
    ];
    let errors = '';
    try {
      run('node', [tsc, ...args, ...types, 'use.ts'], app);
    } catch (e) {
      errors = String((e as { stdout?: string }).stdout) || String(e);
    }
    expect(errors).toBe('');
  }, 60_000);
});
