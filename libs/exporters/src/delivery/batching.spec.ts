import type { LoggedEvent } from '@tollgate/database';
import { cutBatch } from './batching';

let pos = 0n;
function row(type = 'StepUsageRecorded', recordedAt = new Date(0), model = 'gpt-4o'): LoggedEvent {
  pos += 1n;
  return {
    tx: '100',
    position: pos,
    projectId: 'p',
    eventId: `e${pos}`,
    type,
    occurredAt: recordedAt,
    recordedAt,
    row: { model, input_tokens: 10n, output_tokens: 2n },
  };
}
const limits = { maxEvents: 3, maxBytes: 1_000_000, maxWaitMs: 1000 };

describe('cutBatch', () => {
  it('flushes a full batch at once, and waits for a small one until its oldest event is maxWaitMs old', () => {
    const full = cutBatch([row(), row(), row()], ['StepUsageRecorded'], limits, 10);
    expect(full.flush && full.events.map((e) => e.eventId)).toHaveLength(3);
    expect(cutBatch([row()], ['StepUsageRecorded'], limits, 400)).toEqual({ flush: false, waitMs: 600 });
    const due = cutBatch([row()], ['StepUsageRecorded'], limits, 1000);
    expect(due.flush).toBe(true);
  });

  it('cuts before the event that would pass maxBytes, but always sends at least one', () => {
    const big = 'x'.repeat(2000);
    const rows = [row(undefined, undefined, big), row(undefined, undefined, big), row()];
    const cut = cutBatch(rows, ['*'], { ...limits, maxBytes: 2500 }, 0);
    expect(cut.flush && cut.events.length).toBe(1);
    expect(cut.flush && cut.rows.length).toBe(1);
  });

  it('keeps unsent types in the range so the checkpoint passes them, without sending them', () => {
    const rows = [row('GuardDecided'), row(), row('GuardDecided')];
    const cut = cutBatch(rows, ['StepUsageRecorded'], limits, 5000);
    expect(cut.flush && cut.rows.map((r) => r.type)).toEqual(['GuardDecided', 'StepUsageRecorded', 'GuardDecided']);
    expect(cut.flush && cut.events.map((e) => e.type)).toEqual(['StepUsageRecorded']);
  });
});
