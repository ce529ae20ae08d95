import type {
  GuardCheckRequest,
  GuardCheckResponse,
  GuardContext,
  GuardFinding,
  GuardScope,
  GuardScopeUsage,
  GuardWindow,
  StepUsageEvent,
  TollgateGuardClient,
} from '../../src/tollgate/guard-client';
import { scopeId } from '../../src/tollgate/context-ids';

const WINDOW_MS: Record<GuardWindow, number> = {
  '1h': 3_600_000,
  '6h': 6 * 3_600_000,
  '24h': 24 * 3_600_000,
  '7d': 7 * 24 * 3_600_000,
  '30d': 30 * 24 * 3_600_000,
  '365d': 365 * 24 * 3_600_000,
};

/** USD per token, by `provider/model`. */
export type PriceTable = Record<string, { input: number; output: number }>;

interface Reservation {
  id: string;
  context: GuardContext;
  inputTokens: number;
  outputTokens: number;
  estimatedCost: number;
  expiresAt: number;
}

interface Recorded {
  event: StepUsageEvent;
  at: number;
  cost: number;
}

/**
 * An in-memory Tollgate with the service's guard semantics, for unit specs: usage per scope key
 * and window from recorded events, reservations held from check to record, and a check that
 * evaluates and reserves in one uninterrupted turn (as the service does in one transaction), so
 * concurrent runs cannot both take the last of a budget.
 *
 * A cost limit is crossed when recorded + reserved + this step's estimate exceeds `maxCost`.
 */
export class InMemoryTollgate implements TollgateGuardClient {
  readonly checks: GuardCheckRequest[] = [];
  readonly recorded: Recorded[] = [];
  readonly reservations = new Map<string, Reservation>();
  private readonly byStep = new Map<string, GuardCheckResponse>();
  private nextId = 1;
  /** Clock, movable by specs. */
  now = Date.now();
  /** When set, the next calls reject with it (Tollgate unreachable). */
  failWith?: Error;

  constructor(readonly prices: PriceTable) {}

  readonly guard = { check: (request: GuardCheckRequest) => this.check(request) };
  readonly events = { record: (event: StepUsageEvent) => this.record(event) };

  /** Records usage directly, as another service or an earlier run would have. */
  seed(context: GuardContext, provider: string, model: string, inputTokens: number, outputTokens: number, ageMs = 0): void {
    const event: StepUsageEvent = {
      eventId: `seed-${this.nextId++}`,
      occurredAt: new Date(this.now - ageMs).toISOString(),
      traceId: context.traceId ?? `seed-trace-${this.nextId}`,
      ...context,
      entityType: 'agent',
      provider,
      model,
      usage: { inputTokens, outputTokens },
    };
    this.recorded.push({ event, at: this.now - ageMs, cost: this.price(provider, model, inputTokens, outputTokens) });
  }

  /** Total recorded cost of every event matching `scope:id`, all time. */
  spent(scope: GuardScope, id: string): number {
    return this.recorded.filter((r) => scopeId(scope, r.event) === id).reduce((sum, r) => sum + r.cost, 0);
  }

  price(provider: string, model: string, inputTokens: number, outputTokens: number): number {
    const p = this.prices[`${provider}/${model}`];
    if (!p) throw new Error(`no price for ${provider}/${model}`);
    return inputTokens * p.input + outputTokens * p.output;
  }

  private async check(request: GuardCheckRequest): Promise<GuardCheckResponse> {
    this.checks.push(structuredClone(request));
    await new Promise((resolve) => setImmediate(resolve)); // a network hop: lets concurrent callers interleave
    if (this.failWith) throw this.failWith;
    // Everything below runs in one turn: evaluation and reservation are atomic.
    if (request.stepId && this.byStep.has(request.stepId)) return this.byStep.get(request.stepId)!;
    this.expire();
    const estimate = request.estimate;
    const estimateCost = estimate ? this.price(estimate.provider, estimate.model, estimate.inputTokens, estimate.maxOutputTokens) : 0;
    const estimateTokens = estimate ? estimate.inputTokens + estimate.maxOutputTokens : 0;
    const violations: GuardFinding[] = [];
    const warnings: GuardFinding[] = [];
    const skipped: GuardCheckResponse['skipped'] = [];
    const usage: Record<string, GuardScopeUsage> = {};
    for (const limit of request.limits ?? []) {
      const id = scopeId(limit.scope, request.context);
      if (id === undefined) {
        skipped.push({ scope: limit.scope, reason: `context has no ${limit.scope} id` });
        continue;
      }
      const scopeKey = `${limit.scope}:${id}`;
      const window = limit.scope === 'run' ? undefined : (limit.window ?? '7d');
      const u = this.usageOf(limit.scope, id, window);
      usage[scopeKey] = u;
      const find = (limitType: GuardFinding['limitType'], used: number, max: number | undefined, unit: string) => {
        if (max === undefined) return;
        const finding = { scope: limit.scope, scopeKey, ...(window ? { window } : {}), limitType, usage: used, limit: max, unit };
        if (used > max) violations.push({ ...finding, threshold: 'hard' });
        else if (limit.warnAtPercent !== undefined && used >= (max * limit.warnAtPercent) / 100) warnings.push({ ...finding, threshold: 'soft' });
      };
      find('cost', u.estimatedCost + u.reservedCost + estimateCost, limit.maxCost, 'USD');
      find('totalTokens', u.totalTokens + u.reservedTokens + estimateTokens, limit.maxTotalTokens, 'tokens');
      find('inputTokens', u.inputTokens + (estimate?.inputTokens ?? 0), limit.maxInputTokens, 'tokens');
      find('outputTokens', u.outputTokens + (estimate?.maxOutputTokens ?? 0), limit.maxOutputTokens, 'tokens');
    }
    const decision = violations.length > 0 ? 'deny' : 'allow';
    let reservation: GuardCheckResponse['reservation'];
    if (decision === 'allow' && request.reserve && !request.dryRun && estimate) {
      const r: Reservation = {
        id: `res-${this.nextId++}`,
        context: request.context,
        inputTokens: estimate.inputTokens,
        outputTokens: estimate.maxOutputTokens,
        estimatedCost: estimateCost,
        expiresAt: this.now + 10 * 60_000,
      };
      this.reservations.set(r.id, r);
      reservation = { id: r.id, estimatedCost: r.estimatedCost, inputTokens: r.inputTokens, outputTokens: r.outputTokens, expiresAt: new Date(r.expiresAt).toISOString() };
    }
    const response: GuardCheckResponse = { decision, violations, warnings, skipped, usage, ...(reservation ? { reservation } : {}), asOf: new Date(this.now).toISOString() };
    if (request.stepId && !request.dryRun) this.byStep.set(request.stepId, response);
    return structuredClone(response);
  }

  private async record(event: StepUsageEvent): Promise<{ accepted: boolean }> {
    await new Promise((resolve) => setImmediate(resolve));
    if (this.failWith) throw this.failWith;
    if (this.recorded.some((r) => r.event.eventId === event.eventId)) return { accepted: false };
    if (event.reservationId) this.reservations.delete(event.reservationId);
    const cost = this.price(event.provider, event.model, event.usage.inputTokens, event.usage.outputTokens);
    this.recorded.push({ event: structuredClone(event), at: Date.parse(event.occurredAt), cost });
    return { accepted: true };
  }

  private usageOf(scope: GuardScope, id: string, window: GuardWindow | undefined): GuardScopeUsage {
    const since = window ? this.now - WINDOW_MS[window] : -Infinity;
    const u: GuardScopeUsage = { inputTokens: 0, outputTokens: 0, totalTokens: 0, estimatedCost: 0, costUnit: 'USD', reservedCost: 0, reservedTokens: 0 };
    for (const r of this.recorded) {
      if (r.at < since || scopeId(scope, r.event) !== id) continue;
      u.inputTokens += r.event.usage.inputTokens;
      u.outputTokens += r.event.usage.outputTokens;
      u.estimatedCost += r.cost;
    }
    u.totalTokens = u.inputTokens + u.outputTokens;
    for (const r of this.reservations.values()) {
      if (scopeId(scope, r.context) !== id) continue;
      u.reservedCost += r.estimatedCost;
      u.reservedTokens += r.inputTokens + r.outputTokens;
    }
    return u;
  }

  private expire(): void {
    for (const [id, r] of this.reservations) if (r.expiresAt <= this.now) this.reservations.delete(id);
  }
}
