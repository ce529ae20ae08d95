import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { PrismaService } from '@tollgate/database';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createApiApp } from '../../apps/api/src/bootstrap';
import { WorkerFeaturesModule } from '../../apps/worker/src/worker.module';
import { testConfig, type RunningService } from '../support/service';

export const SECRET_KEY = 'test-secret-key-0123456789-0123456789';

/** The API and the worker in one process (as `npm start` runs them), with fast exporter ticks. */
export async function startServiceWithWorker(overrides: Record<string, string> = {}): Promise<RunningService> {
  const config = testConfig({ TOLLGATE_SECRET_KEY: SECRET_KEY, EXPORTS_TICK_MS: '100', ...overrides });
  const app: NestFastifyApplication = await createApiApp(config, [WorkerFeaturesModule]);
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, app, prisma: app.get(PrismaService), config, close: () => app.close() };
}

export interface ReceivedRequest {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  json: any;
  /** What the receiver answered. */
  status: number;
  /** The response was written before the connection went away. */
  answered: boolean;
}

export interface Receiver {
  url: string;
  requests: ReceivedRequest[];
  close(): Promise<void>;
}

/**
 * A real HTTP sink on 127.0.0.1: records every request (body first, as a receiver that
 * processed it) and answers the status that `answer` gives for the n-th request (from 0).
 */
export async function startReceiver(
  answer: (n: number, req: ReceivedRequest) => number | Promise<number> = () => 200,
): Promise<Receiver> {
  const requests: ReceivedRequest[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    // An answer that throws resets the connection (the sink sees a network error) instead of
    // leaving an unhandled rejection and a request that never gets an answer.
    const respond = async () => {
      const body = Buffer.concat(chunks).toString('utf8');
      let json: unknown = null;
      try {
        json = JSON.parse(body);
      } catch {
        /* recorded as text */
      }
      const entry: ReceivedRequest = {
        path: req.url ?? '/',
        headers: req.headers,
        body,
        json,
        status: 0,
        answered: false,
      };
      const n = requests.length;
      requests.push(entry);
      entry.status = await answer(n, entry);
      if (res.destroyed) return;
      res.writeHead(entry.status, { 'content-type': 'application/json' });
      res.end(entry.status < 300 ? '{"ok":true}' : '{"error":"refused by the test receiver"}', () => {
        entry.answered = true;
      });
    };
    req.on('end', () => {
      respond().catch((err: unknown) => res.destroy(err instanceof Error ? err : new Error(String(err))));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Event ids of every request the receiver accepted (2xx), in arrival order. */
export function acceptedEventIds(r: Receiver): string[] {
  return r.requests
    .filter((q) => q.status >= 200 && q.status < 300)
    .flatMap((q) => (q.json?.events ?? []).map((e: { eventId: string }) => e.eventId));
}

/** Polls until `check` returns a truthy value, or fails with what it saw last. */
export async function eventually<T>(
  check: () => Promise<T> | T,
  what: string,
  timeoutMs = 20_000,
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value) return value as NonNullable<T>;
      last = value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline)
      throw new Error(
        `Timed out waiting for ${what} (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`,
      );
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Fast batching and retries, so a test runs in seconds. */
export function webhookExporter(url: string, extra: Record<string, unknown> = {}) {
  return {
    type: 'webhook',
    url,
    signingSecret: 'whsec-test-0123456789',
    batch: { maxEvents: 20, maxWaitMs: 50 },
    retry: { maxAttempts: 6, initialBackoffMs: 50, maxBackoffMs: 200 },
    timeoutMs: 5000,
    ...extra,
  };
}
