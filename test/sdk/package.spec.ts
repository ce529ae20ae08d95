import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createProject } from '../support/http';
import { startService, type RunningService } from '../support/service';
import { ROOT, countEvents } from './support';

const run = (cmd: string, args: string[], cwd: string, env: Record<string, string> = {}) =>
  execFileSync(cmd, args, {
    cwd,
    env: { ...process.env, ...env },
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });

// Asynchronous: the service under test runs in this process and must answer meanwhile.
const runAsync = async (args: string[], cwd: string, env: Record<string, string>) =>
  (await promisify(execFile)('node', args, { cwd, env: { ...process.env, ...env }, encoding: 'utf8' })).stdout;

const cjsScript = `
const { TollgateClient, TollgateError } = require('@tollgate/sdk');
const client = new TollgateClient({ baseUrl: process.env.TOLLGATE_URL, apiKey: process.env.TOLLGATE_KEY });
let field;
try { client.events.record({ traceId: 't', entityType: 'agent', provider: 'openai', model: 'gpt-4o', usage: { inputTokens: -1, outputTokens: 0 } }); }
catch (e) { field = e instanceof TollgateError ? e.field : 'not a TollgateError'; }
for (let i = 0; i < 3; i++) client.events.record({ traceId: 'cjs', entityType: 'agent', provider: 'openai', model: 'gpt-4o', usage: { inputTokens: 10, outputTokens: 1 } });
client.shutdown().then(() => console.log(JSON.stringify({ field, accepted: client.events.stats.accepted })));
`;

const esmScript = `
import { TollgateClient } from '@tollgate/sdk';
const client = new TollgateClient({ baseUrl: process.env.TOLLGATE_URL, apiKey: process.env.TOLLGATE_KEY });
for (let i = 0; i < 2; i++) client.events.record({ traceId: 'esm', entityType: 'agent', provider: 'openai', model: 'gpt-4o', usage: { inputTokens: 10, outputTokens: 1 } });
await client.shutdown();
const guard = await new TollgateClient({ baseUrl: 'http://127.0.0.1:9', apiKey: 'k', guard: { retries: 0 } }).guard.check({ context: { runId: 'r' }, failMode: 'closed' });
console.log(JSON.stringify({ accepted: client.events.stats.accepted, decision: guard.decision }));
`;

describe('@tollgate/sdk as a package', () => {
  let svc: RunningService;
  let scratch: string;

  beforeAll(async () => {
    svc = await startService();
    scratch = mkdtempSync(join(tmpdir(), 'tollgate-sdk-'));
    run('node', [join(ROOT, 'libs/sdk/scripts/build.mjs')], ROOT);
    const packed = run('npm', ['pack', '--json', '--pack-destination', scratch], join(ROOT, 'libs/sdk'));
    const tarball = join(scratch, JSON.parse(packed)[0].filename);
    writeFileSync(join(scratch, 'package.json'), JSON.stringify({ name: 'scratch', version: '1.0.0', private: true }));
    run('npm', ['install', tarball, '--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts'], scratch);
  }, 180_000);

  afterAll(async () => {
    await svc.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  it('installs with zod as its only dependency, without NestJS, Prisma or Mastra', () => {
    const pkg = JSON.parse(readFileSync(join(scratch, 'node_modules/@tollgate/sdk/package.json'), 'utf8'));
    expect(Object.keys(pkg.dependencies)).toEqual(['zod']);
    expect(existsSync(join(scratch, 'node_modules/zod'))).toBe(true);
    for (const absent of ['@nestjs/core', '@prisma/client', '@mastra/core'])
      expect(existsSync(join(scratch, 'node_modules', absent))).toBe(false);
    // Declarations ship for both builds, and the contracts are compiled in, not referenced.
    for (const f of [
      'dist/cjs/sdk/src/index.d.ts',
      'dist/esm/sdk/src/index.d.ts',
      'dist/cjs/contracts/src/step-event.js',
      'dist/esm/sdk/src/mastra/index.js',
      'dist/esm/sdk/src/ai-sdk/index.js',
      'dist/cjs/sdk/src/ai-sdk/index.d.ts',
    ]) {
      expect(existsSync(join(scratch, 'node_modules/@tollgate/sdk', f))).toBe(true);
    }
  });

  it('works from plain JavaScript with require and with import', async () => {
    const project = await createProject(svc.url, ['ingest']);
    const env = { TOLLGATE_URL: svc.url, TOLLGATE_KEY: project.key };
    writeFileSync(join(scratch, 'use.cjs'), cjsScript);
    writeFileSync(join(scratch, 'use.mjs'), esmScript);
    expect(JSON.parse(await runAsync(['use.cjs'], scratch, env))).toEqual({ field: 'usage.inputTokens', accepted: 3 });
    expect(JSON.parse(await runAsync(['use.mjs'], scratch, env))).toEqual({ accepted: 2, decision: 'deny' });
    expect(await countEvents(project.id)).toBe(5);
  });

  it('loads @tollgate/sdk/ai-sdk with require and import, without the ai package installed', () => {
    expect(existsSync(join(scratch, 'node_modules/ai'))).toBe(false);
    writeFileSync(
      join(scratch, 'ai-sdk.cjs'),
      `const m = require('@tollgate/sdk/ai-sdk'); console.log(typeof m.tollgateMiddleware, new m.TollgateGuardDeniedError({ decision: 'deny', violations: [], reason: 'x' }).code);`,
    );
    writeFileSync(
      join(scratch, 'ai-sdk.mjs'),
      `import { tollgateMiddleware } from '@tollgate/sdk/ai-sdk'; import { TollgateClient } from '@tollgate/sdk'; const mw = tollgateMiddleware({ client: new TollgateClient({ baseUrl: 'http://127.0.0.1:9', apiKey: 'k' }) }); console.log(mw.specificationVersion, mw.middlewareVersion);`,
    );
    expect(run('node', ['ai-sdk.cjs'], scratch).trim()).toBe('function guard_denied');
    expect(run('node', ['ai-sdk.mjs'], scratch).trim()).toBe('v3 v2');
  });

  it('says what is missing when @tollgate/sdk/mastra is used without @mastra/core', () => {
    writeFileSync(
      join(scratch, 'mastra.cjs'),
      `try { require('@tollgate/sdk/mastra'); console.log('loaded'); } catch (e) { console.log(e.code); }`,
    );
    expect(run('node', ['mastra.cjs'], scratch).trim()).toBe('MODULE_NOT_FOUND');
  });
});
