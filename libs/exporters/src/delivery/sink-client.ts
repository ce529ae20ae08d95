import { request as httpRequest, Agent as HttpAgent, type ClientRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest, Agent as HttpsAgent } from 'node:https';
import { isIP } from 'node:net';
import { DestinationRefused } from '../destination/destination-policy';
import { unbracket } from '../destination/ip-address';
import { UnresolvedHost, type Destinations } from '../destination/destinations';
import { isReservedHeader } from '../wire/reserved-headers';
import { isPermanentStatus, SinkError } from './sink-error';

/** The most of a receiver's answer that is read (and discarded); past it the connection is cut. */
export const MAX_ANSWER_BYTES = 64 * 1024;

/**
 * What the tenant is told of any failure to get an answer. One message for refused, reset and
 * timed-out connections and for names that do not resolve, so that an exporter cannot tell
 * which of them happened (and so scan ports); the cause is in the worker's log.
 */
export const NO_ANSWER = 'no answer from the receiver (connection failed, was closed, or timed out)';

// Sockets are pooled by the IP connected to (and the TLS server name): a reused socket goes to
// an address that was checked when it was opened.
const agents = { 'http:': new HttpAgent({ keepAlive: true }), 'https:': new HttpsAgent({ keepAlive: true }) };

function reasonOf(status: number): string {
  if (status >= 300 && status < 400) return 'a redirect, which exporters do not follow';
  if (status === 408 || status === 429) return 'the receiver asked to try later';
  if (status >= 400 && status < 500) return 'the receiver refused the batch';
  if (status >= 500) return 'the receiver failed';
  return 'not a success status';
}

function retryAfterMs(header: string | string[] | undefined): number | undefined {
  const value = Array.isArray(header) ? header[0] : header;
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

/**
 * POSTs a body to a checked destination with a hard deadline; resolves with the status on 2xx,
 * throws a SinkError otherwise. The host is resolved and checked here, for this request, and the
 * connection goes to the checked IP (the Host header and the TLS server name stay the URL's
 * host). Redirects are not followed. No byte of the answer is kept: it is read and dropped (so
 * that the socket can be reused) until MAX_ANSWER_BYTES have arrived, then the connection is cut.
 */
export async function postToSink(
  destinations: Destinations,
  rawUrl: string,
  body: string,
  headers: Record<string, string>,
  timeoutMs: number,
): Promise<number> {
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(), timeoutMs);
  const unreachable = (detail: string) =>
    new SinkError(`POST ${rawUrl} failed: ${NO_ANSWER}`, false, undefined, undefined, detail);
  try {
    let target;
    try {
      target = await Promise.race([
        destinations.resolve(rawUrl),
        new Promise<never>((_, reject) =>
          deadline.signal.addEventListener('abort', () => reject(new UnresolvedHost('no DNS answer in time')), {
            once: true,
          }),
        ),
      ]);
    } catch (err) {
      if (err instanceof DestinationRefused)
        throw new SinkError(`POST ${rawUrl} refused: the destination ${err.message}`, true);
      if (err instanceof UnresolvedHost) throw unreachable(`resolve ${err.message}`);
      throw err;
    }
    const { url, address, family } = target;
    const payload = Buffer.from(body, 'utf8');
    const outgoing: Record<string, string | number> = { 'user-agent': 'tollgate-exporter/0.1' };
    for (const [name, value] of Object.entries(headers))
      if (!isReservedHeader(name)) outgoing[name.toLowerCase()] = value;
    outgoing.host = url.host;
    outgoing['content-length'] = payload.length;

    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    const serverName = unbracket(url.hostname).replace(/\.$/, '');
    const res = await new Promise<IncomingMessage>((resolve, reject) => {
      let req: ClientRequest;
      try {
        req = send({
          host: address,
          family,
          port: url.port || (url.protocol === 'https:' ? 443 : 80),
          path: `${url.pathname}${url.search}`,
          method: 'POST',
          headers: outgoing,
          agent: agents[url.protocol as 'http:' | 'https:'],
          signal: deadline.signal,
          // Certificates are checked against the URL's host name, not the IP connected to.
          ...(url.protocol === 'https:' && !isIP(serverName) ? { servername: serverName } : {}),
        });
      } catch (err) {
        // A header stored before header values were validated.
        return reject(
          new SinkError(
            `POST ${rawUrl} not sent: a configured header is not valid in HTTP`,
            true,
            undefined,
            undefined,
            (err as Error).message,
          ),
        );
      }
      req.once('response', resolve);
      req.on('error', (err: Error & { code?: string }) =>
        reject(unreachable(deadline.signal.aborted ? `no answer within ${timeoutMs} ms` : (err.code ?? err.message))),
      );
      req.end(payload);
    });
    const status = res.statusCode ?? 0;
    await discardAnswer(res);
    if (status >= 200 && status < 300) return status;
    throw new SinkError(
      `POST ${rawUrl} answered ${status} (${reasonOf(status)})`,
      isPermanentStatus(status),
      status,
      retryAfterMs(res.headers['retry-after']),
    );
  } finally {
    clearTimeout(timer);
  }
}

/** Reads the answer to its end without keeping it, or cuts the connection past MAX_ANSWER_BYTES. */
function discardAnswer(res: IncomingMessage): Promise<void> {
  return new Promise((resolve) => {
    let seen = 0;
    res.on('data', (chunk: Buffer) => {
      seen += chunk.length;
      if (seen > MAX_ANSWER_BYTES) res.destroy();
    });
    res.once('end', () => resolve());
    res.once('close', () => resolve());
    res.on('error', () => resolve());
  });
}
