import type { Random } from './prng';
import type { Model } from './world';

/**
 * Everything random about one step, drawn before the step runs and always with the same number
 * of draws, so that an agent's sequence of plans depends on the seed alone, not on what the
 * service answered (a denial or a retry changes what the step does, never the plans after it).
 */
export interface StepPlan {
  kind: 'reserve' | 'dryRun' | 'read' | 'plain';
  /** Ask ahead of the step first (tentative), then with the step's own check if that does not fit. */
  tentative: boolean;
  /** The same check again (same stepId): after its answer, or at the same time. */
  retry: 'none' | 'after' | 'concurrent';
  model: Model;
  inputTokens: number;
  maxOutputTokens: number;
  fate: 'settle' | 'release' | 'abandon';
  /** The step's actual usage against what its reservation holds. */
  usage: 'below' | 'at' | 'above';
  inputFactor: number;
  outputFactor: number;
  /** Which of the two the "above" step passes (both: 2). */
  aboveWhich: 0 | 1 | 2;
  when: 'now' | 'late' | 'future';
  /** For a future-dated step: how far ahead (inside the service's accepted skew of 5 minutes). */
  aheadMs: number;
  /** The same event sent twice: after the first answer, or at the same time. */
  duplicate: 'none' | 'after' | 'concurrent';
  /** The LLM call's time between the check and the step event (well under the reservation's TTL). */
  stepMs: number;
  /**
   * With `--late-steps`: the step outlives its reservation's lease by `outlivesByMs` (an LLM call
   * slower than the TTL), so its event names a reservation that has expired.
   */
  outlives: boolean;
  outlivesByMs: number;
  thinkMs: number;
  /** After a denial: the pause before the next step. */
  deniedPauseMs: number;
  /** A plain step's batch size. */
  plainEvents: number;
}

export function planStep(r: Random, models: readonly Model[]): StepPlan {
  const kind = r.weighted({ reserve: 82, dryRun: 6, read: 5, plain: 7 });
  const tentative = r.chance(0.15);
  const retry = r.weighted({ none: 90, after: 6, concurrent: 4 });
  const model = r.pick(models);
  const inputTokens = r.int(200, 4000);
  const maxOutputTokens = r.int(50, 1000);
  const fate = r.weighted({ settle: 75, release: 13, abandon: 12 });
  const usage = r.weighted({ below: 62, at: 30, above: 8 });
  const inputFactor = r.float();
  const outputFactor = r.float();
  const aboveWhich = r.int(0, 2) as 0 | 1 | 2;
  const when = r.weighted({ now: 88, late: 6, future: 6 });
  const aheadMs = r.int(1000, 120_000);
  const duplicate = r.weighted({ none: 90, after: 6, concurrent: 4 });
  const slow = r.chance(0.1);
  const stepMs = slow ? r.int(150, 700) : r.int(0, 150);
  const outlives = r.chance(0.12);
  const outlivesByMs = r.int(200, 3000);
  const thinkMs = r.int(0, 40);
  const deniedPauseMs = r.int(100, 400);
  const plainEvents = r.int(1, 3);
  return {
    ...{ kind, tentative, retry, model, inputTokens, maxOutputTokens, fate, usage, inputFactor, outputFactor },
    ...{ aboveWhich, when, aheadMs, duplicate, stepMs, outlives, outlivesByMs, thinkMs, deniedPauseMs, plainEvents },
  };
}

/** What the step really used, against what its reservation holds. */
export function actualUsage(p: StepPlan, held: { inputTokens: number; outputTokens: number }) {
  if (p.usage === 'at') return { inputTokens: held.inputTokens, outputTokens: held.outputTokens };
  if (p.usage === 'below')
    return {
      inputTokens: Math.max(1, Math.floor(held.inputTokens * (0.2 + 0.8 * p.inputFactor))),
      outputTokens: Math.floor(held.outputTokens * p.outputFactor),
    };
  // Above: by 2–50 % on the input, the output or both; the other at what was held.
  const up = (n: number, f: number) => Math.ceil(n * (1.02 + 0.48 * f)) + 1;
  return {
    inputTokens: p.aboveWhich !== 1 ? up(held.inputTokens, p.inputFactor) : held.inputTokens,
    outputTokens: p.aboveWhich !== 0 ? up(held.outputTokens, p.outputFactor) : held.outputTokens,
  };
}
