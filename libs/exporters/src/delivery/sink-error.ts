/** A sink answered or failed in a way worth retrying (network, timeout, 408, 429, 5xx). */
export class SinkError extends Error {
  constructor(
    message: string,
    readonly permanent: boolean,
    readonly status?: number,
    /** From a Retry-After header, when the sink sent one. */
    readonly retryAfterMs?: number,
  ) {
    super(message);
  }
}

/** 408 and 429 mean "later"; any other 4xx (and 3xx: redirects are not followed) will not change on retry. */
export function isPermanentStatus(status: number): boolean {
  return status >= 300 && status < 500 && status !== 408 && status !== 429;
}

function retryAfterMs(header: string | null): number | undefined {
  if (!header) return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const at = Date.parse(header);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

/** POSTs a body with a hard timeout; resolves on 2xx, throws a SinkError otherwise. */
export async function postToSink(url: string, body: string, headers: Record<string, string>, timeoutMs: number): Promise<number> {
  let res: Response;
  try {
    res = await fetch(url, { method: 'POST', body, headers: { 'user-agent': 'tollgate-exporter/0.1', ...headers }, redirect: 'manual', signal: AbortSignal.timeout(timeoutMs) });
  } catch (err) {
    const e = err as Error & { cause?: { code?: string } };
    const reason = e.name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : (e.cause?.code ?? e.message);
    throw new SinkError(`POST ${url} failed: ${reason}`, false);
  }
  const text = await res.text().catch(() => '');
  if (res.status >= 200 && res.status < 300) return res.status;
  const excerpt = text.slice(0, 300).replace(/\s+/g, ' ');
  throw new SinkError(`POST ${url} answered ${res.status}${excerpt ? `: ${excerpt}` : ''}`, isPermanentStatus(res.status), res.status, retryAfterMs(res.headers.get('retry-after')));
}

/**
 * Exponential backoff with "equal jitter": half the doubled delay is fixed, half random, so
 * batches of many exporters failing together do not retry in lockstep. Capped at maxMs; a
 * sink's Retry-After is honoured up to the cap.
 */
export function backoffMs(attemptsMade: number, initialMs: number, maxMs: number, random = Math.random, retryAfter?: number): number {
  const exp = Math.min(maxMs, initialMs * 2 ** Math.max(0, attemptsMade - 1));
  const jittered = exp / 2 + random() * (exp / 2);
  return Math.round(Math.min(maxMs, Math.max(jittered, retryAfter ?? 0)));
}
