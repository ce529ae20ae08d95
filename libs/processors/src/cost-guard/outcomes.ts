import type { AbortFn } from '../mastra-shapes';
import type { GuardFinding } from '../tollgate/guard-client';
import type { CostScope, GuardConfig } from './options';
import { formatCost, formatViolationMessage } from './violation-message';

/** Cost usage as reported in TripWire metadata. */
export interface CostGuardUsage {
  estimatedCost: number | null;
  costUnit: string | null;
}

/** Per-provider/model cost, attached when `includeBreakdown` is set (seed-compatible mode). */
export interface CostGuardBreakdownEntry {
  provider: string | null;
  model: string | null;
  estimatedCost: number | null;
  costUnit: string | null;
}

/** Metadata of the TripWire raised by the `block` strategy. */
export interface CostGuardTripwireMetadata<Id extends string = 'cost-guard'> {
  processorId: Id;
  /** The cost compared with the limit (exact mode: recorded + reserved + this step's estimate). */
  usage: CostGuardUsage;
  maxCost: number;
  scope: CostScope;
  /** `'<scope>:<id>'`; absent for `run`. */
  scopeKey?: string;
  threshold: 'hard';
  breakdown?: CostGuardBreakdownEntry[];
  /**
   * `'busy'` when the step was blocked because Tollgate's guard stayed busy past
   * `busyDeadlineMs`, not by a budget: `usage` is then null, nothing having been evaluated.
   */
  reason?: 'busy';
}

/** `detail` of the violations passed to `onViolation`. */
export interface CostGuardViolationDetail {
  usage: number;
  limit: number;
  totalUsage: CostGuardUsage;
  scope: CostScope;
  scopeKey?: string;
  threshold: 'soft' | 'hard';
  breakdown?: CostGuardBreakdownEntry[];
}

/** A violation as Mastra's `ProcessorViolation` carries it. */
export interface CostGuardViolation {
  processorId: string;
  message: string;
  detail: unknown;
}

/** A limit crossed or approached, as the guard reports it. */
export interface Finding {
  usage: number;
  limit: number;
  unit: string;
  breakdown?: CostGuardBreakdownEntry[];
}

/** Tollgate's finding, as the guard reports it. */
export function finding(f: GuardFinding): Finding {
  return { usage: f.usage, limit: f.limit, unit: f.unit };
}

/** A step's arguments, as far as aborting it needs them. */
export interface Aborting<Id extends string> {
  abort: AbortFn<CostGuardTripwireMetadata<Id>>;
}

/** Per-request memory of what was reported: each threshold is reported once per request. */
export interface Notified {
  notified: Set<'soft' | 'hard'>;
}

/**
 * What becomes of a step the guard does not simply let run, in either mode: a TripWire, a
 * warning, an `onViolation` call, each at most once per request and threshold.
 */
export class StepOutcomes<Id extends string> {
  private violationHandler?: (violation: CostGuardViolation) => void | Promise<void>;
  /** TripWire metadata already delivered to `onViolation`, so the runner's own call is not a second one. */
  private readonly delivered = new WeakSet<object>();
  /** Whether the warning for a guard with nothing to read the cost from was logged (once per instance). */
  private warnedUnregistered = false;
  private readonly messageTemplate: string;

  constructor(private readonly config: GuardConfig<Id>) {
    this.messageTemplate = config.options.message ?? config.labels.defaultMessage;
  }

  /** The guard's `onViolation`: undefined until a handler is set. */
  get onViolation(): ((violation: CostGuardViolation) => Promise<void>) | undefined {
    return this.violationHandler ? this.forwardViolation : undefined;
  }
  set onViolation(handler: ((violation: CostGuardViolation) => void | Promise<void>) | undefined) {
    this.violationHandler = handler;
  }

  // Mastra's runner calls onViolation itself when a processor aborts, with the TripWire metadata
  // as detail. This guard already delivered that violation (with its richer detail) before
  // aborting, so the runner's call is recognised by its metadata object and dropped.
  private readonly forwardViolation = async (violation: CostGuardViolation): Promise<void> => {
    if (violation.detail && typeof violation.detail === 'object' && this.delivered.has(violation.detail)) return;
    try {
      await this.violationHandler?.(violation);
    } catch {
      // Swallowed by contract.
    }
  };

  async violate(
    args: Aborting<Id>,
    run: Notified,
    maxCost: number,
    scopeKey: string | undefined,
    f: Finding,
  ): Promise<void> {
    const message = formatViolationMessage(this.messageTemplate, f.usage, f.limit);
    const totalUsage = { estimatedCost: f.usage, costUnit: f.unit };
    const detail: CostGuardViolationDetail = {
      usage: f.usage,
      limit: f.limit,
      totalUsage,
      scope: this.config.scope,
      ...(scopeKey ? { scopeKey } : {}),
      threshold: 'hard',
      ...(f.breakdown ? { breakdown: f.breakdown } : {}),
    };
    if (this.config.strategy === 'warn') return this.warnOnce(run, 'hard', message, detail);
    const metadata: CostGuardTripwireMetadata<Id> = {
      processorId: this.config.id,
      usage: totalUsage,
      maxCost,
      scope: this.config.scope,
      ...(scopeKey ? { scopeKey } : {}),
      threshold: 'hard',
      ...(f.breakdown ? { breakdown: f.breakdown } : {}),
    };
    this.delivered.add(metadata);
    await this.notifyOnce(run, 'hard', message, detail);
    args.abort(message, { retry: false, metadata });
  }

  async warnSoft(run: Notified, scopeKey: string | undefined, f: Finding): Promise<void> {
    const message = this.config.labels.softMessage(
      this.config.options.warnAtPercent!,
      formatCost(f.usage),
      formatCost(f.limit),
    );
    await this.warnOnce(run, 'soft', message, {
      usage: f.usage,
      limit: f.limit,
      totalUsage: { estimatedCost: f.usage, costUnit: f.unit },
      scope: this.config.scope,
      ...(scopeKey ? { scopeKey } : {}),
      threshold: 'soft',
      ...(f.breakdown ? { breakdown: f.breakdown } : {}),
    });
  }

  /**
   * A warning (a soft threshold, or a hard one under `strategy: 'warn'`): logged and passed to
   * `onViolation` once per request and threshold, as Mastra's TokenCostControl does, however many
   * of the request's steps find the budget crossed.
   */
  private async warnOnce(
    run: Notified,
    threshold: 'soft' | 'hard',
    message: string,
    detail: CostGuardViolationDetail,
  ): Promise<void> {
    if (run.notified.has(threshold)) return;
    this.config.log(message);
    await this.notifyOnce(run, threshold, message, detail);
  }

  private async notifyOnce(
    run: Notified,
    threshold: 'soft' | 'hard',
    message: string,
    detail: CostGuardViolationDetail,
  ): Promise<void> {
    if (run.notified.has(threshold)) return;
    run.notified.add(threshold);
    if (!this.violationHandler) return;
    try {
      await this.violationHandler({ processorId: this.config.id, message, detail });
    } catch (error) {
      this.config.log('Cost guard: onViolation callback threw', error);
    }
  }

  /**
   * Tollgate's guard stayed busy past `busyDeadlineMs`: nothing was evaluated or reserved. A deny
   * (failMode is for an unreachable guard, and this one answered), but not a budget violation:
   * the guard does not call onViolation (Mastra's runner does, on the abort, with metadata whose
   * `reason: 'busy'` says so), and the message says what happened.
   */
  busy(args: Aborting<Id>, maxCost: number, scopeKey: string | undefined, elapsedMs: number): void {
    const why = `Cost guard: Tollgate's guard was busy (too many checks queued on this step's scopes) and still was after ${elapsedMs} ms of retries`;
    if (this.config.strategy === 'warn') {
      this.config.log(`${why}; letting the step run unreserved (strategy 'warn'); no budget was checked`);
      return;
    }
    args.abort(`${why}; blocking the step; no budget was checked`, {
      retry: false,
      metadata: { ...this.unchecked(maxCost, scopeKey), reason: 'busy' },
    });
  }

  unavailable(args: Aborting<Id>, maxCost: number, scopeKey: string | undefined, error: unknown): void {
    const reason = (error as Error)?.message ?? String(error);
    if (this.config.options.failMode !== 'closed') {
      this.config.log(`Cost guard: cost check failed, allowing the step (fail-open): ${reason}`);
      return;
    }
    args.abort(`Cost guard: cost check failed, blocking the step (fail-closed): ${reason}`, {
      retry: false,
      metadata: this.unchecked(maxCost, scopeKey),
    });
  }

  /** A blocked step's metadata when no budget could be checked: no usage to report. */
  private unchecked(maxCost: number, scopeKey: string | undefined) {
    return {
      processorId: this.config.id,
      usage: { estimatedCost: null, costUnit: null },
      maxCost,
      scope: this.config.scope,
      ...(scopeKey ? { scopeKey } : {}),
      threshold: 'hard' as const,
    };
  }

  /**
   * No Tollgate client, and never registered with a Mastra instance (whose registration would
   * have thrown without observability storage): nothing to read the cost from. The specification
   * fails open when the cost cannot be read, so the step runs (a warning, once), unless
   * `failMode: 'closed'`.
   */
  unregistered(args: Aborting<Id>, maxCost: number, scopeKey: string | undefined): void {
    const why = `${this.config.labels.className} has no Tollgate client and was not registered with a Mastra instance, so it has no observability storage to read the cost from`;
    if (this.config.options.failMode === 'closed') {
      args.abort(`Cost guard: ${why}; blocking the step (fail-closed)`, {
        retry: false,
        metadata: {
          processorId: this.config.id,
          usage: { estimatedCost: null, costUnit: null },
          maxCost,
          scope: this.config.scope,
          ...(scopeKey ? { scopeKey } : {}),
          threshold: 'hard',
        },
      });
    }
    if (this.warnedUnregistered) return;
    this.warnedUnregistered = true;
    this.config.log(
      `Cost guard: ${why}; the cost is not checked and steps run (fail-open). Pass \`client\`, or register the agent with a Mastra instance that has observability storage.`,
    );
  }
}
