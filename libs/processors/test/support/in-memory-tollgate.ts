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
import { usageKey } from '../../src/tollgate/guard-client';

const WINDOW_MS: Record<GuardWindow, number> = {
  '1h': 3_600_000,
  '6h': 6 * 3_600_000,
  '24h': 24 * 3_600_000,
  '7d': 7 * 24 * 3_600_000,
  '30d': 30 * 24 * 3_600_000,
  '365d': 365 * 24 * 3_600_000,
};
const SCOPES: GuardScope[] = ['run', 'thread', 'resource', 'user', 'organization', 'session'];

/** USD per million tokens, by `provider/model` (as a project price override is given to Tollgate). */
export type PriceTable = Record<string, { inputPerMillion: number; outputPerMillion: number }>;

interface Reservation {
  id: string;
  stepId: string;
  scopeKeys: string[];
  inputTokens: number;
  outputTokens: number;
  costMicros: number;
  expiresAt: number;
  status: 'open' | 'settled' | 'released';
}

interface Recorded {
  event: StepUsageEvent;
  at: number;
  /** null when the model has no price (counted as tokens only, like Tollgate). */
  costMicros: number | null;
}

/** Every scope key a step touches; the run under its trace id and its run id (as Tollgate's `scopeKeysOf`). */
function scopeKeysOf(context: GuardContext): string[] {
  const keys = SCOPES.map((s) => (scopeId(s, context) ? `${s}:${scopeId(s, context)}` : null)).filter(
    (k): k is string => k !== null,
  );
  if (context.traceId && context.runId && context.runId !== context.traceId) keys.push(`run:${context.runId}`);
  return keys.sort();
}

/**
 * An in-memory Tollgate for unit specs, with the service's guard semantics
 * (libs/ledger/src/check-guard): usage per scope key and window from recorded events plus open
 * reservations; a limit is reached when usage + reserved + this step's estimate is `>=` it;
 * amounts are whole micro-units; findings carry `source: 'request'`, `window: null` for runs;
 * `usage` is keyed `<scope>:<id>@<window>` (`run:<id>` for runs); a retried `stepId` gets its open
 * reservation back and a closed one is a conflict; a reservation stops counting when it expires;
 * a step event naming a reservation settles it. Check and reserve run in one uninterrupted turn
 * (the service holds a per-scope lock), so concurrent runs cannot both take the last of a budget.
 *
 * Under load it can answer busy as the service does ({@link InMemoryTollgate.busyChecks}).
 *
 * What it does not have: project policies, price catalog (see {@link PriceTable}), fail-open on
 * timeouts. The end-to-end specs in `test/e2e/` run the processors against the real service.
 */
export class InMemoryTollgate implements TollgateGuardClient {
  readonly checks: GuardCheckRequest[] = [];
  readonly recorded: Recorded[] = [];
  readonly reservations = new Map<string, Reservation>();
  readonly released: string[] = [];
  private nextId = 1;
  /** Clock, movable by specs. */
  now = Date.now();
  /** When set, the next calls reject with it (Tollgate unreachable). */
  failWith?: Error;
  /**
   * How many of the next checks answer `{ decision: 'deny', reason: 'busy', retryAfterMs }` (as
   * the service does when too many checks are queued on a scope), counted down; `Infinity` for
   * every check. A busy check is still listed in `checks`, and reserves nothing.
   */
  busyChecks = 0;
  /** `retryAfterMs` of the busy answers. */
  busyRetryAfterMs = 250;
  /** Reservation lifetime (the service's GUARD_RESERVATION_TTL_MS default). */
  reservationTtlMs = 5 * 60_000;

  constructor(readonly prices: PriceTable) {}

  readonly guard = {
    check: (request: GuardCheckRequest) => this.check(request),
    release: (reservationId: string) => this.release(reservationId),
  };
  readonly events = { record: (event: StepUsageEvent) => this.record(event) };

  /** Reservations still holding budget. */
  get open(): Reservation[] {
    return [...this.reservations.values()].filter((r) => r.status === 'open' && r.expiresAt > this.now);
  }

  /** Records usage directly, as another service or an earlier run would have. */
  seed(
    context: GuardContext,
    provider: string,
    model: string,
    inputTokens: number,
    outputTokens: number,
    ageMs = 0,
  ): void {
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
    this.recorded.push({
      event,
      at: this.now - ageMs,
      costMicros: this.priceMicros(provider, model, inputTokens, outputTokens),
    });
  }

  /** Total recorded cost (USD) of every event in `scope:id`, all time. */
  spent(scope: GuardScope, id: string): number {
    return (
      this.recorded
        .filter((r) => scopeKeysOf(r.event).includes(`${scope}:${id}`))
        .reduce((sum, r) => sum + (r.costMicros ?? 0), 0) / 1e6
    );
  }

  /** Cost in micro-units, rounded once per step as Tollgate prices it; null when unpriced. */
  priceMicros(provider: string, model: string, inputTokens: number, outputTokens: number): number | null {
    const p = this.prices[`${provider}/${model}`];
    return p ? Math.round(inputTokens * p.inputPerMillion + outputTokens * p.outputPerMillion) : null;
  }

  private async check(request: GuardCheckRequest): Promise<GuardCheckResponse> {
    this.checks.push(structuredClone(request));
    await new Promise((resolve) => setImmediate(resolve)); // a network hop: lets concurrent callers interleave
    if (this.failWith) throw this.failWith;
    if (this.busyChecks > 0) {
      this.busyChecks--;
      return {
        decision: 'deny',
        reason: 'busy',
        retryAfterMs: this.busyRetryAfterMs,
        violations: [],
        warnings: [],
        skipped: [],
        usage: {},
        asOf: new Date(this.now).toISOString(),
      };
    }
    if (request.reserve && (!request.estimate || !request.stepId))
      throw new Error(`400 ${request.estimate ? 'stepId' : 'estimate'} is required when reserve is true`);
    // Everything below runs in one turn: evaluation and reservation are atomic.
    const reserving = request.reserve === true && request.dryRun !== true;
    const retried = reserving ? this.retriedReservation(request.stepId!) : undefined;
    if (retried) {
      return {
        decision: 'allow',
        violations: [],
        warnings: [],
        skipped: [],
        usage: {},
        reservation: retried,
        asOf: new Date(this.now).toISOString(),
      };
    }
    const estimate = request.estimate;
    const estimateMicros = estimate
      ? (this.priceMicros(estimate.provider, estimate.model, estimate.inputTokens, estimate.maxOutputTokens) ?? 0)
      : 0;
    const { violations, warnings, skipped, usage } = this.evaluate(request, estimateMicros);
    const decision = violations.length > 0 ? 'deny' : 'allow';
    const reservation =
      decision === 'allow' && reserving && estimate ? this.reserve(request, estimateMicros) : undefined;
    return structuredClone({
      decision,
      violations,
      warnings,
      skipped,
      usage,
      ...(reservation ? { reservation } : {}),
      asOf: new Date(this.now).toISOString(),
    });
  }

  /** The open reservation a retried check (same stepId) gets back; a 409 when it was settled already. */
  private retriedReservation(stepId: string): GuardCheckResponse['reservation'] {
    const existing = [...this.reservations.values()].find((r) => r.stepId === stepId);
    if (existing && existing.status !== 'open')
      throw new Error(`409 stepId ${stepId} already had a reservation, now ${existing.status}`);
    return existing ? this.reservationView(existing) : undefined;
  }

  /** Every limit of the request against recorded + reserved usage of its scope, plus the estimate. */
  private evaluate(request: GuardCheckRequest, estimateMicros: number) {
    const violations: GuardFinding[] = [];
    const warnings: GuardFinding[] = [];
    const skipped: GuardCheckResponse['skipped'] = [];
    const usage: Record<string, GuardScopeUsage> = {};
    for (const limit of request.limits ?? []) {
      const id = scopeId(limit.scope, request.context);
      if (id === undefined) {
        if (!skipped.some((s) => s.scope === limit.scope))
          skipped.push({
            scope: limit.scope,
            reason: `no ${limit.scope === 'run' ? 'traceId or runId' : `${limit.scope}Id`} in context`,
          });
        continue;
      }
      const scopeKey = `${limit.scope}:${id}`;
      const window = limit.scope === 'run' ? null : (limit.window ?? '7d');
      const u = this.usageOf(limit.scope, scopeKey, window);
      usage[usageKey(limit.scope, id, window ?? undefined)] = u;
      const estIn = request.estimate?.inputTokens ?? 0;
      const estOut = request.estimate?.maxOutputTokens ?? 0;
      const costMicros = Math.round(u.estimatedCost * 1e6) + Math.round(u.reservedCost * 1e6) + estimateMicros;
      const checks: Array<[GuardFinding['limitType'], number | undefined, number, string, number]> = [
        [
          'cost',
          limit.maxCost === undefined ? undefined : Math.round(limit.maxCost * 1e6),
          costMicros,
          u.costUnit ?? 'USD',
          1e6,
        ],
        [
          'totalTokens',
          limit.maxTotalTokens,
          u.totalTokens + u.reservedInputTokens + u.reservedOutputTokens + estIn + estOut,
          'tokens',
          1,
        ],
        ['inputTokens', limit.maxInputTokens, u.inputTokens + u.reservedInputTokens + estIn, 'tokens', 1],
        ['outputTokens', limit.maxOutputTokens, u.outputTokens + u.reservedOutputTokens + estOut, 'tokens', 1],
      ];
      for (const [limitType, max, value, unit, scale] of checks) {
        if (max === undefined) continue;
        const finding = (threshold: 'soft' | 'hard'): GuardFinding => ({
          scope: limit.scope,
          scopeKey,
          window,
          limitType,
          usage: value / scale,
          limit: max / scale,
          unit,
          threshold,
          source: 'request',
        });
        if (value >= max) violations.push(finding('hard'));
        else if (limit.warnAtPercent !== undefined && value >= (max * limit.warnAtPercent) / 100)
          warnings.push(finding('soft'));
      }
    }
    return { violations, warnings, skipped, usage };
  }

  /** Holds the request's estimate (`estimateMicros`) under a new reservation. */
  private reserve(request: GuardCheckRequest, estimateMicros: number): GuardCheckResponse['reservation'] {
    const r: Reservation = {
      id: `rsv_${this.nextId++}`,
      stepId: request.stepId!,
      scopeKeys: scopeKeysOf(request.context),
      inputTokens: request.estimate?.inputTokens ?? 0,
      outputTokens: request.estimate?.maxOutputTokens ?? 0,
      costMicros: estimateMicros,
      expiresAt: this.now + this.reservationTtlMs,
      status: 'open',
    };
    this.reservations.set(r.id, r);
    return this.reservationView(r);
  }

  private reservationView(r: Reservation): NonNullable<GuardCheckResponse['reservation']> {
    return {
      id: r.id,
      estimatedCost: r.costMicros / 1e6,
      costUnit: 'USD',
      inputTokens: r.inputTokens,
      outputTokens: r.outputTokens,
      expiresAt: new Date(r.expiresAt).toISOString(),
    };
  }

  private async release(reservationId: string): Promise<{ id: string; status: string }> {
    await new Promise((resolve) => setImmediate(resolve));
    if (this.failWith) throw this.failWith;
    const r = this.reservations.get(reservationId);
    if (!r) throw new Error(`404 No reservation ${reservationId} in this project`);
    if (r.status === 'open') {
      r.status = 'released';
      this.released.push(reservationId);
    }
    return { id: r.id, status: r.status };
  }

  private async record(event: StepUsageEvent): Promise<{ accepted: boolean }> {
    await new Promise((resolve) => setImmediate(resolve));
    if (this.failWith) throw this.failWith;
    if (this.recorded.some((r) => r.event.eventId === event.eventId)) return { accepted: false };
    const r = event.reservationId ? this.reservations.get(event.reservationId) : undefined;
    if (r?.status === 'open') r.status = 'settled';
    const costMicros = this.priceMicros(event.provider, event.model, event.usage.inputTokens, event.usage.outputTokens);
    this.recorded.push({ event: structuredClone(event), at: Date.parse(event.occurredAt), costMicros });
    return { accepted: true };
  }

  private usageOf(scope: GuardScope, scopeKey: string, window: GuardWindow | null): GuardScopeUsage {
    const since = window ? this.now - WINDOW_MS[window] : -Infinity;
    let inputTokens = 0;
    let outputTokens = 0;
    let costMicros = 0;
    let unpricedEvents = 0;
    let reservedMicros = 0;
    let reservedInputTokens = 0;
    let reservedOutputTokens = 0;
    for (const r of this.recorded) {
      if (r.at < since || !scopeKeysOf(r.event).includes(scopeKey)) continue;
      inputTokens += r.event.usage.inputTokens;
      outputTokens += r.event.usage.outputTokens;
      if (r.costMicros === null) unpricedEvents++;
      else costMicros += r.costMicros;
    }
    for (const r of this.open) {
      if (!r.scopeKeys.includes(scopeKey)) continue;
      reservedMicros += r.costMicros;
      reservedInputTokens += r.inputTokens;
      reservedOutputTokens += r.outputTokens;
    }
    return {
      scope,
      window,
      inputTokens,
      outputTokens,
      totalTokens: inputTokens + outputTokens,
      estimatedCost: costMicros / 1e6,
      costUnit: costMicros > 0 || reservedMicros > 0 ? 'USD' : null,
      reservedCost: reservedMicros / 1e6,
      reservedInputTokens,
      reservedOutputTokens,
      unpricedEvents,
      costByUnit: costMicros > 0 ? { USD: costMicros / 1e6 } : {},
      reservedCostByUnit: reservedMicros > 0 ? { USD: reservedMicros / 1e6 } : {},
    };
  }
}
