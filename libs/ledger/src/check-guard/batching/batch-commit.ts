import { Injectable } from '@nestjs/common';
import type { GuardCheckResponse } from '@tollgate/contracts';
import { EventPartitions, INDEX_PLANS, PrismaService, withIndexPlans, type TxSql } from '@tollgate/database';
import { Clock, Config } from '@tollgate/platform';
// The metric objects only: the Prometheus module itself listens to the ledger's events.
import { guardCommits, guardQueueDepth, guardUsageReads } from '@tollgate/telemetry/metrics';
import { BudgetAlerts } from '../../budget-alerts/budget-alerts';
import {
  cloneUsage,
  decideInOrder,
  emptyUsage,
  hold,
  type CheckOutcome,
  type NewReservation,
  type UsageTotals,
} from '../../budgets/guard-decision';
import { boundOf, decidesWithinBounds, loosestBounds, stepRoom, withinBound } from '../../budgets/usage-bounds';
import { reservedResponse, respond, retried, type CheckResult } from '../answers';
import { decisionContext, dedupe, readKey, stepIdOf, withLastHours, type LoadedCheck } from '../loaded-check';
import {
  existingByStep,
  guardOutcomeStatement,
  lockScopesStatements,
  madeReservations,
  readExistingReservations,
  stepReservationsStatement,
  type ExistingReservation,
} from '../sql/guard-batch.sql';
import { usageRead, type PartitionOf } from '../../scope-usage/read-scope-usage.sql';
import { reserveInOneTripStatement } from '../sql/reserve-in-one-trip.sql';
import { GroupCommit, type Queued } from './group-commit';
import { GuardTuning } from './guard-tuning';
import { KnownUsage } from './known-usage';
import { ReapedUntil } from './reaped-until';

/** A check of a group commit before its commit: decided here, the sibling of one that was, or answered. */
type Decided = { outcome: CheckOutcome; check: LoadedCheck };
type Pending = Decided | { sibling: NewReservation; check: LoadedCheck } | CheckResult;
const isDecided = (r: Pending): r is Decided => 'outcome' in r;
const stepOf = (r: { check: LoadedCheck }) => stepIdOf(r.check);

/** A one-trip commit, decided on the usage this process's last commits left, before it is sent. */
interface OneTripPlan {
  at: Date;
  keys: string[];
  reads: ReturnType<typeof withLastHours>;
  outcomes: CheckOutcome[];
  reservations: NewReservation[];
  bounds: Map<number, ReturnType<typeof boundOf>>;
}

/**
 * Reserving checks, queued per scope and committed in groups: one transaction decides every check
 * queued on its scopes, in arrival order, each seeing the reservations of those before it (see
 * GroupCommit). A group is committed in one round trip when it can (see commitInOneTrip), else in
 * two (see commitInTwoTrips); either way a caller is answered with what committed.
 */
@Injectable()
export class BatchCommit {
  private readonly reaped = new ReapedUntil();
  private readonly known = new KnownUsage();
  private readonly queue: GroupCommit<LoadedCheck, CheckResult>;
  /** Each read's edges name the monthly partitions that hold them (see PartitionOf). */
  readonly partitionOf: PartitionOf = (from, to) => this.partitions.partitionOf(from, to);

  constructor(
    private readonly prisma: PrismaService,
    private readonly partitions: EventPartitions,
    private readonly config: Config,
    private readonly clock: Clock,
    private readonly alerts: BudgetAlerts,
    private readonly tuning: GuardTuning,
  ) {
    const v = config.values;
    const poolShare = Math.max(1, Math.floor(prisma.poolSize / 2));
    this.queue = new GroupCommit<LoadedCheck, CheckResult>(
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

  /** Queues a reserving check on its scopes; its answer is what its group committed, or busy. */
  async submit(projectId: string, check: LoadedCheck): Promise<Queued<CheckResult>> {
    const keys = [...new Set(check.case.limits.map((l) => l.scopeKey))];
    const queued = this.queue.submit(projectId, keys, check);
    guardQueueDepth.set(this.queue.depth);
    return queued;
  }

  /** Per scope of a project, up to when this process took its expired holds out (see ReapedUntil). */
  reapedUntil(projectId: string): (scopeKey: string) => number {
    return (scopeKey) => this.reaped.of(projectId, scopeKey);
  }

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
   * run, thread or session), then sent with BEGIN, the scopes' locks and COMMIT as one statement
   * that reads the usage under the locks and writes the reservations only if that usage is within
   * what the checks were decided on. Usage only makes a decision stricter as it grows, so each
   * decision is the one the usage read would give (see usage-bounds.ts); each answer shows that
   * usage, with the reservations of the checks before it. Only plain allows go this way (a
   * denial, a warning, a shrunk step, a tentative one declined is decided on a fresh read, as is a
   * batch naming one step twice); when the usage grew (another writer: an ingest, another
   * replica), nothing was written and the batch is decided again in two trips.
   */
  private async commitInOneTrip(projectId: string, checks: LoadedCheck[]): Promise<CheckResult[] | undefined> {
    const plan = this.planOneTrip(projectId, checks);
    if (!plan) return undefined;
    const { at, reads, outcomes, reservations, bounds } = plan;
    const scopeKeys = [...new Set(reservations.flatMap((r) => r.scopeKeys))];
    const reapedUntil = this.reapedUntil(projectId);
    const read = usageRead(projectId, reads, at, reapedUntil, this.partitionOf);
    const reap = { scopeKeys, expiredBy: at, after: scopeKeys.map(reapedUntil) };
    const trip = reserveInOneTripStatement(
      projectId,
      reservations,
      outcomes.flatMap((o) => o.events),
      reap,
      read,
      bounds,
    );
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
      this.known.missed(projectId, grew.length ? grew : plan.keys);
      return undefined;
    }
    guardCommits.inc({ path: 'one_trip' });
    return this.answerOneTrip(projectId, checks, plan, made, usage);
  }

  /**
   * The checks decided on the usage this process knows, with the room above it in which every
   * decision stays the same; none when a check is not a plain allow, or a key is not guessed.
   */
  private planOneTrip(projectId: string, checks: LoadedCheck[]): OneTripPlan | undefined {
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
    const ctx = decisionContext(at, this.config.values.GUARD_RESERVATION_TTL_MS);
    const outcomes = checks.map((c) => decideInOrder([c.case], guess, c.settings, ctx)[0]);
    if (!outcomes.every(isPlainAllow)) return undefined;
    const reservations = outcomes.map((o) => o.reservation!);
    // Room above the guess: the usage may have moved since (a step settled at other counts than it
    // held, another agent's step) without changing any of these decisions.
    const again = { ...ctx, newId: () => '' };
    const room = loosestBounds(
      guessed,
      stepRoom(reservations),
      (usage) =>
        decidesWithinBounds(limits, usage.values()) &&
        checks.every((c) => isPlainAllow(decideInOrder([c.case], usage, c.settings, again)[0])),
    );
    const bounds = new Map(held.map(([i]) => [i, room.get(readKey(reads[i]))!]));
    return { at, keys, reads, outcomes, reservations, bounds };
  }

  /** Each answer of a one-trip commit: the usage read, with the reservations made before its own. */
  private async answerOneTrip(
    projectId: string,
    checks: LoadedCheck[],
    plan: OneTripPlan,
    made: ReadonlySet<string>,
    usage: ReadonlyMap<string, UsageTotals>,
  ): Promise<CheckResult[]> {
    const { at, outcomes, reservations } = plan;
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
    const theirs = await this.existing(projectId, lost);
    this.known.set(projectId, working, plan.keys, true);
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
   */
  private commitInTwoTrips(projectId: string, checks: LoadedCheck[]): Promise<CheckResult[]> {
    const keys = [...new Set(checks.flatMap((c) => c.case.limits.map((l) => l.scopeKey)))];
    // Each statement of the opening has its own snapshot, so the read sees whatever committed
    // before the locks were ours. The window starts at `at`, taken before any wait for the locks:
    // a wait makes it start earlier, never later, and has no upper edge (see readScopeUsage).
    const at = this.clock.now();
    guardUsageReads.inc();
    const reapedUntil = this.reapedUntil(projectId);
    const limits = checks.flatMap((c) => c.case.limits);
    const read = usageRead(projectId, withLastHours(dedupe(limits)), at, reapedUntil, this.partitionOf);
    // Both the locks' statements and the read run on plans the connection keeps.
    const opening = withIndexPlans([...lockScopesStatements(projectId, keys), read.statement]);
    return this.prisma.transaction(
      async (tx, opened) => {
        // [off, locks?, read, on]
        const usage = read.usage(opened[opened.length - 2]);
        const working = new Map(usage);
        const results = this.decideInArrivalOrder(checks, working, at);
        await this.answerRetriesFirst(tx, projectId, results, at);
        const decided = results.filter(isDecided);
        // On the plan the connection has cached for it (made with its indexes: it takes out the
        // batch's expired holds). The locks of every scope it reaps are ours.
        const outcome = guardOutcomeStatement(
          projectId,
          decided.flatMap((d) => (d.outcome.reservation ? [d.outcome.reservation] : [])),
          decided.flatMap((d) => d.outcome.events),
          { scopeKeys: keys, expiredBy: at, after: keys.map(reapedUntil) },
        );
        const committing = this.commitOutcome(tx, projectId, outcome, checks[0], decided);
        // The answers are made while PostgreSQL runs the outcome and flushes the commit; a caller
        // gets one only once it committed.
        const answers = results.map((r) => (isDecided(r) ? respond(r.check, r.outcome, at, usage) : undefined));
        const made = committing ? madeReservations(await committing) : new Set<string>();
        if (outcome) this.reaped.reaped(projectId, keys, at.getTime());
        this.known.set(
          projectId,
          working,
          checks.flatMap((c) => c.reads.map(readKey)),
        );
        return this.answerCommitted(projectId, results, answers, made, at);
      },
      this.config.values.GUARD_TIMEOUT_MS,
      opening,
    );
  }

  /** Each check decided on `working`, which holds the reservations of the checks before it. */
  private decideInArrivalOrder(checks: LoadedCheck[], working: Map<string, UsageTotals>, at: Date): Pending[] {
    const ctx = decisionContext(at, this.config.values.GUARD_RESERVATION_TTL_MS);
    const results: Pending[] = [];
    const madeHere = new Map<string, NewReservation>();
    for (const check of checks) {
      const sibling = madeHere.get(stepIdOf(check));
      if (sibling) results.push({ sibling, check });
      else {
        const [outcome] = decideInOrder([check.case], working, check.settings, ctx);
        if (outcome.reservation) madeHere.set(stepIdOf(check), outcome.reservation);
        results.push({ outcome, check });
      }
    }
    return results;
  }

  /**
   * A retried check (its stepId already has a reservation) gets that reservation back. A plain
   * reservation finds out by its insert, which skips a step that has one; a check whose outcome
   * would append anything else (a denial, a warning), or a tentative one declined, looks its step
   * up first, in a round trip of its own, so that a retry never logs a decision.
   */
  private async answerRetriesFirst(tx: TxSql, projectId: string, results: Pending[], at: Date): Promise<void> {
    const doubtful = results
      .filter(isDecided)
      .filter((d) => d.outcome.declined || d.outcome.events.some((e) => e.type !== 'BudgetReserved'));
    if (!doubtful.length) return;
    const [, rows] = await tx.statements(
      withIndexPlans([stepReservationsStatement(projectId, [...new Set(doubtful.map(stepOf))])]),
    );
    const existing = existingByStep(rows);
    results.forEach((r, i) => {
      const prior = isDecided(r) && existing.get(stepOf(r));
      if (prior) results[i] = retried(r.check, prior, at);
    });
  }

  /**
   * The outcome with COMMIT in one trip; with denials, the outcome, then the budgets they
   * exhausted (their alert states), then COMMIT. In this order because every writer takes rows in
   * one order — reservations, holds and hold totals before alert states — as ingest does when it
   * alerts: a batch that took an alert state first and its hold totals second deadlocked with an
   * ingest settling a step on the same budgets, which took them the other way round.
   */
  private commitOutcome(
    tx: TxSql,
    projectId: string,
    outcome: ReturnType<typeof guardOutcomeStatement>,
    first: LoadedCheck,
    decided: readonly Decided[],
  ): Promise<Record<string, unknown>[]> | undefined {
    const denied = decided.filter(
      (d) => d.check.case.audit && !d.outcome.declined && d.outcome.decision.decision === 'deny',
    );
    if (!denied.length) return outcome ? tx.commitWith(outcome, [INDEX_PLANS]) : undefined;
    return (async () => {
      const rows = outcome ? (await tx.statements(withIndexPlans([outcome])))[1] : [];
      await this.alerts.exhausted(
        tx,
        projectId,
        first.settings,
        denied.map((d) => ({ violations: d.outcome.decision.violations, stepId: d.check.request.stepId ?? null })),
      );
      await tx.commit();
      return rows;
    })();
  }

  /**
   * Every check's answer once committed. A step that already had a reservation (a retry, or one
   * made by another replica between our read and our insert) keeps it: committed, so it is read
   * outside the transaction.
   */
  private async answerCommitted(
    projectId: string,
    results: Pending[],
    answers: (GuardCheckResponse | undefined)[],
    made: ReadonlySet<string>,
    at: Date,
  ): Promise<CheckResult[]> {
    const kept = (r: NewReservation | undefined) => r === undefined || made.has(r.id);
    const lost = results.flatMap((r) =>
      ('sibling' in r && !kept(r.sibling)) || (isDecided(r) && !kept(r.outcome.reservation)) ? [stepOf(r)] : [],
    );
    const theirs = await this.existing(projectId, [...new Set(lost)]);
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
  }

  /** The reservations some steps hold (rare: a retried step, or one reserved by another replica meanwhile). */
  private existing(projectId: string, stepIds: string[]): Promise<Map<string, ExistingReservation>> {
    return stepIds.length
      ? readExistingReservations(this.prisma, projectId, stepIds)
      : Promise.resolve(new Map<string, ExistingReservation>());
  }
}

/** A check that goes the one-trip way: a reservation, allowed, nothing else appended or changed. */
const isPlainAllow = (o: CheckOutcome) =>
  o.reservation !== undefined &&
  o.decision.decision === 'allow' &&
  !o.decision.warnings.length &&
  !o.adjust &&
  o.events.every((e) => e.type === 'BudgetReserved');
