import { Logger } from '@nestjs/common';
import { CommandHandler, type ICommandHandler } from '@nestjs/cqrs';
import type { GuardCheckRequest, GuardCheckResponse } from '@tollgate/contracts';
import {
  EventPartitions,
  INDEX_PLANS,
  PrismaService,
  withIndexPlans,
  type Executable,
  type TxSql,
} from '@tollgate/database';
// The metric objects only: the observability module itself listens to the ledger's events.
import {
  guardCommits,
  guardDecisions,
  guardLatency,
  guardQueueDepth,
  guardUsageReads,
} from '@tollgate/telemetry/metrics';
import { AppError, Clock, Config, isBusy, isUnavailable } from '@tollgate/platform';
import { randomUUID } from 'node:crypto';
import { appendSystemEvents } from '../append-events/append-system-events.sql';
import { StepPricer } from '../estimate/step-pricer';
import { BudgetAlerts } from '../budget-alerts/budget-alerts';
import { forecastOf } from '../forecast/forecast';
import { CheckGuard } from './check-guard.command';
import { CoalescedReads } from './batching/coalesced-reads';
import { effectiveLimits, scopeKeysOf, shrinkOf } from './decision/effective-limits';
import {
  guardOutcomeStatement,
  madeReservations,
  existingByStep,
  lockScopesStatements,
  readExistingReservations,
  stepReservationsStatement,
  type ExistingReservation,
} from './sql/guard-batch.sql';
import {
  cloneUsage,
  decideInOrder,
  emptyUsage,
  estimateView,
  hold,
  scopeUsageView,
  usageKey,
  type CheckCase,
  type CheckOutcome,
  type EffectiveLimit,
  type NewReservation,
  type UsageTotals,
} from './decision/guard-decision';
import { GroupCommit } from './batching/group-commit';
import { GuardTuning } from './batching/guard-tuning';
import { ProjectSettingsReader } from '../project-settings/project-settings.reader';
import type { ProjectSettings } from '../project-settings/project-settings.sql';
import { guardRead, usageRead, type PartitionOf, type UsageRequest } from './sql/read-scope-usage.sql';
import { KnownUsage } from './batching/known-usage';
import { ReapedUntil } from './batching/reaped-until';
import { reserveInOneTripStatement } from './sql/reserve-in-one-trip.sql';
import { boundOf, decidesWithinBounds, loosestBounds, stepRoom, withinBound } from './decision/usage-bounds';

/** Usage of every (scope, window) of a check, read at `at`, in one snapshot. */
interface UsageRead {
  at: Date;
  usage: ReadonlyMap<string, UsageTotals>;
}

/** A check, loaded and priced, ready to be decided. */
interface LoadedCheck {
  request: GuardCheckRequest;
  settings: ProjectSettings;
  case: CheckCase;
  requests: UsageRequest[];
  /** What is read to decide it: its requests and the last hours of their forecasts. */
  reads: UsageRequest[];
  /** The project and the (scope, window) pairs of `reads`: checks of one shape read the same usage. */
  shape: string;
  skipped: GuardCheckResponse['skipped'];
}

/** What a group commit answers one check: its response, or the client error it earned. */
type CheckResult = { response: GuardCheckResponse } | { error: AppError };

const NO_SETTINGS: ProjectSettings = {
  unpricedPolicy: 'deny',
  fallback: null,
  money: { base: 'USD', rates: {} },
  maxEventAgeDays: null,
  policies: [],
  overrides: [],
};

class ReadTimeout extends Error {}

@CommandHandler(CheckGuard)
export class CheckGuardHandler implements ICommandHandler<CheckGuard, GuardCheckResponse> {
  private readonly logger = new Logger('guard');
  private readonly reads = new CoalescedReads<UsageRead>();
  private readonly reaped = new ReapedUntil();
  private readonly known = new KnownUsage();
  /** Each read's edges name the monthly partitions that hold them (see PartitionOf). */
  private readonly partitionOf: PartitionOf = (from, to) => this.partitions.partitionOf(from, to);
  private readonly commits: GroupCommit<LoadedCheck, CheckResult>;

  constructor(
    private readonly prisma: PrismaService,
    private readonly partitions: EventPartitions,
    private readonly config: Config,
    private readonly clock: Clock,
    private readonly projectSettings: ProjectSettingsReader,
    private readonly pricer: StepPricer,
    private readonly alerts: BudgetAlerts,
    private readonly tuning: GuardTuning,
  ) {
    const v = config.values;
    const poolShare = Math.max(1, Math.floor(prisma.poolSize / 2));
    this.commits = new GroupCommit<LoadedCheck, CheckResult>(
      {
        get maxBatch() {
          return tuning.maxBatch;
        },
        // Leave the pool to ingest too: a batch holds one connection for its transaction.
        get maxConcurrent() {
          return Math.min(tuning.maxConcurrent, poolShare);
        },
        get maxPerLane() {
          return tuning.maxPerLane;
        },
        maxWaitMs: v.GUARD_QUEUE_WAIT_MS,
        maxQueuedPerKey: v.GUARD_QUEUE_MAX_PER_KEY,
      },
      (projectId, checks) => this.commit(projectId, checks),
    );
  }

  async execute({ projectId, request }: CheckGuard): Promise<GuardCheckResponse> {
    const started = process.hrtime.bigint();
    let outcome = 'error';
    try {
      const response = await this.answer(projectId, request);
      outcome =
        response.reason === 'busy' || response.reason === 'tentative'
          ? response.reason
          : response.reason
            ? `failmode_${response.decision}`
            : response.decision === 'allow' && response.warnings.length
              ? 'warn'
              : response.decision;
      return response;
    } finally {
      guardDecisions.inc({ outcome });
      guardLatency.observe({ outcome }, Number(process.hrtime.bigint() - started) / 1e9);
    }
  }

  /**
   * The answer is always what was committed: nothing races the work. Load (a full queue, a lock
   * or statement past GUARD_TIMEOUT_MS, a saturated pool, contention PostgreSQL still reported
   * after the transaction was run again) is answered busy, with nothing left behind; only a
   * database that cannot be reached falls back to the caller's failMode.
   */
  private async answer(projectId: string, request: GuardCheckRequest): Promise<GuardCheckResponse> {
    const now = this.clock.now();
    try {
      return await this.evaluate(projectId, request, now);
    } catch (err) {
      if (err instanceof ReadTimeout || isBusy(err) || this.poolSaturated(err))
        return busy(this.config.values.GUARD_QUEUE_WAIT_MS, now);
      if (isUnavailable(err)) {
        this.logger.warn({
          msg: 'guard could not reach the database',
          failMode: request.failMode,
          cause: String((err as Error).message),
        });
        return {
          decision: request.failMode === 'closed' ? 'deny' : 'allow',
          reason: `guard unavailable (database unreachable); failMode ${request.failMode}`,
          violations: [],
          warnings: [],
          skipped: [],
          usage: {},
          asOf: now.toISOString(),
        };
      }
      throw err;
    }
  }

  /** Waiting for a pooled connection past its timeout while every connection is busy is load. */
  private poolSaturated(err: unknown): boolean {
    const pool = this.prisma.pool;
    return (
      /timeout exceeded when trying to connect/i.test(String((err as Error)?.message)) &&
      pool.totalCount >= this.prisma.poolSize &&
      pool.idleCount === 0
    );
  }

  private async evaluate(projectId: string, request: GuardCheckRequest, now: Date): Promise<GuardCheckResponse> {
    // Before any transaction: creating a partition locks the whole log, which an open transaction
    // that has read it would wait on forever. (Cached: a no-op once this month's partition is known.)
    await this.partitions.ensureFor([now]);
    const check = await this.load(projectId, request, now);
    // A request limit's alert thresholds are decided by the commits of its scope's steps.
    if (!request.dryRun) await this.alerts.register(projectId, request, check.settings);
    if (check.case.reserve) {
      // Reserving checks serialize on every scope they hold, so N agents racing one budget each
      // see the reservations of those before them; they are decided in groups (one transaction
      // for all the checks queued on a scope). Checks on other scopes do not wait.
      const keys = [...new Set(check.case.limits.map((l) => l.scopeKey))];
      const queued = await this.commits.submit(projectId, keys, check);
      guardQueueDepth.set(this.commits.depth);
      if (queued.kind === 'busy') return busy(queued.retryAfterMs, now);
      if ('error' in queued.value) throw queued.value.error;
      return queued.value.response;
    }
    // A check that reserves nothing only reads: concurrent checks reading the same usage share
    // one statement, started after each of them arrived (see CoalescedReads). The read alone is
    // bounded in time; an audit event is appended before the answer, never after it.
    const { at, usage } = await withTimeout(
      this.reads.run(check.shape, () => this.read(projectId, check.reads)),
      this.config.values.GUARD_TIMEOUT_MS,
    );
    const [outcome] = decideInOrder([check.case], new Map(usage), check.settings, this.decisionContext(at));
    if (outcome.events.length) await appendSystemEvents(this.prisma.sql, projectId, outcome.events);
    if (check.case.audit && outcome.decision.decision === 'deny') {
      await this.alerts.exhausted(this.prisma.sql, projectId, check.settings, [
        { violations: outcome.decision.violations, stepId: check.request.stepId ?? null },
      ]);
    }
    return respond(check, outcome, at, usage);
  }

  private async load(projectId: string, request: GuardCheckRequest, now: Date): Promise<LoadedCheck> {
    const settings = (await this.projectSettings.get(projectId)) ?? NO_SETTINGS;
    const { limits, skipped } = effectiveLimits(request, settings.policies, settings.money.base);
    const estimate = request.estimate ? await this.pricer.price(projectId, request.estimate, settings, now) : undefined;
    const requests = dedupe(limits);
    const reads = withLastHours(requests);
    return {
      request,
      settings,
      skipped,
      requests,
      reads,
      shape: [projectId, ...reads.map(readKey).sort()].join('\u001f'),
      case: {
        context: request.context,
        limits,
        estimate,
        shrink: shrinkOf(request),
        reserve: request.reserve && !request.dryRun,
        tentative: request.tentative === true,
        audit: !request.dryRun,
        stepId: request.stepId,
        contextKeys: scopeKeysOf(request.context),
      },
    };
  }

  private async read(projectId: string, requests: UsageRequest[]): Promise<UsageRead> {
    const at = this.clock.now();
    guardUsageReads.inc();
    const usage = await guardRead(
      this.prisma,
      projectId,
      requests,
      at,
      this.config.values.GUARD_TIMEOUT_MS,
      (k) => this.reaped.of(projectId, k),
      this.partitionOf,
    );
    return { at, usage };
  }

  private decisionContext(at: Date) {
    return {
      at,
      reservationTtlMs: this.config.values.GUARD_RESERVATION_TTL_MS,
      newId: () => randomUUID().replace(/-/g, ''),
    };
  }

  /** A group commit in one round trip when it can (see commitInOneTrip), else in two (see commitInTwoTrips). */
  private async commit(projectId: string, checks: LoadedCheck[]): Promise<CheckResult[]> {
    if (this.tuning.oneTrip) {
      const results = await this.commitInOneTrip(projectId, checks);
      if (results) return results;
    }
    guardCommits.inc({ path: 'two_trips' });
    return this.commitInTwoTrips(projectId, checks);
  }

  /**
   * A group commit in ONE round trip, exact: its checks decided in arrival order on the usage this
   * process's last commits on their budgets left (none, on a budget it never committed on: a new
   * run, thread or session), then sent with BEGIN, the scopes' locks and COMMIT
   * as one statement that reads the usage under the locks and writes the reservations only if that
   * usage is within what the checks were decided on. Usage only makes a decision stricter as it
   * grows, so each decision is the one the usage read would give (see usage-bounds.ts); each
   * answer shows that usage, with the reservations of the checks before it. Only plain allows go
   * this way (a denial, a warning, a shrunk step, a tentative one declined is decided on a fresh
   * read, as is a batch naming one step twice); when the usage grew (another writer: an ingest,
   * another replica), nothing was written and the batch is decided again in two trips. A step
   * that already had a reservation (a retry) keeps it and gets it back, as in two trips.
   */
  private async commitInOneTrip(projectId: string, checks: LoadedCheck[]): Promise<CheckResult[] | undefined> {
    if (new Set(checks.map(stepIdOf)).size < checks.length) return undefined;
    const keys = checks.flatMap((c) => c.reads.map(readKey));
    const guess = this.known.guess(projectId, keys);
    if (!guess) return undefined;
    const limits = checks.flatMap((c) => c.case.limits);
    const reads = withLastHours(dedupe(limits));
    // The (scope, window) pairs the reservations hold bound the decisions; a forecast's last hour does not.
    const held = reads.flatMap((r, i) =>
      r.holds === false ? [] : [[i, guess.get(readKey(r)) ?? emptyUsage()] as const],
    );
    const guessed = new Map(held.map(([i, u]) => [readKey(reads[i]), cloneUsage(u)]));
    if (!decidesWithinBounds(limits, guessed.values())) return undefined;
    const at = this.clock.now();
    const ctx = this.decisionContext(at);
    const outcomes = checks.map((c) => decideInOrder([c.case], guess, c.settings, ctx)[0]);
    const plain = (o: CheckOutcome) =>
      o.reservation !== undefined &&
      o.decision.decision === 'allow' &&
      !o.decision.warnings.length &&
      !o.adjust &&
      o.events.every((e) => e.type === 'BudgetReserved');
    if (!outcomes.every(plain)) return undefined;
    const reservations = outcomes.map((o) => o.reservation!);
    // Room above the guess: the usage may have moved since (a step settled at other counts than it
    // held, another agent's step) without changing any of these decisions.
    const again = { ...ctx, newId: () => '' };
    const room = loosestBounds(
      guessed,
      stepRoom(reservations),
      (usage) =>
        decidesWithinBounds(limits, usage.values()) &&
        checks.every((c) => plain(decideInOrder([c.case], usage, c.settings, again)[0])),
    );
    const bounds = new Map(held.map(([i]) => [i, room.get(readKey(reads[i]))!]));
    const scopeKeys = [...new Set(reservations.flatMap((r) => r.scopeKeys))];
    const reapedUntil = (scopeKey: string) => this.reaped.of(projectId, scopeKey);
    const read = usageRead(projectId, reads, at, reapedUntil, this.partitionOf);
    const reap = { scopeKeys, expiredBy: at, after: scopeKeys.map(reapedUntil) };
    const events = outcomes.flatMap((o) => o.events);
    const trip = reserveInOneTripStatement(projectId, reservations, events, reap, read, bounds);
    guardUsageReads.inc();
    const rows = await this.prisma.oneTrip(
      withIndexPlans([...lockScopesStatements(projectId, scopeKeys), trip.statement]),
      this.config.values.GUARD_TIMEOUT_MS,
    );
    this.reaped.reaped(projectId, scopeKeys, at.getTime());
    // [off, locks, statement, on]
    const { ok, made, usage } = trip.outcome(rows[rows.length - 2]);
    if (!ok) {
      guardCommits.inc({ path: 'missed' });
      // Only the keys whose usage grew missed; the others are known again by the commit that follows.
      const grew = [...bounds]
        .filter(([i, b]) => !withinBound(boundOf(usage.get(readKey(reads[i])) ?? emptyUsage()), b))
        .map(([i]) => readKey(reads[i]));
      this.known.missed(projectId, grew.length ? grew : keys);
      return undefined;
    }
    guardCommits.inc({ path: 'one_trip' });
    // Each answer: the usage read, with the reservations made before its own.
    const working = new Map([...usage].map(([k, u]) => [k, cloneUsage(u)]));
    const answers = checks.map((check, i) => {
      const r = reservations[i];
      const seen = new Map(
        check.requests.map((q) => [readKey(q), cloneUsage(working.get(readKey(q)) ?? emptyUsage())]),
      );
      const response = made.has(r.id) ? respond(check, { ...outcomes[i], usage: seen }, at, usage) : undefined;
      if (response) hold(working, r);
      return response;
    });
    // A step that already had a reservation (a retry, or one made by another replica meanwhile) keeps it.
    const lost = checks.filter((_, i) => !answers[i]).map(stepIdOf);
    const theirs = lost.length
      ? await readExistingReservations(this.prisma, projectId, lost)
      : new Map<string, ExistingReservation>();
    this.known.set(projectId, working, keys, true);
    return checks.map((check, i) => {
      const response = answers[i];
      return response ? { response } : retried(check, theirs.get(stepIdOf(check))!, at);
    });
  }

  /**
   * One group commit, in two round trips: BEGIN with the locks of every scope of the batch and the
   * usage of those scopes, read once; then, after each check is decided in arrival order (each sees
   * the reservations of those before it), all reservations and events in one statement, with
   * COMMIT. Every caller is answered after the commit, with what it made.
   *
   * A retried check (its stepId already has a reservation) gets that reservation back. A plain
   * reservation finds out by its insert, which skips a step that has one; a check whose outcome
   * would append anything else (a denial, a warning), or a tentative one declined, looks its step
   * up first, in a round trip of its own, so that a retry never logs a decision.
   */
  private commitInTwoTrips(projectId: string, checks: LoadedCheck[]): Promise<CheckResult[]> {
    const keys = [...new Set(checks.flatMap((c) => c.case.limits.map((l) => l.scopeKey)))];
    // Each statement of the opening has its own snapshot, so the read sees whatever committed
    // before the locks were ours. The window starts at `at`, taken before any wait for the locks:
    // a wait makes it start earlier, never later, and has no upper edge (see readScopeUsage).
    const at = this.clock.now();
    guardUsageReads.inc();
    const reapedUntil = (scopeKey: string) => this.reaped.of(projectId, scopeKey);
    const limits = checks.flatMap((c) => c.case.limits);
    const read = usageRead(projectId, withLastHours(dedupe(limits)), at, reapedUntil, this.partitionOf);
    // Both the locks' statements and the read run on plans the connection keeps.
    const opening = withIndexPlans([...lockScopesStatements(projectId, keys), read.statement]);
    return this.prisma.transaction(
      async (tx, opened) => {
        // [off, locks?, read, on]
        const usage = read.usage(opened[opened.length - 2]);
        const working = new Map(usage);
        const ctx = this.decisionContext(at);
        const results: Pending[] = [];
        const madeHere = new Map<string, NewReservation>();
        for (const check of checks) {
          const stepId = check.request.stepId!;
          const sibling = madeHere.get(stepId);
          if (sibling) results.push({ sibling, check });
          else {
            const [outcome] = decideInOrder([check.case], working, check.settings, ctx);
            if (outcome.reservation) madeHere.set(stepId, outcome.reservation);
            results.push({ outcome, check });
          }
        }
        const doubtful = results
          .filter(isDecided)
          .filter((d) => d.outcome.declined || d.outcome.events.some((e) => e.type !== 'BudgetReserved'));
        if (doubtful.length) {
          const [, rows] = await tx.statements(
            withIndexPlans([stepReservationsStatement(projectId, [...new Set(doubtful.map(stepOf))])]),
          );
          const existing = existingByStep(rows);
          results.forEach((r, i) => {
            const prior = isDecided(r) && existing.get(stepOf(r));
            if (prior) results[i] = retried(r.check, prior, at);
          });
        }
        const decided = results.filter(isDecided);
        const denied = decided.filter(
          (d) => d.check.case.audit && !d.outcome.declined && d.outcome.decision.decision === 'deny',
        );
        // On the plan the connection has cached for it (made with its indexes: it takes out the
        // batch's expired holds). The locks of every scope it reaps are ours.
        const outcome = guardOutcomeStatement(
          projectId,
          decided.flatMap((d) => (d.outcome.reservation ? [d.outcome.reservation] : [])),
          decided.flatMap((d) => d.outcome.events),
          { scopeKeys: keys, expiredBy: at, after: keys.map(reapedUntil) },
        );
        const committing = denied.length
          ? this.commitWithExhausted(tx, projectId, outcome, checks[0].settings, denied)
          : outcome
            ? tx.commitWith(outcome, [INDEX_PLANS])
            : undefined;
        // The answers are made while PostgreSQL runs the outcome and flushes the commit; a caller
        // gets one only once it committed.
        const answers = results.map((r) => (isDecided(r) ? respond(r.check, r.outcome, at, usage) : undefined));
        const made = committing ? madeReservations(await committing) : new Set<string>();
        if (outcome) this.reaped.reaped(projectId, keys, at.getTime());
        // A step that already had a reservation (a retry, or one made by another replica between
        // our read and our insert) keeps it: committed, so it is read outside the transaction.
        const kept = (r: NewReservation | undefined) => r === undefined || made.has(r.id);
        const lost = results.flatMap((r) =>
          ('sibling' in r && !kept(r.sibling)) || (isDecided(r) && !kept(r.outcome.reservation)) ? [stepOf(r)] : [],
        );
        const theirs = lost.length
          ? await readExistingReservations(this.prisma, projectId, [...new Set(lost)])
          : new Map<string, ExistingReservation>();
        // What the next checks of these budgets are decided on first (see commitInOneTrip).
        this.known.set(
          projectId,
          working,
          checks.flatMap((c) => c.reads.map(readKey)),
        );
        return results.map((r, i) => {
          if ('sibling' in r) {
            return kept(r.sibling)
              ? { response: reservedResponse(r.check, r.sibling, at) }
              : retried(r.check, theirs.get(stepOf(r))!, at);
          }
          if (!isDecided(r)) return r;
          if (!kept(r.outcome.reservation)) return retried(r.check, theirs.get(stepOf(r))!, at);
          return { response: answers[i]! };
        });
      },
      this.config.values.GUARD_TIMEOUT_MS,
      opening,
    );
  }

  /**
   * The outcome, then the budgets the denials exhausted (their alert states), then COMMIT. In
   * this order because every writer takes rows in one order — reservations, holds and hold
   * totals before alert states — as ingest does when it alerts: a guard batch that took an alert
   * state first and its hold totals second deadlocked with an ingest settling a step on the same
   * budgets, which took them the other way round.
   */
  private async commitWithExhausted(
    tx: TxSql,
    projectId: string,
    outcome: Executable | null,
    settings: ProjectSettings,
    denied: readonly Decided[],
  ): Promise<Record<string, unknown>[]> {
    const rows = outcome ? (await tx.statements(withIndexPlans([outcome])))[1] : [];
    await this.alerts.exhausted(
      tx,
      projectId,
      settings,
      denied.map((d) => ({ violations: d.outcome.decision.violations, stepId: d.check.request.stepId ?? null })),
    );
    await tx.commit();
    return rows;
  }
}

/** A check of a group commit before its commit: decided here, the sibling of one that was, or answered. */
type Decided = { outcome: CheckOutcome; check: LoadedCheck };
type Pending = Decided | { sibling: NewReservation; check: LoadedCheck } | CheckResult;
const isDecided = (r: Pending): r is Decided => 'outcome' in r;
const stepIdOf = (c: LoadedCheck) => c.request.stepId!;
const stepOf = (r: { check: LoadedCheck }) => stepIdOf(r.check);

function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new ReadTimeout()), ms)));
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

function busy(retryAfterMs: number, now: Date): GuardCheckResponse {
  return {
    decision: 'deny',
    reason: 'busy',
    retryAfterMs,
    violations: [],
    warnings: [],
    skipped: [],
    usage: {},
    asOf: now.toISOString(),
  };
}

const readKey = (r: UsageRequest) => usageKey(`${r.scope}:${r.scopeId}`, r.window);

function dedupe(limits: readonly EffectiveLimit[]): UsageRequest[] {
  const seen = new Map<string, UsageRequest>();
  for (const l of limits)
    seen.set(usageKey(l.scopeKey, l.window), {
      scope: l.scope,
      scopeId: l.scopeKey.slice(l.scope.length + 1),
      window: l.window,
    });
  return [...seen.values()];
}

/** Beside each windowed (scope, window), its last hour: the burn rate of the forecast. */
function withLastHours(requests: UsageRequest[]): UsageRequest[] {
  const keys = new Set(requests.map(readKey));
  const hours = requests.filter(
    (r) => r.window !== null && r.scope !== 'run' && !keys.has(usageKey(`${r.scope}:${r.scopeId}`, '1h')),
  );
  return [
    ...requests,
    ...[
      ...new Map(hours.map((r) => [`${r.scope}:${r.scopeId}`, { ...r, window: '1h' as const, holds: false }])).values(),
    ],
  ];
}

/** A windowed usage's forecast, from its last hour as read (committed usage only). */
function forecastFor(
  check: LoadedCheck,
  r: UsageRequest,
  u: UsageTotals,
  read: ReadonlyMap<string, UsageTotals>,
  at: Date,
) {
  if (r.window === null || r.scope === 'run') return null;
  const scopeKey = `${r.scope}:${r.scopeId}`;
  const limits = check.case.limits.filter((l) => l.scopeKey === scopeKey && l.window === r.window);
  return forecastOf(r.window, limits, u, read.get(usageKey(scopeKey, '1h')) ?? emptyUsage(), check.settings.money, at);
}

function respond(
  check: LoadedCheck,
  outcome: CheckOutcome,
  at: Date,
  read: ReadonlyMap<string, UsageTotals>,
): GuardCheckResponse {
  const usage: GuardCheckResponse['usage'] = {};
  for (const r of check.requests) {
    const key = readKey(r);
    const u = outcome.usage.get(key) ?? emptyUsage();
    usage[key] = {
      ...scopeUsageView(r.scope, r.window, u, check.settings.money),
      forecast: forecastFor(check, r, u, read, at),
    };
  }
  const { decision, violations, warnings } = outcome.decision;
  return {
    ...(outcome.declined ? { decision: 'deny', reason: 'tentative' } : { decision }),
    violations,
    warnings,
    skipped: check.skipped,
    usage,
    ...(outcome.reservation ? { reservation: reservationView(outcome.reservation) } : {}),
    ...(outcome.estimate ? { estimate: estimateView(outcome.estimate) } : {}),
    ...(outcome.adjust ? { adjust: outcome.adjust } : {}),
    asOf: at.toISOString(),
  };
}

function reservationView(r: NewReservation): NonNullable<GuardCheckResponse['reservation']> {
  return {
    id: r.id,
    estimatedCost: r.costMicros / 1e6,
    costUnit: r.costUnit || null,
    inputTokens: r.inputTokens,
    outputTokens: r.outputTokens,
    expiresAt: r.expiresAt.toISOString(),
  };
}

function reservedResponse(check: LoadedCheck, r: NewReservation, at: Date): GuardCheckResponse {
  return {
    decision: 'allow',
    violations: [],
    warnings: [],
    skipped: check.skipped,
    usage: {},
    reservation: reservationView(r),
    ...(check.case.estimate ? { estimate: estimateView(check.case.estimate) } : {}),
    ...heldAdjust(check, r.outputTokens),
    asOf: at.toISOString(),
  };
}

/**
 * A retried check gets the reservation its step already holds; one that was shrunk holds fewer
 * output tokens than the retry asks for, and the retry must be told so as the first answer was.
 */
function heldAdjust(check: LoadedCheck, heldOutputTokens: number): Pick<GuardCheckResponse, 'adjust'> {
  const requested = check.request.estimate?.maxOutputTokens;
  if (requested === undefined || heldOutputTokens >= requested) return {};
  return { adjust: { maxOutputTokens: heldOutputTokens, requestedMaxOutputTokens: requested, limitedBy: [] } };
}

/** A retried check for a step that already holds an open reservation gets that reservation back. */
function retried(check: LoadedCheck, found: ExistingReservation, at: Date): CheckResult {
  const stepId = check.request.stepId!;
  const expired = Date.parse(found.expires_at) <= at.getTime();
  if (found.status !== 'open' || expired) {
    return {
      error: new AppError(
        'conflict',
        `stepId ${stepId} already had a reservation, now ${expired && found.status === 'open' ? 'lapsed' : found.status}; use a new stepId for a new step`,
        'stepId',
      ),
    };
  }
  return {
    response: {
      decision: 'allow',
      violations: [],
      warnings: [],
      skipped: check.skipped,
      usage: {},
      reservation: {
        id: found.id,
        estimatedCost: Number(found.cost_micros) / 1e6,
        costUnit: found.cost_unit || null,
        inputTokens: Number(found.input_tokens),
        outputTokens: Number(found.output_tokens),
        expiresAt: new Date(found.expires_at).toISOString(),
      },
      ...(check.case.estimate ? { estimate: estimateView(check.case.estimate) } : {}),
      ...heldAdjust(check, Number(found.output_tokens)),
      asOf: at.toISOString(),
    },
  };
}
