import { Config, loadConfig } from '@tollgate/platform';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { Destinations, type Lookup } from '../destination/destinations';
import { NO_ANSWER, postToSink } from './sink-client';
import { SinkError } from './sink-error';

/** A receiver on 127.0.0.1 that records the connections made to it and the headers it was sent. */
async function receiver() {
  const seen = { connections: 0, headers: [] as IncomingHttpHeaders[] };
  const server: Server = createServer((req, res) => {
    seen.headers.push(req.headers);
    req.resume();
    req.on('end', () => res.end('{}'));
  });
  server.on('connection', () => seen.connections++);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as AddressInfo).port,
    seen,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** Names resolve only through this table: no test asks a real DNS server anything. */
function stubLookup(table: Record<string, string[][]>): Lookup & { calls: string[] } {
  const calls: string[] = [];
  const answers = new Map(Object.entries(table).map(([k, v]) => [k, [...v]]));
  const lookup = (async (hostname: string) => {
    calls.push(hostname);
    const queue = answers.get(hostname);
    const next = queue && (queue.length > 1 ? queue.shift()! : queue[0]);
    if (!next) throw Object.assign(new Error(`stub: ${hostname} unknown`), { code: 'ENOTFOUND' });
    return next.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  }) as Lookup & { calls: string[] };
  lookup.calls = calls;
  return lookup;
}

function destinations(allow: string, lookup: Lookup): Destinations {
  const d = new Destinations(new Config(loadConfig({ TOLLGATE_EXPORTER_ALLOW_HOSTS: allow })));
  d.lookup = lookup;
  return d;
}

const failure = (p: Promise<unknown>) =>
  p.then(
    () => null,
    (e: SinkError) => e,
  );

describe('postToSink', () => {
  let sink: Awaited<ReturnType<typeof receiver>>;
  beforeEach(async () => {
    sink = await receiver();
  });
  afterEach(() => sink.close());

  it('connects to the address it checked, with the Host header of the URL', async () => {
    const lookup = stubLookup({ 'collector.internal': [['127.0.0.1']] });
    const d = destinations('127.0.0.1', lookup);
    await expect(
      postToSink(d, `http://collector.internal:${sink.port}/v1/traces`, '{}', { 'x-a': '1' }, 2000),
    ).resolves.toBe(200);
    expect(sink.seen.headers[0]).toMatchObject({
      host: `collector.internal:${sink.port}`,
      'x-a': '1',
      'content-length': '2',
    });
    expect(lookup.calls).toEqual(['collector.internal']);
  });

  it('resolves again at every delivery, and refuses before connecting when the name now points inside (DNS rebinding)', async () => {
    // The first answer is what was checked when the exporter was saved; the next is the rebind.
    const lookup = stubLookup({ 'rebind.test': [['127.0.0.1'], ['127.0.0.1', '169.254.169.254'], ['10.0.0.7']] });
    const d = destinations('127.0.0.1', lookup);
    const url = `http://rebind.test:${sink.port}/hook`;
    expect(await d.refusal(url)).toBeNull();
    const first = await failure(postToSink(d, url, '{}', {}, 2000));
    expect(first).toMatchObject({
      permanent: true,
      message: `POST ${url} refused: the destination has a host name that resolves to a link-local address (where cloud metadata services answer), which exporters may not send to (the operator can allow it with TOLLGATE_EXPORTER_ALLOW_HOSTS)`,
    });
    const second = await failure(postToSink(d, url, '{}', {}, 2000));
    expect(second?.message).toMatch(/resolves to a private address/);
    expect(sink.seen.connections).toBe(0);
    expect(lookup.calls).toEqual(['rebind.test', 'rebind.test', 'rebind.test']);
  });

  it('refuses an IP address literal without resolving anything', async () => {
    const lookup = stubLookup({});
    const d = destinations('', lookup);
    const res = await failure(postToSink(d, `http://[::ffff:127.0.0.1]:${sink.port}/`, '{}', {}, 2000));
    expect(res?.message).toMatch(/refused: the destination points at a loopback address \(in IPv4-mapped form\)/);
    expect(sink.seen.connections + lookup.calls.length).toBe(0);
  });

  it('does not let an exporter set Host or the headers that frame the request', async () => {
    const d = destinations('127.0.0.1', stubLookup({}));
    await postToSink(
      d,
      `http://127.0.0.1:${sink.port}/`,
      '{"a":1}',
      {
        Host: 'metadata.google.internal',
        'Content-Length': '0',
        'Transfer-Encoding': 'chunked',
        authorization: 'Bearer t',
      },
      2000,
    );
    expect(sink.seen.headers[0]).toMatchObject({
      host: `127.0.0.1:${sink.port}`,
      'content-length': '7',
      authorization: 'Bearer t',
    });
    expect(sink.seen.headers[0]['transfer-encoding']).toBeUndefined();
  });

  it('says the same of a name that does not resolve as of a refused connection', async () => {
    const d = destinations('127.0.0.1', stubLookup({}));
    await sink.close();
    const refused = await failure(postToSink(d, `http://127.0.0.1:${sink.port}/`, '{}', {}, 2000));
    const unknown = await failure(postToSink(d, `http://nowhere.test:${sink.port}/`, '{}', {}, 2000));
    expect(refused).toMatchObject({
      permanent: false,
      message: `POST http://127.0.0.1:${sink.port}/ failed: ${NO_ANSWER}`,
      detail: 'ECONNREFUSED',
    });
    expect(unknown).toMatchObject({
      permanent: false,
      message: `POST http://nowhere.test:${sink.port}/ failed: ${NO_ANSWER}`,
    });
    expect(unknown?.detail).toMatch(/ENOTFOUND/);
  });

  it('over TLS, sends the host name of the URL as the server name and checks the certificate against it', async () => {
    // A self-signed certificate for collector.internal (a fixture: the sender must refuse it).
    const key = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQghwF7cEKnNhGqxGGW
DAJXYdLYqHgY/ebp9eVZ4sFlJWWhRANCAAS0w+GFYCgOnAcwnz/GsTF8uq8LFnqt
zI0iWnTIkYw1oE2RsgJPV54mXZsGaZbdzBbMO77Xnheb1tHek1zf4qTu
-----END PRIVATE KEY-----`;
    const cert = `-----BEGIN CERTIFICATE-----
MIIBsTCCAVagAwIBAgIUbgDeqjRMcHA7Ae2dJ+tDPA0rfx8wCgYIKoZIzj0EAwIw
HTEbMBkGA1UEAwwSY29sbGVjdG9yLmludGVybmFsMCAXDTI2MTIwMTE0MDEyMVoY
DzIxMjYxMTA3MTQwMTIxWjAdMRswGQYDVQQDDBJjb2xsZWN0b3IuaW50ZXJuYWww
WTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAAS0w+GFYCgOnAcwnz/GsTF8uq8LFnqt
zI0iWnTIkYw1oE2RsgJPV54mXZsGaZbdzBbMO77Xnheb1tHek1zf4qTuo3IwcDAd
BgNVHQ4EFgQUi6sEwYAwrgnDBfy5Wt1e0GkVFocwHwYDVR0jBBgwFoAUi6sEwYAw
rgnDBfy5Wt1e0GkVFocwDwYDVR0TAQH/BAUwAwEB/zAdBgNVHREEFjAUghJjb2xs
ZWN0b3IuaW50ZXJuYWwwCgYIKoZIzj0EAwIDSQAwRgIhALRlQGLh80fZaCzg/adK
+jJ7fXFWmMLe7IQT2soI9l92AiEA3bvT6TQ4+Z7L1sdABp/rTJTqKpMiSXq/s7Qp
5j7Mk0Y=
-----END CERTIFICATE-----`;
    const names: string[] = [];
    const server = createTlsServer(
      { key, cert, SNICallback: (name, cb) => (names.push(name), cb(null, undefined)) },
      (_req, res) => res.end('{}'),
    );
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as AddressInfo;
    try {
      const d = destinations('127.0.0.1', stubLookup({ 'collector.internal': [['127.0.0.1']] }));
      const res = await failure(postToSink(d, `https://collector.internal:${port}/v1/traces`, '{}', {}, 2000));
      expect(res).toMatchObject({
        permanent: false,
        message: `POST https://collector.internal:${port}/v1/traces failed: ${NO_ANSWER}`,
        detail: 'DEPTH_ZERO_SELF_SIGNED_CERT',
      });
      expect(names).toEqual(['collector.internal']);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});
