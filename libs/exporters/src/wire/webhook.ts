import { createHmac, timingSafeEqual } from 'node:crypto';
import type { WireEvent } from './wire-event';

export const SIGNATURE_HEADER = 'x-tollgate-signature';
export const TIMESTAMP_HEADER = 'x-tollgate-timestamp';
export const IDEMPOTENCY_HEADER = 'idempotency-key';

/** The body of one webhook request. */
export interface WebhookBatch {
  /** Same on every retry of this batch: receivers deduplicate on it (or on each event's eventId). */
  batchId: string;
  exporter: string;
  projectId: string;
  events: WireEvent[];
}

/**
 * `v1=<hex HMAC-SHA256(secret, "<timestamp>.<body>")>`. The timestamp (unix seconds) is signed
 * with the body, so a receiver that checks it is recent rejects a replayed request.
 */
export function signWebhook(secret: string, timestamp: number, body: string): string {
  return 'v1=' + createHmac('sha256', secret).update(`${timestamp}.${body}`, 'utf8').digest('hex');
}

/**
 * For receivers: true when `signature` signs `body` at `timestamp` with `secret` and the
 * timestamp is within `toleranceSeconds` of now.
 */
export function verifyWebhook(
  secret: string,
  body: string,
  timestamp: string | number,
  signature: string,
  toleranceSeconds = 300,
  now = Date.now(),
): boolean {
  const ts = Number(timestamp);
  if (!Number.isInteger(ts) || Math.abs(now / 1000 - ts) > toleranceSeconds) return false;
  const expected = Buffer.from(signWebhook(secret, ts, body));
  const given = Buffer.from(signature);
  return expected.length === given.length && timingSafeEqual(expected, given);
}

/**
 * The signed request for a batch. `serializedEvents` (each event's JSON, already made when the
 * batch was sized) saves serializing every event a second time; the body is the same JSON.
 */
export function webhookRequest(input: {
  batch: WebhookBatch;
  signingSecret: string;
  headers?: Record<string, string>;
  now?: number;
  serializedEvents?: string[];
}): { body: string; headers: Record<string, string> } {
  const { events, ...envelope } = input.batch;
  const body = input.serializedEvents
    ? `${JSON.stringify(envelope).slice(0, -1)},"events":[${input.serializedEvents.join(',')}]}`
    : JSON.stringify({ ...envelope, events });
  const timestamp = Math.floor((input.now ?? Date.now()) / 1000);
  return {
    body,
    headers: {
      ...(input.headers ?? {}),
      'content-type': 'application/json',
      [TIMESTAMP_HEADER]: String(timestamp),
      [SIGNATURE_HEADER]: signWebhook(input.signingSecret, timestamp, body),
      [IDEMPOTENCY_HEADER]: input.batch.batchId,
    },
  };
}
