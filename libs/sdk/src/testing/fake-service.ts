// Test double of the service for the SDK's unit specs (not exported from the package).
import type { FetchLike } from '../http';

export interface FakeRequest {
  url: string;
  path: string;
  method: string;
  body: any;
  rawBody: string | undefined;
  headers: Record<string, string>;
  signal?: AbortSignal;
  at: number;
}

export type FakeReply = { status: number; body?: unknown; headers?: Record<string, string> } | Error | 'hang';

/** A `fetch` that answers from `handler`, recording every request with the (fake) time it came. */
export function fakeService(handler: (req: FakeRequest, n: number) => FakeReply | Promise<FakeReply>) {
  const requests: FakeRequest[] = [];
  const fetch: FetchLike = async (url, init) => {
    const u = new URL(url);
    const req: FakeRequest = {
      url,
      path: u.pathname + u.search,
      method: init.method,
      rawBody: init.body,
      body: init.body ? JSON.parse(init.body) : undefined,
      headers: init.headers,
      signal: init.signal,
      at: Date.now(),
    };
    requests.push(req);
    const reply = await handler(req, requests.length);
    if (reply === 'hang') {
      return new Promise((_, reject) =>
        init.signal?.addEventListener('abort', () => reject(new DOMException('aborted', 'AbortError'))),
      );
    }
    if (reply instanceof Error) throw reply;
    const text = reply.body === undefined ? '' : JSON.stringify(reply.body);
    return {
      ok: reply.status < 300,
      status: reply.status,
      headers: { get: (n: string) => reply.headers?.[n.toLowerCase()] ?? null },
      text: async () => text,
    };
  };
  return { fetch, requests };
}

/** The service's answer accepting every event of an ingest request. */
export function acceptAll(req: FakeRequest): FakeReply {
  const events = req.body.events as { eventId: string }[];
  return {
    status: 200,
    body: {
      accepted: events.length,
      duplicates: 0,
      rejected: 0,
      results: events.map((e, index) => ({ index, eventId: e.eventId, status: 'accepted', position: String(index) })),
    },
  };
}

export const refused = () => Object.assign(new TypeError('fetch failed'), { cause: { code: 'ECONNREFUSED' } });

/** A valid event as `events.record` takes it. */
export function step(overrides: Record<string, unknown> = {}): any {
  return {
    traceId: 'trace-1',
    resourceId: 'res-1',
    entityType: 'agent',
    provider: 'openai',
    model: 'gpt-4o',
    usage: { inputTokens: 100, outputTokens: 20 },
    ...overrides,
  };
}
