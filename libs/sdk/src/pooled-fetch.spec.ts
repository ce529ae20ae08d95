import { createServer, type Server } from 'node:http';
import { TollgateClient } from './client';

/** A stand-in for the service on a real port, counting the TCP connections it is opened. */
function service(): Promise<{
  url: string;
  connections: () => number;
  requests: () => number;
  close: () => Promise<void>;
  server: Server;
}> {
  let connections = 0;
  let requests = 0;
  const server = createServer((req, res) => {
    requests++;
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      if (req.url?.startsWith('/v1/guard/check'))
        res.end(
          JSON.stringify({
            decision: 'allow',
            violations: [],
            warnings: [],
            skipped: [],
            usage: {},
            asOf: new Date(0).toISOString(),
            echo: JSON.parse(body).context,
          }),
        );
      else res.end(JSON.stringify({ entityTypes: ['agent'] }));
    });
  });
  server.on('connection', () => connections++);
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      resolve({
        url: `http://127.0.0.1:${port}`,
        connections: () => connections,
        requests: () => requests,
        close: () => new Promise((r) => server.close(() => r())),
        server,
      });
    }),
  );
}

describe('the default transport: a keep-alive connection pool', () => {
  it('sends 50 calls one after another over one connection, headers and bodies intact', async () => {
    const svc = await service();
    const client = new TollgateClient({ baseUrl: svc.url, apiKey: 'tg_test' });
    for (let i = 0; i < 25; i++) {
      const answer = (await client.guard.check({ context: { runId: `run-${i}` } })) as unknown as {
        decision: string;
        echo: unknown;
      };
      expect(answer).toMatchObject({ decision: 'allow', echo: { runId: `run-${i}` } });
      expect(await client.metrics.discovery.entityTypes()).toEqual({ entityTypes: ['agent'] });
    }
    expect(svc.requests()).toBe(50);
    expect(svc.connections()).toBe(1);
    svc.server.closeAllConnections();
    await svc.close();
  });

  it('opens a new connection when the service closed the idle one, without an error', async () => {
    const svc = await service();
    const client = new TollgateClient({ baseUrl: svc.url, apiKey: 'tg_test', guard: { retries: 0 } });
    expect(await client.metrics.discovery.entityTypes()).toEqual({ entityTypes: ['agent'] });
    svc.server.closeIdleConnections();
    await new Promise((r) => setTimeout(r, 50));
    expect(await client.metrics.discovery.entityTypes()).toEqual({ entityTypes: ['agent'] });
    expect(svc.connections()).toBe(2);
    svc.server.closeAllConnections();
    await svc.close();
  });
  // That its idle connections never keep a process alive is shown by test/sdk/package.spec.ts: the
  // scripts there exit by themselves after sending over the pool.
});
