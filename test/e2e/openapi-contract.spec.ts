import { connect } from 'node:net';
import { call } from '../support/http';
import { contractProblems, type Seen } from '../support/contract';
import { startService, type RunningService } from '../support/service';

/**
 * What the OpenAPI document promises for answers no route handler writes: the HTTP server's own
 * (a request cut off by HTTP_REQUEST_TIMEOUT_MS, oversized headers, an unknown route) come in the
 * one documented error body. And the check every end-to-end spec ends with (test/support/contract.ts)
 * does fail on an undocumented status or a body that drifted from its schema.
 */
let svc: RunningService;
let doc: Parameters<typeof contractProblems>[0];

beforeAll(async () => {
  svc = await startService({ HTTP_REQUEST_TIMEOUT_MS: '1000' });
  doc = (await call(svc.url, 'GET', '/docs/json')).body;
});
afterAll(() => svc?.close());

/** Writes `request` on a raw connection and reads until the server closes it. */
function raw(request: string): Promise<{ status: number; contentType: string | null; body: unknown }> {
  const { port } = new URL(svc.url);
  return new Promise((resolve, reject) => {
    let text = '';
    const socket = connect(Number(port), '127.0.0.1', () => socket.write(request));
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (text += chunk));
    socket.on('error', reject);
    socket.on('close', () => {
      const [head, rest = ''] = text.split('\r\n\r\n');
      const length = Number(/^content-length: (\d+)/im.exec(head)?.[1] ?? 0);
      try {
        resolve({
          status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]),
          contentType: /^content-type: (.*)$/im.exec(head)?.[1]?.trim() ?? null,
          body: length ? JSON.parse(rest.slice(0, length)) : undefined,
        });
      } catch (err) {
        reject(new Error(`${String(err)} in ${JSON.stringify(text)}`));
      }
    });
  });
}

const seen = (
  method: string,
  path: string,
  a: { status: number; contentType: string | null; body: unknown },
): Seen => ({
  method,
  path,
  ...a,
});

it('answers a body that does not arrive in time with 408 in the documented error body', async () => {
  const answer = await raw(
    // The guard check reads its body before it looks at the key (ingest refuses a missing key first).
    'POST /v1/guard/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"context":',
  );
  expect(answer).toMatchObject({ status: 408, body: { statusCode: 408, code: 'request_timeout' } });
  expect(contractProblems(doc, [seen('POST', '/v1/guard/check', answer)])).toEqual([]);
});

it('answers oversized headers with 431 in the documented error body', async () => {
  const answer = await raw(`GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
  expect(answer).toMatchObject({ status: 431, body: { statusCode: 431, code: 'headers_too_large' } });
  expect(contractProblems(doc, [seen('GET', '/health', answer)])).toEqual([]);
});

it('fails an undocumented status, a body off its schema, and an error not in the error body', () => {
  const json = 'application/json; charset=utf-8';
  expect(
    contractProblems(doc, [
      { method: 'GET', path: '/health', status: 418, contentType: json, body: {} },
      { method: 'GET', path: '/health', status: 200, contentType: json, body: { status: 'ok', extra: 1 } },
      { method: 'POST', path: '/v1/guard/reservations/r-1/release', status: 404, contentType: json, body: {} },
      { method: 'GET', path: '/v1/nothing', status: 404, contentType: json, body: { error: 'Not Found' } },
    ]),
  ).toEqual([
    expect.stringMatching(/^GET \/health answered 418, which the document does not list/),
    expect.stringMatching(/^GET \/health → 200: the body does not match the document: body must NOT have additional/),
    expect.stringMatching(/^POST \/v1\/guard\/reservations\/\{id\}\/release → 404: .*must have required property/),
    expect.stringMatching(/^GET \/v1\/nothing → 404: not the error schema/),
  ]);
});

it('answers health, readiness and an unknown route as documented', async () => {
  expect((await call(svc.url, 'GET', '/health')).status).toBe(200);
  expect((await call(svc.url, 'GET', '/health/ready')).status).toBe(200);
  expect((await call(svc.url, 'GET', '/v1/nothing-here')).body).toMatchObject({ code: 'not_found' });
  // Checked, with every other answer of this file, by test/support/jest-setup.ts.
});
