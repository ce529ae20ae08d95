import { randomUUID } from 'node:crypto';
import { recordAnswer } from './contract';
import { TEST_ADMIN_TOKEN } from './env';

export interface Reply<T = any> {
  status: number;
  body: T;
  headers: Headers;
}

/** A JSON request to the service under test, as any HTTP client would send it. */
export async function call<T = any>(
  base: string,
  method: string,
  path: string,
  opts: { token?: string; body?: unknown; raw?: string | Buffer; contentType?: string } = {},
): Promise<Reply<T>> {
  const headers: Record<string, string> = {};
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  let body: string | Buffer | undefined;
  if (opts.raw !== undefined) {
    body = opts.raw;
    headers['content-type'] = opts.contentType ?? 'application/json';
  } else if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers['content-type'] = 'application/json';
  }
  const res = await fetch(base + path, { method, headers, body });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    /* not JSON: keep the text */
  }
  recordAnswer(base, {
    method,
    path: new URL(base + path).pathname,
    status: res.status,
    contentType: res.headers.get('content-type'),
    body: parsed,
  });
  return { status: res.status, body: parsed as T, headers: res.headers };
}

export interface TestProject {
  id: string;
  key: string;
  keyId: string;
}

/** A new project with one key of the given scopes; every test gets its own. */
export async function createProject(
  base: string,
  scopes: string[] = ['ingest', 'guard', 'read', 'admin'],
  extra: Record<string, unknown> = {},
): Promise<TestProject> {
  const project = await call(base, 'POST', '/v1/admin/projects', {
    token: TEST_ADMIN_TOKEN,
    body: { name: `test ${randomUUID()}`, ...extra },
  });
  if (project.status !== 201 && project.status !== 200)
    throw new Error(`create project: ${project.status} ${JSON.stringify(project.body)}`);
  const key = await call(base, 'POST', `/v1/admin/projects/${project.body.id}/keys`, {
    token: TEST_ADMIN_TOKEN,
    body: { scopes },
  });
  if (key.status !== 201 && key.status !== 200)
    throw new Error(`create key: ${key.status} ${JSON.stringify(key.body)}`);
  return { id: project.body.id, key: key.body.key, keyId: key.body.id };
}

let counter = 0;
/** A valid step event with a unique id; override any field. */
export function stepEvent(overrides: Record<string, unknown> = {}): Record<string, any> {
  counter += 1;
  return {
    eventId: `evt-${randomUUID()}`,
    occurredAt: new Date().toISOString(),
    traceId: `trace-${counter}`,
    resourceId: 'resource-1',
    entityType: 'agent',
    entityName: 'support-agent',
    provider: 'openai',
    model: 'gpt-4o',
    usage: { inputTokens: 1000, outputTokens: 200 },
    ...overrides,
  };
}
