import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { FetchLike } from './http';

/** Settings of {@link pooledFetch}. */
export interface PooledFetchOptions {
  /** Connections open at once per host. Default: no bound (as the runtime's fetch), so concurrent calls never queue in the client. */
  maxSockets?: number;
  /** Idle connections kept open per host for the next calls; past it, a connection is closed once idle. Default 32. */
  maxFreeSockets?: number;
}

/** A {@link FetchLike} with the connection pool behind it, so that the client can close it. */
export interface PooledFetch extends FetchLike {
  /** Destroys every connection of the pool, in-flight ones included. Idle connections never keep a process alive, so this is seldom needed. */
  close(): void;
}

type Response = Awaited<ReturnType<FetchLike>>;

/**
 * The client's default transport: `node:http` / `node:https` over keep-alive agents, so that every
 * call after the first reuses an open connection (no TCP or TLS handshake on the path of an LLM
 * step) without the per-request cost of the WHATWG `fetch` machinery. No dependency beyond Node.
 *
 * Idle connections are unref'd by Node's agent: they never keep a process alive. A request that
 * fails with a reset on a reused connection (the server closed it while idle, at the moment it was
 * reused) is sent once more on a new one, as Node's documentation recommends, before any error
 * reaches the client's retry policy.
 */
export function pooledFetch(options: PooledFetchOptions = {}): PooledFetch {
  const agentOptions = {
    keepAlive: true,
    maxSockets: options.maxSockets ?? Infinity,
    maxFreeSockets: options.maxFreeSockets ?? 32,
    scheduling: 'lifo' as const,
  };
  const http = new HttpAgent(agentOptions);
  const https = new HttpsAgent(agentOptions);

  const once = (
    url: URL,
    init: Parameters<FetchLike>[1],
  ): Promise<{ res: Response; reused: boolean } | { error: unknown; reused: boolean }> =>
    new Promise((resolve) => {
      const secure = url.protocol === 'https:';
      const headers: Record<string, string | number> = { ...init.headers };
      if (init.body !== undefined) headers['content-length'] = Buffer.byteLength(init.body);
      let reused = false;
      let settled = false;
      const done = (v: { res: Response; reused: boolean } | { error: unknown; reused: boolean }) => {
        if (!settled) {
          settled = true;
          resolve(v);
        }
      };
      const req = (secure ? httpsRequest : httpRequest)(
        url,
        { method: init.method, headers, agent: secure ? https : http, signal: init.signal },
        (res: IncomingMessage) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', (error) => done({ error, reused }));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            const status = res.statusCode ?? 0;
            const raw = res.headers;
            done({
              reused,
              res: {
                ok: status >= 200 && status < 300,
                status,
                headers: {
                  get(name: string) {
                    const v = raw[name.toLowerCase()];
                    return v === undefined ? null : Array.isArray(v) ? v.join(', ') : String(v);
                  },
                },
                text: async () => text,
              },
            });
          });
        },
      );
      req.on('socket', () => {
        reused = req.reusedSocket;
      });
      req.on('error', (error) => done({ error, reused }));
      req.end(init.body);
    });

  const fetch = (async (url: string, init: Parameters<FetchLike>[1]) => {
    const target = new URL(url);
    let outcome = await once(target, init);
    if ('error' in outcome && outcome.reused && isReset(outcome.error) && !init.signal?.aborted)
      outcome = await once(target, init);
    if ('error' in outcome) throw outcome.error;
    return outcome.res;
  }) as PooledFetch;
  fetch.close = () => {
    http.destroy();
    https.destroy();
  };
  return fetch;
}

function isReset(error: unknown): boolean {
  const code = (error as { code?: string } | null)?.code;
  return code === 'ECONNRESET' || code === 'EPIPE';
}
