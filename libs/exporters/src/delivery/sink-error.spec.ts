import { backoffMs, isPermanentStatus } from './sink-error';

describe('delivery failures', () => {
  it('retries 408, 429 and 5xx; gives up on every other 4xx', () => {
    expect([400, 401, 403, 404, 410, 422].map(isPermanentStatus)).toEqual([true, true, true, true, true, true]);
    expect([408, 429, 500, 502, 503].map(isPermanentStatus)).toEqual([false, false, false, false, false]);
  });

  it('doubles the backoff with jitter in [half, full], capped, honouring Retry-After up to the cap', () => {
    expect(backoffMs(1, 1000, 60_000, () => 0)).toBe(500);
    expect(backoffMs(1, 1000, 60_000, () => 1)).toBe(1000);
    expect(backoffMs(4, 1000, 60_000, () => 1)).toBe(8000);
    expect(backoffMs(30, 1000, 60_000, () => 1)).toBe(60_000);
    expect(backoffMs(1, 1000, 60_000, () => 0, 20_000)).toBe(20_000);
    expect(backoffMs(1, 1000, 60_000, () => 0, 999_000)).toBe(60_000);
  });
});
