import 'reflect-metadata';
import './api.module';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { DocsController } from './docs.controller';

/**
 * The OpenAPI document (GET /docs/json) as outside tools read it: valid for swagger-parser, clean
 * under Redocly's recommended rules, and turned by openapi-typescript into the types committed in
 * test/contract/openapi.d.ts (which `npm run typecheck` holds the SDK's types against). What the
 * service really answers is checked against it by the end-to-end specs (test/support/contract.ts).
 */
type Operation = {
  operationId?: string;
  security?: Record<string, string[]>[];
  responses: Record<string, { $ref?: string; content?: Record<string, { schema: Record<string, unknown> }> }>;
};
interface Document {
  servers?: { url: string }[];
  paths: Record<string, Record<string, Operation>>;
  components: {
    securitySchemes: Record<string, unknown>;
    responses: Record<string, { content: Record<string, { schema: unknown }> }>;
  };
}

const root = join(__dirname, '../../..');
const run = promisify(execFile);
const doc = new DocsController().json() as unknown as Document;
const operations = Object.entries(doc.paths).flatMap(([path, ops]) =>
  Object.entries(ops).map(([method, op]) => ({ route: `${method.toUpperCase()} ${path}`, op })),
);
let dir: string;
let file: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'tollgate-openapi-'));
  file = join(dir, 'openapi.json');
  writeFileSync(file, JSON.stringify(doc, null, 2));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Runs scripts/openapi-check.mjs; its output is one problem a line. */
async function check(...args: string[]): Promise<string[]> {
  const out = await run(process.execPath, [join(root, 'scripts/openapi-check.mjs'), ...args], { cwd: root }).catch(
    (err: { stdout?: string; stderr?: string }) => ({ stdout: `${err.stdout ?? ''}${err.stderr ?? ''}` }),
  );
  return out.stdout.split('\n').filter(Boolean);
}

it('is valid for swagger-parser and has no problem under Redocly’s recommended rules', async () => {
  expect(await check('validate', file)).toEqual([]);
}, 60_000);

it('gives every operation a unique operationId made from its method and path', () => {
  const ids = operations.map(({ op }) => op.operationId);
  expect(ids.filter((id) => !/^[a-z]+[A-Z][A-Za-z0-9]*$/.test(id ?? ''))).toEqual([]);
  expect(new Set(ids).size).toBe(ids.length);
  expect(doc.paths['/v1/guard/check'].post.operationId).toBe('postV1GuardCheck');
  expect(doc.paths['/v1/exporters/{name}/dead-letters/{batchId}/retry'].post.operationId).toBe(
    'postV1ExportersByNameDeadLettersByBatchIdRetry',
  );
});

it('names the server and, for every operation, who may call it', () => {
  expect(doc.servers).toEqual([expect.objectContaining({ url: '/' })]);
  expect(operations.filter(({ op }) => !Array.isArray(op.security)).map((o) => o.route)).toEqual([]);
  // Open unless the operator set METRICS_TOKEN.
  expect(doc.paths['/metrics'].get.security).toEqual([{}, { metricsToken: [] }]);
  expect(doc.paths['/health'].get.security).toEqual([]);
  expect(doc.paths['/v1/guard/check'].post.security).toEqual([{ projectKey: [] }]);
  expect(doc.paths['/v1/admin/projects'].post.security).toEqual([{ adminToken: [] }]);
  for (const { op } of operations)
    for (const requirement of op.security!)
      for (const scheme of Object.keys(requirement)) expect(doc.components.securitySchemes[scheme]).toBeDefined();
});

it('documents the health routes with their bodies, the readiness 503 included', () => {
  expect(Object.keys(doc.paths['/health'].get.responses)).toContain('200');
  const ready = doc.paths['/health/ready'].get.responses;
  expect(ready['200'].content!['application/json'].schema).toMatchObject({ required: ['status', 'checks'] });
  expect(ready['503'].content!['application/json'].schema).toMatchObject({
    anyOf: [{ required: ['status', 'checks'] }, { $ref: '#/components/schemas/Error' }],
  });
});

it('answers every error status with the one error schema', () => {
  for (const { route, op } of operations)
    for (const [status, response] of Object.entries(op.responses)) {
      if (Number(status) < 400) continue;
      const schema = response.$ref
        ? doc.components.responses[response.$ref.replace('#/components/responses/', '')].content['application/json']
            .schema
        : response.content!['application/json'].schema;
      expect({ route, status, schema }).toEqual({
        route,
        status,
        schema: expect.objectContaining(
          schema && 'anyOf' in (schema as object)
            ? { anyOf: expect.arrayContaining([{ $ref: '#/components/schemas/Error' }]) }
            : { $ref: '#/components/schemas/Error' },
        ),
      });
    }
});

it('documents the errors each kind of route answers', () => {
  const statuses = (path: string, method: string) => Object.keys(doc.paths[path][method].responses);
  // Everything: a request cut off by HTTP_REQUEST_TIMEOUT_MS, oversized headers, a closing or unavailable instance.
  for (const { op } of operations) expect(Object.keys(op.responses)).toEqual(expect.arrayContaining(['408', '503']));
  // A body: refused as invalid, too large or not JSON; a key: refused, lacking the scope, rate limited.
  expect(statuses('/v1/events', 'post')).toEqual([
    '200',
    '400',
    '401',
    '403',
    '408',
    '413',
    '415',
    '429',
    '431',
    '503',
  ]);
  expect(statuses('/v1/guard/reservations/{id}/release', 'post')).toContain('404');
  expect(statuses('/v1/guard/check', 'post')).toContain('409');
  expect(statuses('/v1/exporters/{name}', 'put')).toEqual(expect.arrayContaining(['409', '501']));
  expect(statuses('/v1/runs/{traceId}', 'get')).not.toContain('404');
  expect(statuses('/metrics', 'get')).toEqual(['200', '401', '408', '429', '431', '503']);
  expect(statuses('/health', 'get')).toEqual(['200', '408', '431', '503']);
});

it('is what test/contract/openapi.d.ts was generated from (UPDATE_OPENAPI_TYPES=1 regenerates it)', async () => {
  const committed = join(root, 'test/contract/openapi.d.ts');
  const generated = join(dir, 'openapi.d.ts');
  expect(await check('types', file, process.env.UPDATE_OPENAPI_TYPES ? committed : generated)).toEqual([]);
  if (!process.env.UPDATE_OPENAPI_TYPES) expect(readFileSync(committed, 'utf8')).toBe(readFileSync(generated, 'utf8'));
}, 60_000);
