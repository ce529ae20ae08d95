import { text, toolMessage } from '../../test/support/messages';
import { answer, finished, reserved, scriptedClient, stepArgs } from '../../test/support/guard-answers';
import type { GuardCheckRequest, TollgateGuardClient } from '../tollgate/guard-client';
import { aheadOf, CHECK_AHEAD_HOLD_MS, CHECK_AHEAD_TOKENS, covers } from './check-ahead';
import { CostGuardProcessor } from './cost-guard.processor';
import type { CostGuardOptions } from './options';

const declined = () => answer({ decision: 'deny', reason: 'tentative' });

const question = text('user', 'What does the invoice say?');
/** The step's args; each step after the first holds the tool traffic of those before it (`toolResult`: its size). */
const step = (state: Record<string, unknown>, stepNumber: number, toolResult = 'found') =>
  stepArgs(state, stepNumber, [
    question,
    ...Array.from({ length: stepNumber }, (_, i) => toolMessage(`call-${i}`, 'lookup', { q: i }, toolResult)),
  ]);
/** Step `stepNumber` of the run in `state`, checked and then ended with tool calls. */
async function toolStep(
  g: CostGuardProcessor,
  state: Record<string, unknown>,
  stepNumber: number,
  toolResult?: string,
) {
  await g.processInputStep(step(state, stepNumber, toolResult));
  await g.processLLMResponse(finished(stepNumber, state, 'tool-calls'));
}
const guard = (client: TollgateGuardClient, options: Partial<CostGuardOptions> = {}) =>
  new CostGuardProcessor({ maxCost: 1, client, logger: { warn: () => undefined }, ...options });

describe('CostGuardProcessor checks a step ahead (given a step that called tools, when it ends, then …)', () => {
  it('the next step is checked and reserved while the tools run, tentatively, and runs on that reservation without a check of its own', async () => {
    const { client, log, checks, recorded } = scriptedClient([reserved('rsv-0'), reserved('rsv-1')]);
    const g = guard(client);
    const state = {};
    await toolStep(g, state, 0);
    // Sent before the step's record is handed to the client's batch.
    expect(log).toEqual([expect.stringMatching(/:0$/), expect.stringMatching(/:1:ahead \(ahead\)$/), 'record 0']);
    const [own, ahead] = checks;
    // Sized for the step's prompt, its 20 output tokens and room for the tool results; never shrunk.
    expect(ahead).toEqual({
      ...own,
      stepId: expect.stringMatching(/:1:ahead$/),
      tentative: true,
      estimate: { ...own!.estimate!, inputTokens: own!.estimate!.inputTokens + 20 + CHECK_AHEAD_TOKENS },
    });

    await g.processInputStep(step(state, 1));
    expect(checks).toHaveLength(2);
    await g.processLLMResponse(finished(1, state, 'stop'));
    // Its record settles the reservation made ahead.
    expect(recorded.map((r) => [r.stepIndex, r.reservationId])).toEqual([
      [0, 'rsv-0'],
      [1, 'rsv-1'],
    ]);
    expect(log.filter((l) => l.startsWith('release'))).toEqual([]);
  });

  it('a next step larger than what was checked ahead (a long tool result) releases that reservation and is checked on its own', async () => {
    const { client, log, checks } = scriptedClient([reserved('rsv-0'), reserved('rsv-ahead'), reserved('rsv-1')]);
    const g = guard(client);
    const state = {};
    await toolStep(g, state, 0);
    await g.processInputStep(step(state, 1, 'word '.repeat(3 * CHECK_AHEAD_TOKENS)));
    expect(checks.map((c) => Boolean(c.tentative))).toEqual([false, true, false]);
    expect(checks[2]!.estimate!.inputTokens).toBeGreaterThan(checks[1]!.estimate!.inputTokens);
    await g.processLLMResponse(finished(1, state, 'stop'));
    // Released before the run's last hook resolves.
    expect(log).toContain('release rsv-ahead');
  });

  it("in a run whose tool results are longer than the room, the next checks ahead hold what the run's took", async () => {
    const long = 'word '.repeat(3 * CHECK_AHEAD_TOKENS);
    const { client, checks } = scriptedClient([reserved('rsv-0'), reserved('a-1'), reserved('rsv-1'), reserved('a-2')]);
    const g = guard(client);
    const state = {};
    await toolStep(g, state, 0);
    await g.processInputStep(step(state, 1, long)); // longer than the room: checked on its own
    await g.processLLMResponse(finished(1, state, 'tool-calls'));
    const took = checks[2]!.estimate!.inputTokens - checks[0]!.estimate!.inputTokens - 20;
    expect(checks[3]).toMatchObject({
      tentative: true,
      estimate: { inputTokens: checks[2]!.estimate!.inputTokens + 20 + Math.ceil(took * 1.25) },
    });
    await g.processInputStep(step(state, 2, long)); // as long again: runs on its check ahead
    expect(checks.map((c) => Boolean(c.tentative))).toEqual([false, true, false, true]);
  });

  it('a check ahead Tollgate declined (it did not fit with nothing to report) leaves the step to its own check', async () => {
    const { client, checks, log } = scriptedClient([reserved('rsv-0'), declined(), reserved('rsv-1')]);
    const g = guard(client);
    const state = {};
    await toolStep(g, state, 0);
    await g.processInputStep(step(state, 1));
    expect(checks.map((c) => Boolean(c.tentative))).toEqual([false, true, false]);
    expect(log.filter((l) => l.startsWith('release'))).toEqual([]);
  });

  it.each([
    [
      'allowed with a warning',
      answer({ warnings: [{ threshold: 'soft' } as never], reservation: reserved('r').reservation }),
    ],
    ['shrunk', reserved('r', { adjust: { maxOutputTokens: 100, requestedMaxOutputTokens: 500, limitedBy: [] } })],
  ])('a step %s is followed by no check ahead: the next is decided on its own', async (_, first) => {
    const { client, checks } = scriptedClient([first, reserved('rsv-1')]);
    const g = guard(client, { onExceed: 'shrink' });
    const state = {};
    await toolStep(g, state, 0);
    expect(checks).toHaveLength(1);
  });

  it('with awaitRecords, the check ahead goes out once the step is stored, so that it counts what was spent', async () => {
    const { client, log } = scriptedClient([reserved('rsv-0'), reserved('rsv-1')]);
    const g = guard(client, { awaitRecords: true });
    const state = {};
    await toolStep(g, state, 0);
    expect(log.slice(1)).toEqual(['record 0', 'flush', 'landed', expect.stringMatching(/:1:ahead \(ahead\)$/)]);
  });

  it('with a client that cannot release, or whose check throws at once, each step is checked on its own path', async () => {
    const noRelease = scriptedClient([reserved('rsv-0'), reserved('rsv-1')]);
    delete (noRelease.client.guard as { release?: unknown }).release;
    const throwing = scriptedClient([reserved('rsv-0'), reserved('rsv-1')]);
    const check = throwing.client.guard.check;
    throwing.client.guard.check = (request, options) => {
      if (request.tentative) throw new Error('not now');
      return check(request, options);
    };
    for (const { client, checks } of [noRelease, throwing]) {
      const g = guard(client);
      const state = {};
      await toolStep(g, state, 0);
      await g.processInputStep(step(state, 1));
      expect(checks.filter((c) => !c.tentative)).toHaveLength(2);
    }
  });

  it('with checkAhead: false, each step is checked on its own path', async () => {
    const { client, checks } = scriptedClient([reserved('rsv-0'), reserved('rsv-1')]);
    const g = guard(client, { checkAhead: false });
    const state = {};
    await toolStep(g, state, 0);
    await g.processInputStep(step(state, 1));
    expect(checks.map((c) => Boolean(c.tentative))).toEqual([false, false]);
  });

  it('a check ahead no step takes (a run that ended after its tools) is released after the hold', async () => {
    jest.useFakeTimers({ doNotFake: ['setImmediate', 'nextTick', 'queueMicrotask'] });
    try {
      const { client, log } = scriptedClient([reserved('rsv-0'), reserved('rsv-ahead')]);
      const g = guard(client);
      const state = {};
      await toolStep(g, state, 0);
      await jest.advanceTimersByTimeAsync(CHECK_AHEAD_HOLD_MS - 1);
      expect(log).not.toContain('release rsv-ahead');
      await jest.advanceTimersByTimeAsync(1);
      expect(log).toContain('release rsv-ahead');
    } finally {
      jest.useRealTimers();
    }
  });

  it('validates checkAheadTokens', () => {
    const { client } = scriptedClient([]);
    expect(() => guard(client, { checkAheadTokens: -1 })).toThrow(/checkAheadTokens/);
    expect(() => guard(client, { checkAheadTokens: 1.5 })).toThrow(/checkAheadTokens/);
    expect(() => guard(client, { checkAheadTokens: 0 })).not.toThrow();
  });
});

describe('covers (a check ahead holds what the step asks)', () => {
  const own: GuardCheckRequest = {
    context: { resourceId: 'r1' },
    limits: [{ scope: 'resource', window: '7d', maxCost: 1 }],
    estimate: { provider: 'openai', model: 'gpt-4o', inputTokens: 100, maxOutputTokens: 500 },
    reserve: true,
    stepId: 'run:1',
    failMode: 'open',
    onExceed: 'shrink',
    minOutputTokens: 10,
  };
  const ahead = aheadOf(own, 'run:1:ahead', 20, 50);

  it('given the same step at most that large, then yes; and the check ahead never shrinks', () => {
    expect(ahead).not.toHaveProperty('onExceed');
    expect(ahead).not.toHaveProperty('minOutputTokens');
    expect(covers(ahead, own)).toBe(true);
    expect(covers(ahead, { ...own, estimate: { ...own.estimate!, inputTokens: 170 } })).toBe(true);
  });

  it.each([
    ['more input tokens', { estimate: { ...own.estimate!, inputTokens: 171 } }],
    ['another model', { estimate: { ...own.estimate!, model: 'gpt-4o-mini' } }],
    ['another output cap', { estimate: { ...own.estimate!, maxOutputTokens: 400 } }],
    ['another limit', { limits: [{ scope: 'resource' as const, window: '7d' as const, maxCost: 2 }] }],
    ['another scope id', { context: { resourceId: 'r2' } }],
    ['another fail mode', { failMode: 'closed' as const }],
  ])('given %s, then no', (_, change) => {
    expect(covers(ahead, { ...own, ...change })).toBe(false);
  });
});
