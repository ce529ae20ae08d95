import { signWebhook, verifyWebhook, webhookRequest } from './webhook';

describe('webhook signature', () => {
  const secret = 'whsec-0123456789abcdef';
  const now = Date.UTC(2026, 10, 30, 12, 0, 0);

  it('signs the timestamp and the body, and a receiver verifies it', () => {
    const { body, headers } = webhookRequest({
      batch: { batchId: 'xb_1', exporter: 'billing', projectId: 'p', events: [] },
      signingSecret: secret,
      now,
    });
    expect(headers['x-tollgate-timestamp']).toBe(String(now / 1000));
    expect(headers['idempotency-key']).toBe('xb_1');
    expect(
      verifyWebhook(secret, body, headers['x-tollgate-timestamp'], headers['x-tollgate-signature'], 300, now),
    ).toBe(true);
  });

  it('builds the same body from events serialized ahead', () => {
    const events = [{ eventId: 'a' }, { eventId: 'b', n: 1 }] as never[];
    const batch = { batchId: 'xb_1', exporter: 'billing', projectId: 'p', events };
    const plain = webhookRequest({ batch, signingSecret: secret, now });
    const reused = webhookRequest({
      batch,
      signingSecret: secret,
      now,
      serializedEvents: events.map((e) => JSON.stringify(e)),
    });
    expect(reused.body).toBe(plain.body);
    expect(JSON.parse(reused.body)).toEqual(batch);
  });

  it('rejects another body, another secret, and an old timestamp', () => {
    const ts = now / 1000;
    const sig = signWebhook(secret, ts, '{"a":1}');
    expect(verifyWebhook(secret, '{"a":2}', ts, sig, 300, now)).toBe(false);
    expect(verifyWebhook('another-secret-000000', '{"a":1}', ts, sig, 300, now)).toBe(false);
    expect(verifyWebhook(secret, '{"a":1}', ts, sig, 300, now + 301_000)).toBe(false);
  });
});
