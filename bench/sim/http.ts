/** One HTTP exchange as a client sees it: an answer, a refusal, or a request whose fate is unknown. */
export type Outcome =
  | { kind: 'answer'; status: number; body: any; text: string; retryAfter: string | null }
  /** The connection was refused: the request reached no service, so nothing of it was done. */
  | { kind: 'refused' }
  /** Sent, and no answer came (a killed service, a reset connection, a timeout): it may have been done. */
  | { kind: 'lost'; error: string };

function errorCode(err: unknown): string {
  const e = err as { name?: string; code?: string; message?: string; cause?: { code?: string; message?: string } };
  if (e?.name === 'TimeoutError') return 'timeout';
  return e?.cause?.code ?? e?.code ?? e?.cause?.message ?? e?.message ?? String(err);
}

export async function exchange(
  url: string,
  method: string,
  path: string,
  token: string,
  body: unknown,
  timeoutMs: number,
): Promise<Outcome> {
  try {
    const res = await fetch(url + path, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.text();
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    return { kind: 'answer', status: res.status, body: parsed, text, retryAfter: res.headers.get('retry-after') };
  } catch (err) {
    const code = errorCode(err);
    return code === 'ECONNREFUSED' ? { kind: 'refused' } : { kind: 'lost', error: code };
  }
}
