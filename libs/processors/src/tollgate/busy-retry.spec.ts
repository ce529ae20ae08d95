import { busyRetryDelay, checkUntilServed, isBusy } from './busy-retry';
import type { GuardCheckCallOptions, GuardCheckRequest, GuardCheckResponse, TollgateGuardClient } from './guard-client';

const answer = (overrides: Partial<GuardCheckResponse>): GuardCheckResponse => ({
  decision: 'allow',
  violations: [],
  warnings: [],
  skipped: [],
  usage: {},
  asOf: '2026-12-01T10:00:00.000Z',
  ...overrides,
});

describe('busyRetryDelay', () => {
  it('waits retryAfterMs, plus up to as much again at random', () => {
    expect([0, 0.5, 0.999999].map((r) => busyRetryDelay(1000, () => r))).toEqual([1000, 1500, 2000]);
  });
  it('still waits without a usable hint, and bounds a huge one', () => {
    expect([undefined, 0, -5, Number.NaN, Infinity].map((h) => busyRetryDelay(h, () => 0))).toEqual([
      100, 100, 100, 100, 100,
    ]);
    expect(busyRetryDelay(3_600_000, () => 0)).toBe(60_000);
  });
});

describe('isBusy', () => {
  it('is a deny with reason busy only; an allow is never retried', () => {
    expect(isBusy(answer({ decision: 'deny', reason: 'busy', retryAfterMs: 50 }))).toBe(true);
    expect(isBusy(answer({ decision: 'allow', reason: 'busy' }))).toBe(false);
    expect(isBusy(answer({ decision: 'deny', reason: 'guard unavailable (timeout); failMode closed' }))).toBe(false);
  });
});

describe('checkUntilServed', () => {
  beforeEach(() => jest.useFakeTimers({ now: new Date('2026-12-01T10:00:00Z') }));
  afterEach(() => jest.useRealTimers());

  it('returns the first answer that is not busy, with the time it took', async () => {
    const answers = [
      answer({ decision: 'deny', reason: 'busy', retryAfterMs: 100 }),
      answer({ decision: 'deny', reason: 'busy', retryAfterMs: 300 }),
      answer({}),
    ];
    const check = jest.fn(async (_request: GuardCheckRequest, _options?: GuardCheckCallOptions) => answers.shift()!);
    const client: TollgateGuardClient = { guard: { check }, events: { record: () => undefined } };
    const served = checkUntilServed(client, { context: { resourceId: 'r1' } }, 10_000, () => 0.5);
    await jest.advanceTimersByTimeAsync(600);
    await expect(served).resolves.toEqual({ response: answer({}), elapsedMs: 600 }); // 150 + 450
    expect(check.mock.calls.map((c) => c[1])).toEqual([
      { busyDeadlineMs: 10_000 },
      { busyDeadlineMs: 9_850 },
      { busyDeadlineMs: 9_400 },
    ]);
  });
});
