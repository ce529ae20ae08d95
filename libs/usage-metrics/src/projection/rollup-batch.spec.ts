import { EVENT_COLUMNS } from '@tollgate/database';
import { foldRollups, ROLLUP_SELECT } from './rollup-batch';

const row = (over: Record<string, unknown>) => ({
  type: 'StepUsageRecorded',
  project_id: 'p1',
  occurred_at: new Date('2026-03-04T10:15:30.250Z'),
  entity_type: 'agent',
  entity_name: 'a',
  provider: 'openai',
  model: 'gpt-4o',
  cost_unit: 'USD',
  environment: null,
  service_name: null,
  resource_id: 'r1',
  thread_id: 't1',
  user_id: null,
  organization_id: null,
  session_id: null,
  input_tokens: '1000',
  output_tokens: '200',
  cache_read_tokens: '0',
  cache_write_tokens: '0',
  reasoning_tokens: '0',
  audio_input_tokens: '0',
  image_input_tokens: '0',
  duration_ms: 12.5,
  input_cost_micros: '2500',
  output_cost_micros: '2000',
  ...over,
});

describe('foldRollups', () => {
  it('adds each record to the minute, hour and day cubes and to the hourly scoped cube', () => {
    const cells = foldRollups([
      row({}),
      row({
        occurred_at: new Date('2026-03-04T10:59:59.999Z'),
        input_tokens: '10',
        duration_ms: 0.1,
        input_cost_micros: null,
        output_cost_micros: null,
        cost_unit: null,
      }),
    ]);
    const input = cells.filter((c) => c.name === 1 && !c.cube.endsWith('u'));
    // Same hour/day/scope bucket; two minutes; the second event has other dimensions (no cost unit).
    expect(
      input
        .map((c) => [
          c.cube,
          new Date(c.bucketStart).toISOString(),
          c.count,
          c.sum.toString(),
          c.costMicros,
          c.costCount,
        ])
        .sort(),
    ).toEqual([
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
    expect(unitDay.map((c) => [c.dimsValues.filter((v) => v !== null), c.count, c.sum.toString()])).toEqual([
      [['USD'], 1, '1000'],
      [[], 1, '10'],
    ]);
  });

  it('sums durations exactly and skips events that are not step usage', () => {
    const cells = foldRollups([row({ duration_ms: 0.1 }), row({ duration_ms: 0.2 }), row({ type: 'BudgetReserved' })]);
    const duration = cells.find((c) => c.name === 12 && c.cube === 'd')!;
    expect([duration.count, duration.sum.toString(), duration.min, duration.max]).toEqual([2, '0.3', 0.1, 0.2]);
  });
});

describe('foldRollups with corrections (StepRepriced)', () => {
  const unpriced = row({ cost_unit: null, input_cost_micros: null, output_cost_micros: null });
  // The correction carries its step's columns with the new cost, and the old cost in data.
  const correction = (
    old: { costUnit: string | null; inputCostMicros: number | null; outputCostMicros: number | null },
    over: Record<string, unknown> = {},
  ) =>
    row({
      type: 'StepRepriced',
      data: { stepEventId: 's1', sequence: 1, old: { costMicros: null, priceId: null, source: null, ...old }, new: {} },
      ...over,
    });
  const measures = (cells: ReturnType<typeof foldRollups>) =>
    cells
      .filter((c) => c.count !== 0)
      .map((c) =>
        [
          c.cube,
          c.name,
          c.bucketStart,
          c.dimsKey,
          c.count,
          c.sum.toString(),
          c.min,
          c.max,
          c.costMicros,
          c.costCount,
        ].join('|'),
      )
      .sort();

  it('moves the step from its old cost unit to its new one: the same cells as the step priced at ingest', () => {
    const fixed = foldRollups([
      unpriced,
      correction({ costUnit: null, inputCostMicros: null, outputCostMicros: null }),
    ]);
    expect(measures(fixed)).toEqual(measures(foldRollups([row({})])));
    // The unpriced cells are left empty (and marked, so the store deletes them).
    const emptied = fixed.filter((c) => c.count === 0);
    expect(emptied.length).toBeGreaterThan(0);
    expect(
      emptied.every(
        (c) =>
          c.retracted &&
          c.dimsValues[4] === null &&
          Number(c.sum.toString()) === 0 &&
          c.costMicros === 0n &&
          c.costCount === 0,
      ),
    ).toBe(true);
  });

  it('in a later batch than its step, adds only the difference: −old in the old unit, +new in the new', () => {
    const cells = foldRollups([correction({ costUnit: 'USD', inputCostMicros: 2000, outputCostMicros: 1000 })]);
    const input = cells.filter((c) => c.name === 1 && c.cube === 'd');
    // Same unit: the step stays where it was (count and sum net to 0), its cost moves by +500 / +1000.
    expect(input.map((c) => [c.count, c.sum.toString(), c.costMicros, c.costCount])).toEqual([[0, '0', 500n, 0]]);
    const output = cells.find((c) => c.name === 2 && c.cube === 'd')!;
    expect(output.costMicros).toBe(1000n);
    // Another unit: one cell loses the step, the other gains it.
    const moved = foldRollups([correction({ costUnit: 'EUR', inputCostMicros: 2000, outputCostMicros: 1000 })]).filter(
      (c) => c.name === 1 && c.cube === 'du',
    );
    expect(
      moved.map((c) => [c.dimsValues[4], c.count, c.sum.toString(), c.costMicros, c.costCount, Boolean(c.retracted)]),
    ).toEqual([
      ['EUR', -1, '-1000', -2000n, -1, true],
      ['USD', 1, '1000', 2500n, 1, false],
    ]);
  });
});

describe('ROLLUP_SELECT (the columns the projector reads)', () => {
  const selected = ROLLUP_SELECT.split(', ').map((c) => c.split(' AS ').pop()!);
  // Every column of the log set, none zero or null: a column the fold reads but the projector
  // does not select would change some cell here.
  const full = (over: Record<string, unknown>) =>
    Object.fromEntries(
      EVENT_COLUMNS.map((c, i) => [
        c,
        over[c] ??
          (c.endsWith('_tokens') || c.endsWith('_micros') || c === 'duration_ms' ? String(100 + 7 * i) : `${c}-x`),
      ]),
    );
  const only = (r: Record<string, unknown>) => Object.fromEntries(selected.map((c) => [c, r[c]]));
  const fields = (cells: ReturnType<typeof foldRollups>) =>
    cells.map((c) => [c.cube, c.name, c.dimsKey, c.count, c.sum.toString(), c.min, c.max, c.costMicros, c.costCount]);

  it('gives the fold everything it reads: the same cells from the selected columns as from the whole row', () => {
    const step = full({ type: 'StepUsageRecorded', occurred_at: new Date('2026-03-04T10:15:30.250Z') });
    const correction = full({
      type: 'StepRepriced',
      occurred_at: new Date('2026-03-04T10:15:30.250Z'),
      data: { old: { costUnit: 'EUR', inputCostMicros: 1, outputCostMicros: 2 } },
    });
    const rows = [step, correction];
    expect(fields(foldRollups(rows)).length).toBeGreaterThan(40);
    expect(fields(foldRollups(rows.map(only)))).toEqual(fields(foldRollups(rows)));
    expect(selected).toEqual(expect.arrayContaining(['tx', 'position', 'data']));
  });
});
