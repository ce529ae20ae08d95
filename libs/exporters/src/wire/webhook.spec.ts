import { signWebhook, verifyWebhook, webhookRequest } from './webhook';

describe('webhook signature', () => {
  const secret = 'whsec-0123456789abcdef';
  const now = Date.UTC(2026, 10, 30, 12, 0, 0);

  it('signs the timestamp and the body, and a receiver verifies it', () => {
    const { body, headers } = webhookRequest({ batch: { batchId: 'xb_1', exporter: 'billing', projectId: 'p', events: [] }, signingSecret: secret, now });
    expect(headers['x-tollgate-timestamp']).toBe(String(now / 1000));
    expect(headers['idempotency-key']).toBe('xb_1');
    expect(verifyWebhook(secret, body, headers['x-tollgate-timestamp'], headers['x-tollgate-signature'], 300, now)).toBe(true);
  });

  it('rejects another body, another secret, and an old timestamp', () => {
    const ts = now / 1000;
    const sig = signWebhook(secret, ts, '{"a":1}');
    expect(verifyWebhook(secret, '{"a":2}', ts, sig, 300, now)).toBe(false);
    expect(verifyWebhook('another-secret-000000', '{"a":1}', ts, sig, 300, now)).toBe(false);
    expect(verifyWebhook(secret, '{"a":1}', ts, sig, 300, now + 301_000)).toBe(false);
  });
});
