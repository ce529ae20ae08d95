import { caught } from '../../test/support/messages';
import { answer, finished, reserved, scriptedClient, stepArgs } from '../../test/support/guard-answers';
import type { GuardCheckResponse, GuardFinding, TollgateGuardClient } from '../tollgate/guard-client';
import { CostGuardProcessor } from './cost-guard.processor';

const violation: GuardFinding = {
  scope: 'resource',
  scopeKey: 'resource:r1',
  window: '7d',
  limitType: 'cost',
  usage: 1.2,
  limit: 1,
  unit: 'USD',
  threshold: 'hard',
  source: 'request',
};

// What is asked of Tollgate and when, with each step checked on its own path (check-ahead.spec
// covers the checks sent ahead of a step).
/** Its flushes land when the spec resolves their deliveries. */
const scriptedClientHeld = (answers: GuardCheckResponse[]) => scriptedClient(answers, { holdFlushes: true });
const guard = (client: TollgateGuardClient, onExceed?: 'shrink') =>
  new CostGuardProcessor({ maxCost: 1, client, onExceed, checkAhead: false, logger: { warn: () => undefined } });
const tick = () => new Promise((r) => setImmediate(r));

describe("CostGuardProcessor: a step's record is off the next step's path (given a step that called tools, when the next step is checked, then …)", () => {
  it("the step ends without waiting for its record, and the next check goes out with the record left to the client's batching (no flush)", async () => {
    const { client, log, deliveries } = scriptedClientHeld([reserved('rsv-0'), reserved('rsv-1')]);
    const g = guard(client);
    const state = {};
    await g.processInputStep(stepArgs(state, 0));
    await g.processLLMResponse(finished(0, state, 'tool-calls'));
    await g.processInputStep(stepArgs(state, 1));
    expect(log).toEqual([expect.stringMatching(/^check .+:0$/), 'record 0', expect.stringMatching(/^check .+:1$/)]);
    expect(deliveries).toHaveLength(0);
  });

  it("a run's records are stored by one flush, its last step's, before that step's hook resolves", async () => {
    const { client, log, deliveries } = scriptedClientHeld([reserved('rsv-0'), reserved('rsv-1'), reserved('rsv-2')]);
    const g = guard(client);
    const state = {};
    for (const step of [0, 1]) {
      await g.processInputStep(stepArgs(state, step));
      await g.processLLMResponse(finished(step, state, 'tool-calls'));
    }
    await g.processInputStep(stepArgs(state, 2));
    let done = false;
    const last = g.processLLMResponse(finished(2, state, 'stop')).then(() => (done = true));
    await tick();
    expect(done).toBe(false);
    expect(deliveries).toHaveLength(1);
    deliveries[0]!.resolve();
    await last;
    expect(log.filter((l) => !l.startsWith('check'))).toEqual(['record 0', 'record 1', 'record 2', 'flush', 'landed']);
  });

  it('records whose flush failed are recorded again at the next step (same event ids)', async () => {
    const { client, log } = scriptedClientHeld([
      reserved('rsv-0'),
      answer({ decision: 'deny', violations: [violation] }),
      reserved('rsv-1'),
      reserved('rsv-2'),
    ]);
    const ids: string[] = [];
    const record = client.events.record;
    client.events.record = (event) => (ids.push(event.eventId), record(event));
    client.events.flush = async () => {
      log.push('flush');
      throw new Error('503');
    };
    const g = guard(client);
    const state = {};
    await g.processInputStep(stepArgs(state, 0));
    await g.processLLMResponse(finished(0, state, 'tool-calls'));
    // A deny with step 0 unstored: flushed (fails), asked again, allowed.
    await expect(g.processInputStep(stepArgs(state, 1))).resolves.toBeUndefined();
    const done = [{ usage: { inputTokens: 10, outputTokens: 20, totalTokens: 30 } }];
    await g.processInputStep({ ...stepArgs(state, 2), steps: done });
    expect(log.filter((l) => !l.startsWith('check'))).toEqual(['record 0', 'flush', 'record 0']);
    expect(ids[1]).toBe(ids[0]);
  });

  it("an API error stores the run's earlier records before the error goes on", async () => {
    const { client, log, deliveries } = scriptedClientHeld([reserved('rsv-0'), reserved('rsv-1')]);
    const g = guard(client);
    const state = {};
    await g.processInputStep(stepArgs(state, 0));
    await g.processLLMResponse(finished(0, state, 'tool-calls'));
    await g.processInputStep(stepArgs(state, 1));
    const failed = g.processAPIError({ stepNumber: 1, state });
    await tick();
    deliveries[0]!.resolve();
    await failed;
    expect(log.slice(3)).toEqual(['release rsv-1', 'flush', 'landed']);
  });

  it('a deny taken while the record was not stored yet is asked again, same stepId, once it landed; the one after stands', async () => {
    const { client, log, checks, deliveries } = scriptedClientHeld([
      reserved('rsv-0'),
      answer({ decision: 'deny', violations: [violation] }),
      reserved('rsv-1'),
    ]);
    const g = guard(client);
    const state = {};
    await g.processInputStep(stepArgs(state, 0));
    await g.processLLMResponse(finished(0, state, 'tool-calls'));
    const second = g.processInputStep(stepArgs(state, 1));
    await tick();
    expect(log.slice(-2)).toEqual([expect.stringMatching(/:1$/), 'flush']); // asked, and now waits for the record
    deliveries[0]!.resolve();
    await expect(second).resolves.toBeUndefined();
    expect(log.slice(2)).toEqual([expect.stringMatching(/:1$/), 'flush', 'landed', expect.stringMatching(/:1$/)]);
    expect(checks[1]!.stepId).toBe(checks[2]!.stepId);
  });

  it('a deny with nothing unstored is final: one check, and the TripWire', async () => {
    const { client, checks } = scriptedClientHeld([answer({ decision: 'deny', violations: [violation] })]);
    const error = await caught(() => guard(client).processInputStep(stepArgs({}, 0)));
    expect(error.message).toBe('Cost guard: cost limit exceeded (1.2/1)');
    expect(checks).toHaveLength(1);
  });

  it('a shrink taken while the record was not stored yet is released and asked again under a new stepId', async () => {
    const adjust = (maxOutputTokens: number) => ({
      maxOutputTokens,
      requestedMaxOutputTokens: 500,
      limitedBy: [violation],
    });
    const { client, log, checks, deliveries } = scriptedClientHeld([
      reserved('rsv-0'),
      reserved('rsv-small', { adjust: adjust(100) }),
      reserved('rsv-fair', { adjust: adjust(300) }),
    ]);
    const g = guard(client, 'shrink');
    const state = {};
    await g.processInputStep(stepArgs(state, 0));
    await g.processLLMResponse(finished(0, state, 'tool-calls'));
    const second = g.processInputStep(stepArgs(state, 1));
    await tick();
    deliveries[0]!.resolve();
    const result = await second;
    expect(log.slice(2)).toEqual([
      expect.stringMatching(/:1$/),
      'flush',
      'landed',
      'release rsv-small',
      expect.stringMatching(/:1:settled$/),
    ]);
    expect(checks.map((c) => [c.onExceed, c.minOutputTokens])).toEqual([
      ['shrink', 1],
      ['shrink', 1],
      ['shrink', 1],
    ]);
    expect(result).toMatchObject({ modelSettings: { maxOutputTokens: 300 } });
  });

  it('a shrink whose reservation cannot be released stands as it was (no second reservation)', async () => {
    const adjust = { maxOutputTokens: 100, requestedMaxOutputTokens: 500, limitedBy: [violation] };
    const { client, checks, deliveries } = scriptedClientHeld([reserved('rsv-0'), reserved('rsv-small', { adjust })]);
    client.guard.release = async () => {
      throw new Error('503');
    };
    const g = guard(client, 'shrink');
    const state = {};
    await g.processInputStep(stepArgs(state, 0));
    await g.processLLMResponse(finished(0, state, 'tool-calls'));
    const second = g.processInputStep(stepArgs(state, 1));
    await tick();
    deliveries[0]!.resolve();
    expect(await second).toMatchObject({ modelSettings: { maxOutputTokens: 100 } });
    expect(checks).toHaveLength(2);
  });

  it("the run's last step (no tool calls) is recorded and landed before its hook resolves", async () => {
    const { client, log, deliveries } = scriptedClientHeld([reserved('rsv-0')]);
    const g = guard(client);
    const state = {};
    await g.processInputStep(stepArgs(state, 0));
    let done = false;
    const last = g.processLLMResponse(finished(0, state, 'stop')).then(() => (done = true));
    await tick();
    expect(done).toBe(false);
    deliveries[0]!.resolve();
    await last;
    expect(log.slice(1)).toEqual(['record 0', 'flush', 'landed']);
  });

  it('a TripWire waits for the records of the steps that ran', async () => {
    const { client, log, deliveries } = scriptedClientHeld([
      reserved('rsv-0'),
      answer({ decision: 'deny', violations: [violation] }),
      answer({ decision: 'deny', violations: [violation] }),
    ]);
    const g = guard(client);
    const state = {};
    await g.processInputStep(stepArgs(state, 0));
    await g.processLLMResponse(finished(0, state, 'tool-calls'));
    const second = caught(() => g.processInputStep(stepArgs(state, 1)));
    await tick();
    deliveries[0]!.resolve();
    expect((await second).message).toBe('Cost guard: cost limit exceeded (1.2/1)');
    expect(log.indexOf('landed')).toBeGreaterThan(0);
  });
});
