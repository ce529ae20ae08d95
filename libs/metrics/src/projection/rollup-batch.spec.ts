import { foldRollups } from './rollup-batch';

const row = (over: Record<string, unknown>) => ({
  type: 'StepUsageRecorded', project_id: 'p1', occurred_at: new Date('2026-03-04T10:15:30.250Z'),
  entity_type: 'agent', entity_name: 'a', provider: 'openai', model: 'gpt-4o', cost_unit: 'USD', environment: null, service_name: null,
  resource_id: 'r1', thread_id: 't1', user_id: null, organization_id: null, session_id: null,
  input_tokens: '1000', output_tokens: '200', cache_read_tokens: '0', cache_write_tokens: '0', reasoning_tokens: '0', audio_input_tokens: '0', image_input_tokens: '0',
  duration_ms: 12.5, input_cost_micros: '2500', output_cost_micros: '2000', ...over,
});

describe('foldRollups', () => {
  it('adds each record to the minute, hour and day cubes and to the hourly scoped cube', () => {
    const cells = foldRollups([row({}), row({ occurred_at: new Date('2026-03-04T10:59:59.999Z'), input_tokens: '10', duration_ms: 0.1, input_cost_micros: null, output_cost_micros: null, cost_unit: null })]);
    const input = cells.filter((c) => c.name === 1 && !c.cube.endsWith('u'));
    // Same hour/day/scope bucket; two minutes; the second event has other dimensions (no cost unit).
    expect(input.map((c) => [c.cube, new Date(c.bucketStart).toISOString(), c.count, c.sum.toString(), c.costMicros, c.costCount]).sort()).toEqual([
      ['d', '2026-03-04T00:00:00.000Z', 1, '10', 0n, 0],
      ['d', '2026-03-04T00:00:00.000Z', 1, '1000', 2500n, 1],
      ['h', '2026-03-04T10:00:00.000Z', 1, '10', 0n, 0],
      ['h', '2026-03-04T10:00:00.000Z', 1, '1000', 2500n, 1],
      ['m', '2026-03-04T10:15:00.000Z', 1, '1000', 2500n, 1],
      ['m', '2026-03-04T10:59:00.000Z', 1, '10', 0n, 0],
      ['scope', '2026-03-04T10:00:00.000Z', 1, '10', 0n, 0],
      ['scope', '2026-03-04T10:00:00.000Z', 1, '1000', 2500n, 1],
    ]);
    expect(input.find((c) => c.cube === 'scope')!.dimsValues.slice(7, 9)).toEqual(['r1', 't1']);
    expect(input.find((c) => c.cube === 'h')!.dimsValues.slice(7, 9)).toEqual([null, null]);
    // The cost-unit cube keeps only the unit: one cell per unit and bucket.
    const unitDay = cells.filter((c) => c.name === 1 && c.cube === 'du');
    expect(unitDay.map((c) => [c.dimsValues.filter((v) => v !== null), c.count, c.sum.toString()])).toEqual([[['USD'], 1, '1000'], [[], 1, '10']]);
  });

  it('sums durations exactly and skips events that are not step usage', () => {
    const cells = foldRollups([row({ duration_ms: 0.1 }), row({ duration_ms: 0.2 }), row({ type: 'BudgetReserved' })]);
    const duration = cells.find((c) => c.name === 12 && c.cube === 'd')!;
    expect([duration.count, duration.sum.toString(), duration.min, duration.max]).toEqual([2, '0.3', 0.1, 0.2]);
  });
});
