import { Logger } from '@nestjs/common';
import { CommandHandler, type ICommandHandler } from '@nestjs/cqrs';
import type { GuardCheckRequest, GuardCheckResponse } from '@tollgate/contracts';
import { EventPartitions, PrismaService } from '@tollgate/database';
import { Clock, Config, isBusy, isUnavailable } from '@tollgate/platform';
// The metric objects only: the Prometheus module itself listens to the ledger's events.
import { guardDecisions, guardLatency, guardUsageReads } from '@tollgate/telemetry/metrics';
import { BudgetAlerts } from '../budget-alerts/budget-alerts';
import { decideInOrder, type UsageTotals } from '../budgets/guard-decision';
import { appendSystemEvents } from '../system-events/append-system-events.sql';
import { busy, respond, unavailable } from './answers';
import { BatchCommit } from './batching/batch-commit';
import { CoalescedReads } from './batching/coalesced-reads';
import { CheckGuard } from './check-guard.command';
import { CheckLoader, decisionContext, type LoadedCheck } from './loaded-check';
import { guardRead, type UsageRequest } from '../scope-usage/read-scope-usage.sql';

/** Usage of every (scope, window) of a check, read at `at`, in one snapshot. */
interface UsageRead {
  at: Date;
  usage: ReadonlyMap<string, UsageTotals>;
}

class ReadTimeout extends Error {}

/**
 * POST /v1/guard/check, one way through: load the check (settings, limits, priced estimate) →
 * a reserving check joins its scopes' group commit (take the scopes' locks → read → decide, pure,
 * in arrival order → append the decided events → commit: see BatchCommit) → answer what
 * committed. A check that reserves nothing only reads, then decides.
 */
@CommandHandler(CheckGuard)
export class CheckGuardHandler implements ICommandHandler<CheckGuard, GuardCheckResponse> {
  private readonly logger = new Logger('guard');
  private readonly reads = new CoalescedReads<UsageRead>();

  constructor(
    private readonly prisma: PrismaService,
    private readonly partitions: EventPartitions,
    private readonly config: Config,
    private readonly clock: Clock,
    private readonly loader: CheckLoader,
    private readonly batches: BatchCommit,
    private readonly alerts: BudgetAlerts,
  ) {}

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
      if (!isUnavailable(err)) throw err;
      this.logger.warn({
        msg: 'guard could not reach the database',
        failMode: request.failMode,
        cause: String((err as Error).message),
      });
      return unavailable(request.failMode, now);
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
    const check = await this.loader.load(projectId, request, now);
    // A request limit's alert thresholds are decided by the commits of its scope's steps.
    if (!request.dryRun) await this.alerts.register(projectId, request, check.settings);
    if (check.case.reserve) {
      // Reserving checks serialize on every scope they hold, so N agents racing one budget each
      // see the reservations of those before them. Checks on other scopes do not wait.
      const queued = await this.batches.submit(projectId, check);
      if (queued.kind === 'busy') return busy(queued.retryAfterMs, now);
      if ('error' in queued.value) throw queued.value.error;
      return queued.value.response;
    }
    return this.readAndDecide(projectId, check);
  }

  /**
   * A check that reserves nothing only reads: concurrent checks reading the same usage share one
   * statement, started after each of them arrived (see CoalescedReads). The read alone is bounded
   * in time; an audit event is appended before the answer, never after it.
   */
  private async readAndDecide(projectId: string, check: LoadedCheck): Promise<GuardCheckResponse> {
    const { at, usage } = await withTimeout(
      this.reads.run(check.shape, () => this.read(projectId, check.reads)),
      this.config.values.GUARD_TIMEOUT_MS,
    );
    const ctx = decisionContext(at, this.config.values.GUARD_RESERVATION_TTL_MS);
    const [outcome] = decideInOrder([check.case], new Map(usage), check.settings, ctx);
    if (outcome.events.length) await appendSystemEvents(this.prisma.sql, projectId, outcome.events);
    if (check.case.audit && outcome.decision.decision === 'deny') {
      await this.alerts.exhausted(this.prisma.sql, projectId, check.settings, [
        { violations: outcome.decision.violations, stepId: check.request.stepId ?? null },
      ]);
    }
    return respond(check, outcome, at, usage);
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
      this.batches.reapedUntil(projectId),
      this.batches.partitionOf,
    );
    return { at, usage };
  }
}

function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new ReadTimeout()), ms)));
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}
