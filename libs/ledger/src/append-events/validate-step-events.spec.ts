import { validateStepEvents } from './validate-step-events';

const now = new Date('2026-06-01T12:00:00.000Z');
const event = (over: Record<string, unknown> = {}) => ({
  eventId: 'e1',
  occurredAt: '2026-06-01T11:59:00.000Z',
  traceId: 't',
  entityType: 'agent',
  provider: 'openai',
  model: 'gpt-4o',
  usage: { inputTokens: 1, outputTokens: 1 },
  ...over,
});

const bounds = { maxFutureSkewMs: 60_000, maxAgeDays: 35 };

describe('validateStepEvents', () => {
  it('keeps valid events with their index and rejects the others with the field path', () => {
    const { valid, decided } = validateStepEvents(
      [event(), event({ eventId: 'e2', usage: { inputTokens: -1, outputTokens: 0 } })],
      now,
      bounds,
    );
    expect(valid.map((v) => [v.index, v.event.eventId])).toEqual([[0, 'e1']]);
    expect(decided.get(1)).toEqual({
      index: 1,
      eventId: 'e2',
      status: 'rejected',
      field: 'events[1].usage.inputTokens',
      reason: 'must not be negative',
    });
  });

  it('treats a repeated eventId in one batch as a duplicate of the first', () => {
    const { valid, decided } = validateStepEvents([event(), event()], now, bounds);
    expect(valid).toHaveLength(1);
    expect(decided.get(1)).toEqual({ index: 1, eventId: 'e1', status: 'duplicate' });
  });

  it('accepts an occurredAt within the allowed skew and rejects one past it', () => {
    const within = validateStepEvents([event({ occurredAt: '2026-06-01T12:01:00.000Z' })], now, bounds);
    expect(within.valid).toHaveLength(1);
    const past = validateStepEvents([event({ occurredAt: '2026-06-01T12:01:00.001Z' })], now, bounds);
    expect(past.decided.get(0)).toMatchObject({
      status: 'rejected',
      field: 'events[0].occurredAt',
      reason: 'is more than 60000 ms in the future',
    });
  });

  it('rejects an event older than the accepted age, naming the field and the limit (so no old month gets a partition)', () => {
    const oldest = validateStepEvents([event({ occurredAt: '2026-04-27T12:00:00.000Z' })], now, bounds);
    expect(oldest.valid).toHaveLength(1);
    const older = validateStepEvents(
      [event({ occurredAt: '2026-04-27T11:59:59.999Z' }), event({ eventId: 'e2', occurredAt: '2000-01-01T00:00:00Z' })],
      now,
      bounds,
    );
    expect(older.valid).toHaveLength(0);
    expect([...older.decided.values()].map((r) => r.status === 'rejected' && [r.field, r.reason])).toEqual([
      ['events[0].occurredAt', 'is more than 35 days in the past (the oldest this project accepts)'],
      ['events[1].occurredAt', 'is more than 35 days in the past (the oldest this project accepts)'],
    ]);
  });

  it('names a missing field as required and an unknown one as unknown', () => {
    const { decided } = validateStepEvents(
      [{ ...event(), model: undefined }, event({ eventId: 'x', colour: 'red' })],
      now,
      bounds,
    );
    expect(decided.get(0)).toMatchObject({ field: 'events[0].model', reason: 'is required' });
    expect(decided.get(1)).toMatchObject({ field: 'events[1].colour', reason: 'is not a known field' });
  });

  it('says what is wrong with a present but invalid value, and "is required" only for a missing one', () => {
    const { decided } = validateStepEvents(
      [event({ usage: { inputTokens: 1, outputTokens: 1.5 } }), event({ eventId: 'e2', traceId: 7 })],
      now,
      bounds,
    );
    expect(decided.get(0)).toMatchObject({ field: 'events[0].usage.outputTokens', reason: 'must be an integer' });
    expect(decided.get(1)).toMatchObject({
      field: 'events[1].traceId',
      reason: expect.not.stringContaining('required'),
    });
  });

  it('rejects an event that is not an object', () => {
    const { decided } = validateStepEvents(['nope', null], now, bounds);
    expect(decided.get(0)).toMatchObject({ status: 'rejected', eventId: null, field: 'events[0]' });
    expect(decided.get(1)).toMatchObject({ status: 'rejected', field: 'events[1]' });
  });
});
