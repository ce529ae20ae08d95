import { execFile, execFileSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { policyResponse } from '../../libs/ledger/src/policies/policies.controller';
import { priceResponse } from '../../libs/ledger/src/prices/prices.controller';
import { keyListResponse } from '../../libs/ledger/src/projects/projects.schemas';
import { TEST_ADMIN_TOKEN, TEST_DATABASE_URL, TEST_REDIS_URL } from '../support/env';
import { call, createProject, stepEvent } from '../support/http';
import { startService, type RunningService } from '../support/service';

const ROOT = join(__dirname, '..', '..');
const SECRET_KEY = 'test-secret-key-0123456789-0123456789';
const QUEUE_PREFIX = `tollgate-cli-test-${randomBytes(4).toString('hex')}`;
/** Nothing listens there: a Redis that is down. */
const NO_REDIS = 'redis://127.0.0.1:6398';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** The built CLI (`node dist/apps/cli/src/main.js`, what `npm run tollgate --` runs) against the test database. */
function tollgate(args: string[], env: Record<string, string | undefined> = {}, input?: string): Promise<Run> {
  const merged: Record<string, string | undefined> = {
    ...process.env,
    DATABASE_URL: TEST_DATABASE_URL,
    REDIS_URL: TEST_REDIS_URL,
    QUEUE_PREFIX,
    TOLLGATE_SECRET_KEY: SECRET_KEY,
    TOLLGATE_EXPORTER_ALLOW_HOSTS: '127.0.0.1',
    LOG_LEVEL: 'log',
    ...env,
  };
  // undefined: the variable is not set at all.
  for (const k of Object.keys(merged)) if (merged[k] === undefined) delete merged[k];
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [join(ROOT, 'dist/apps/cli/src/main.js'), ...args],
      {
        cwd: ROOT,
        env: merged as NodeJS.ProcessEnv,
        timeout: 60_000,
      },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
    if (input !== undefined) child.stdin!.end(input);
  });
}

const json = (r: Run) => {
  if (r.code !== 0) throw new Error(`exit ${r.code}: ${r.stderr}`);
  return JSON.parse(r.stdout);
};

describe('npm run tollgate -- …', () => {
  let svc: RunningService;
  let scratch: string;

  beforeAll(async () => {
    // What `npm run tollgate` runs first: a no-op when dist/ is current.
    execFileSync(process.execPath, [join(ROOT, 'scripts/ensure-built.mjs'), '--quiet'], { cwd: ROOT, stdio: 'pipe' });
    svc = await startService();
    scratch = mkdtempSync(join(tmpdir(), 'tollgate-cli-'));
  }, 300_000);

  afterAll(async () => {
    await svc?.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  const file = (name: string, body: unknown) => {
    const path = join(scratch, name);
    writeFileSync(path, JSON.stringify(body));
    return path;
  };

  it('lists every command; an unknown command or option is an error with the usage (exit 2)', async () => {
    const help = await tollgate(['help']);
    expect(help.code).toBe(0);
    for (const c of [
      'projects create',
      'keys create',
      'policies put',
      'prices set',
      'prices reprice',
      'exporters put',
      'exporters dead-letters',
      'exporters retry',
      'events tail',
      'events show',
      'guard check',
      'guard usage',
      'verify',
      'doctor',
      'migrate',
    ]) {
      expect(help.stdout).toContain(`  ${c}`);
    }

    const unknown = await tollgate(['projcts', 'create']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/^unknown command: projcts create\n/);
    expect(unknown.stderr).toContain('Usage: npm run tollgate -- <command>');

    const near = await tollgate(['keys', 'lst']);
    expect(near.code).toBe(2);
    expect(near.stderr).toContain('keys list --project <id>');

    const flag = await tollgate(['keys', 'list', '--project', 'prj_x', '--bogus']);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toContain("Unknown option '--bogus'");
    expect(flag.stderr).toContain('Usage: npm run tollgate -- keys list --project <id> [--json]');
    expect(flag.stdout).toBe('');

    const missing = await tollgate(['keys', 'create', '--scopes', 'read']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/^--project is required\n/m);
  }, 60_000);

  it('says which database it talks to, without its password', async () => {
    const url = new URL(TEST_DATABASE_URL);
    const r = await tollgate(['projects', 'list', '--json']);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain(`database: postgresql://${url.username}@${url.host}${url.pathname}\n`);
    const withPassword = new URL(TEST_DATABASE_URL);
    withPassword.password = 'hunter2';
    // The connection fails or not (trust auth ignores it): the password is never printed.
    const r2 = await tollgate(['projects', 'list'], { DATABASE_URL: withPassword.toString() });
    expect(r2.stderr).not.toContain('hunter2');
    expect(r2.stderr).toContain(':***@');
  }, 60_000);

  it('creates a project and keys, lists and revokes them — without Redis, and the key works on the API', async () => {
    const project = json(
      await tollgate(['projects', 'create', '--name', 'cli demo', '--json'], { REDIS_URL: NO_REDIS }),
    );
    expect(project).toMatchObject({
      id: expect.stringMatching(/^prj_/),
      name: 'cli demo',
      unpricedPolicy: 'deny',
      costUnit: 'USD',
    });

    const created = await tollgate(['keys', 'create', '--project', project.id, '--scopes', 'ingest,read', '--json'], {
      REDIS_URL: NO_REDIS,
    });
    expect(created.code).toBe(0);
    expect(created.stderr).not.toMatch(/ioredis|ECONNREFUSED|Unhandled/);
    const key = JSON.parse(created.stdout);
    expect(key).toMatchObject({
      projectId: project.id,
      key: expect.stringMatching(/^tg_/),
      scopes: ['ingest', 'read'],
    });
    expect(
      (await call(svc.url, 'POST', '/v1/events', { token: key.key, body: { events: [stepEvent()] } })).status,
    ).toBe(200);

    const listed = json(await tollgate(['keys', 'list', '--project', project.id, '--json'], { REDIS_URL: NO_REDIS }));
    expect(JSON.stringify(listed)).toContain(key.id);
    expect(JSON.stringify(listed)).not.toContain(key.key);

    const human = await tollgate(['keys', 'list', '--project', project.id], { REDIS_URL: NO_REDIS });
    expect(human.stdout.split('\n')[0]).toMatch(/^id\s+scopes\s+createdAt/);

    json(
      await tollgate(['keys', 'revoke', '--project', project.id, '--key', key.id, '--json'], { REDIS_URL: NO_REDIS }),
    );
    expect(
      (await call(svc.url, 'POST', '/v1/events', { token: key.key, body: { events: [stepEvent()] } })).status,
    ).toBe(401);

    const bad = await tollgate(['projects', 'create', '--name', 'x', '--unpriced-policy', 'free']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^--unpriced-policy Invalid option/m);

    const settings = json(
      await tollgate([
        'projects',
        'settings',
        '--project',
        project.id,
        '--unpriced-policy',
        'fallback',
        '--fallback-input',
        '3',
        '--fallback-output',
        '15',
        '--json',
      ]),
    );
    expect(settings).toMatchObject({
      unpricedPolicy: 'fallback',
      unpricedFallback: { inputPerMillion: 3, outputPerMillion: 15 },
    });

    const unknownProject = await tollgate([
      'projects',
      'settings',
      '--project',
      'prj_does_not_exist',
      '--cost-unit',
      'EUR',
    ]);
    expect(unknownProject.code).toBe(1);
    expect(unknownProject.stderr).toMatch(/^not_found: No project prj_does_not_exist \(field projectId\)$/m);
  }, 300_000);

  it('policies, prices and the guard: the same validation and answers as the API', async () => {
    const p = await createProject(svc.url);
    const put = json(
      await tollgate([
        'policies',
        'put',
        'daily',
        '--project',
        p.id,
        '--file',
        file('policy.json', { scope: 'resource', window: '24h', maxCost: 5 }),
        '--json',
      ]),
    );
    expect(put).toMatchObject({ name: 'daily', scope: 'resource', window: '24h', maxCost: 5, strategy: 'block' });
    const viaApi = await call(svc.url, 'GET', '/v1/policies', { token: p.key });
    expect(json(await tollgate(['policies', 'list', '--project', p.id, '--json']))).toEqual(viaApi.body);
    // The OpenAPI document's response schemas describe what the routes answer.
    expect(z.strictObject({ policies: z.array(policyResponse.strict()) }).safeParse(viaApi.body).error).toBeUndefined();
    expect(
      keyListResponse.safeParse(
        (await call(svc.url, 'GET', `/v1/admin/projects/${p.id}/keys`, { token: TEST_ADMIN_TOKEN })).body,
      ).error,
    ).toBeUndefined();

    const badPolicy = await tollgate(
      ['policies', 'put', 'daily', '--project', p.id, '--file', '-'],
      {},
      JSON.stringify({ scope: 'resource', window: '2d', maxCost: 5 }),
    );
    expect(badPolicy.code).toBe(2);
    expect(badPolicy.stderr).toMatch(/^window Invalid option/m);

    const price = json(
      await tollgate([
        'prices',
        'set',
        '--project',
        p.id,
        '--provider',
        'acme',
        '--model',
        'big',
        '--input',
        '3',
        '--output',
        '15',
        '--json',
      ]),
    );
    expect(price).toMatchObject({
      provider: 'acme',
      model: 'big',
      inputPerMillion: 3,
      outputPerMillion: 15,
      currency: 'USD',
    });
    expect(json(await tollgate(['prices', 'list', '--project', p.id, '--json'])).prices).toEqual([
      expect.objectContaining({ id: price.id }),
    ]);
    expect(
      z
        .strictObject({ prices: z.array(priceResponse.strict()) })
        .safeParse((await call(svc.url, 'GET', '/v1/prices', { token: p.key })).body).error,
    ).toBeUndefined();
    const negative = await tollgate([
      'prices',
      'set',
      '--project',
      p.id,
      '--provider',
      'acme',
      '--model',
      'big',
      '--input=-3',
      '--output',
      '15',
    ]);
    expect(negative.code).toBe(2);
    expect(negative.stderr).toMatch(/^--input must not be negative/m);

    // 1000 input tokens × 1.35 (the margin for an unknown family) × $3/M + 100 × $15/M.
    const check = json(
      await tollgate(
        ['guard', 'check', '--project', p.id, '--file', '-', '--json'],
        {},
        JSON.stringify({
          context: { resourceId: 'r1' },
          estimate: { provider: 'acme', model: 'big', inputTokens: 1000, maxOutputTokens: 100 },
          dryRun: true,
        }),
      ),
    );
    expect(check).toMatchObject({ decision: 'allow', estimate: { cost: 0.00555, costUnit: 'USD', priced: true } });
    const usage = json(await tollgate(['guard', 'usage', '--project', p.id, '--scope', 'resource:r1', '--json']));
    expect(usage).toMatchObject({
      scopeKey: 'resource:r1',
      policies: [expect.objectContaining({ name: 'daily', usageKey: 'resource:r1@24h' })],
      usage: { 'resource:r1@24h': expect.objectContaining({ totalTokens: 0 }) },
    });
    const badScope = await tollgate(['guard', 'usage', '--project', p.id, '--scope', 'planet:x']);
    expect(badScope.code).toBe(2);

    json(await tollgate(['policies', 'delete', 'daily', '--project', p.id, '--json']));
    expect(json(await tollgate(['policies', 'list', '--project', p.id, '--json']))).toEqual({ policies: [] });
  }, 120_000);

  it('events tail and show read the log', async () => {
    const p = await createProject(svc.url);
    const events = [
      stepEvent({ usage: { inputTokens: 1200, outputTokens: 80 } }),
      stepEvent({ usage: { inputTokens: 10, outputTokens: 5 } }),
    ];
    expect((await call(svc.url, 'POST', '/v1/events', { token: p.key, body: { events } })).body.accepted).toBe(2);
    const tail = json(await tollgate(['events', 'tail', '--project', p.id, '--json']));
    expect(tail.events.map((e: { eventId: string }) => e.eventId)).toEqual(events.map((e) => e.eventId));
    const shown = json(await tollgate(['events', 'show', events[0].eventId, '--project', p.id, '--json']));
    expect(shown).toMatchObject({
      eventId: events[0].eventId,
      type: 'StepUsageRecorded',
      provider: 'openai',
      model: 'gpt-4o',
      inputTokens: 1200,
      outputTokens: 80,
      unpriced: false,
    });
    const plain = await tollgate(['events', 'tail', '--project', p.id, '--limit', '1']);
    expect(plain.stdout.trim().split('\n')).toEqual([
      expect.stringContaining(`StepUsageRecorded  ${events[1].eventId}  openai/gpt-4o`),
    ]);
    const none = await tollgate(['events', 'show', 'evt-none', '--project', p.id]);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain(`No event evt-none in project ${p.id}`);
  }, 120_000);

  it('exporters: put from a file, list, status, pause, resume, replay, dead letters and retry', async () => {
    const p = await createProject(svc.url);
    const exporter = { type: 'webhook', url: 'http://127.0.0.1:9/hook', signingSecret: 'webhook-secret-0123456789' };
    const put = json(
      await tollgate([
        'exporters',
        'put',
        'hook',
        '--project',
        p.id,
        '--file',
        file('exporter.json', exporter),
        '--json',
      ]),
    );
    expect(put).toMatchObject({ name: 'hook', type: 'webhook' });
    expect(JSON.stringify(put)).not.toContain('webhook-secret');
    const listed = json(await tollgate(['exporters', 'list', '--project', p.id, '--json']));
    expect(JSON.stringify(listed)).toContain('"hook"');
    expect(json(await tollgate(['exporters', 'pause', 'hook', '--project', p.id, '--json']))).toMatchObject({
      name: 'hook',
      status: 'paused',
    });
    expect(json(await tollgate(['exporters', 'status', 'hook', '--project', p.id, '--json']))).toMatchObject({
      name: 'hook',
      status: 'paused',
    });
    expect(json(await tollgate(['exporters', 'resume', 'hook', '--project', p.id, '--json']))).toMatchObject({
      name: 'hook',
      status: 'active',
    });
    expect(
      json(await tollgate(['exporters', 'replay', 'hook', '--project', p.id, '--from-position', '0', '--json'])),
    ).toMatchObject({ name: 'hook' });
    expect(json(await tollgate(['exporters', 'dead-letters', 'hook', '--project', p.id, '--json']))).toEqual({
      deadLetters: [],
    });
    expect(json(await tollgate(['exporters', 'retry', 'hook', '--project', p.id, '--json']))).toEqual({ retrying: [] });
    const noSecretKey = await tollgate(
      ['exporters', 'put', 'hook2', '--project', p.id, '--file', file('exporter.json', exporter)],
      { TOLLGATE_SECRET_KEY: undefined },
    );
    expect(noSecretKey.code).toBe(1);
    expect(noSecretKey.stderr).toMatch(/^not_configured: /m);
    const noRedis = await tollgate(['exporters', 'resume', 'hook', '--project', p.id], { REDIS_URL: NO_REDIS });
    expect(noRedis.code).toBe(1);
    expect(noRedis.stderr).toContain(`Redis at ${NO_REDIS}`);
    json(await tollgate(['exporters', 'delete', 'hook', '--project', p.id, '--json']));
    expect((await tollgate(['exporters', 'status', 'hook', '--project', p.id])).code).toBe(1);
  }, 180_000);

  it('verify: no differences in a ledger written by ingest and the guard; exit 1 naming a counter tampered in SQL', async () => {
    const p = await createProject(svc.url);
    const resourceId = `r-${randomUUID()}`;
    const context = { resourceId, userId: 'u1' };
    const reserve = async () =>
      (
        await call(svc.url, 'POST', '/v1/guard/check', {
          token: p.key,
          body: {
            context,
            limits: [{ scope: 'resource', window: '24h', maxCost: 5 }],
            estimate: { provider: 'openai', model: 'gpt-4o', inputTokens: 1000, maxOutputTokens: 200 },
            reserve: true,
            stepId: randomUUID(),
          },
        })
      ).body.reservation.id as string;
    const [settled, released] = [await reserve(), await reserve(), await reserve()];
    expect(
      (await call(svc.url, 'POST', `/v1/guard/reservations/${released}/release`, { token: p.key })).body.status,
    ).toBe('released');
    // One instant: both steps in one hour bucket.
    const occurredAt = new Date().toISOString();
    const steps = [
      stepEvent({ ...context, occurredAt, reservationId: settled, usage: { inputTokens: 700, outputTokens: 90 } }),
      stepEvent({ ...context, occurredAt, threadId: 'th1' }),
    ];
    expect((await call(svc.url, 'POST', '/v1/events', { token: p.key, body: { events: steps } })).body.accepted).toBe(
      2,
    );

    const clean = await tollgate(['verify', '--project', p.id, '--json']);
    expect(clean.code).toBe(0);
    expect(JSON.parse(clean.stdout)).toEqual({ differences: [] });
    expect((await tollgate(['verify', '--project', p.id])).stdout).toBe('no differences\n');

    await svc.prisma.$executeRawUnsafe(
      `UPDATE usage_counters SET input_tokens = input_tokens + 1 WHERE project_id = $1 AND scope = 'resource' AND granularity = 'h'`,
      p.id,
    );
    const tampered = await tollgate(['verify', '--project', p.id, '--json']);
    expect(tampered.code).toBe(1);
    const hour = new Date(Math.floor(Date.parse(occurredAt) / 3_600_000) * 3_600_000).toISOString();
    // gpt-4o: 1700 × $2.50/M + 290 × $10/M.
    const expected = { inputTokens: 1700, outputTokens: 290, costMicros: 7150, unpricedEvents: 0, events: 2 };
    expect(JSON.parse(tampered.stdout)).toEqual({
      differences: [
        {
          project: p.id,
          table: 'usage_counters',
          key: { scope: 'resource', scopeId: resourceId, granularity: 'h', bucketStart: hour, costUnit: 'USD' },
          stored: { ...expected, inputTokens: 1701 },
          expected,
          issue: 'counter differs from the log',
        },
      ],
    });
    const human = await tollgate(['verify', '--project', p.id]);
    expect(human.code).toBe(1);
    expect(human.stdout).toBe(
      `${p.id}  usage_counters  scope=resource scopeId=${resourceId} granularity=h bucketStart=${hour} costUnit=USD  ` +
        `stored ${JSON.stringify({ ...expected, inputTokens: 1701 })}  expected ${JSON.stringify(expected)}  (counter differs from the log)\n`,
    );
  }, 120_000);

  it('doctor: each check ok, or what to do', async () => {
    const ok = await tollgate(['doctor', '--json'], { TOLLGATE_ADMIN_TOKEN: 'test-admin-token-0123456789' });
    expect(ok.code).toBe(0);
    const report = JSON.parse(ok.stdout);
    expect(Object.fromEntries(report.checks.map((c: { name: string; status: string }) => [c.name, c.status]))).toEqual({
      config: 'ok',
      postgres: 'ok',
      migrations: 'ok',
      redis: 'ok',
      'secret key': 'ok',
      'admin token': 'ok',
    });

    const bad = await tollgate(['doctor'], {
      REDIS_URL: NO_REDIS,
      TOLLGATE_SECRET_KEY: undefined,
      TOLLGATE_ADMIN_TOKEN: undefined,
      DATABASE_URL: 'postgresql://postgres@127.0.0.1:5432/tollgate_doctor_missing',
    });
    expect(bad.code).toBe(1);
    expect(bad.stdout).toMatch(
      /^FAIL  migrations  the database does not exist yet\n\s+→ `npm start` or `npm run migrate` creates it/m,
    );
    expect(bad.stdout).toMatch(/^FAIL  redis\s+redis:\/\/127\.0\.0\.1:6398: .*ECONNREFUSED.*\n\s+→ start Redis/m);
    expect(bad.stdout).toMatch(
      /^warn  secret key  TOLLGATE_SECRET_KEY is not set: .*501 not_configured\n\s+→ set TOLLGATE_SECRET_KEY/m,
    );
    expect(bad.stdout).toMatch(/^warn  admin token TOLLGATE_ADMIN_TOKEN is not set/m);

    const config = await tollgate(['doctor'], { PORT: 'eighty' });
    expect(config.code).toBe(1);
    expect(config.stdout).toMatch(/^FAIL  config\s+.*PORT/m);
  }, 60_000);
});
