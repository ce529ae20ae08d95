import { Logger } from '@nestjs/common';
import { CommandHandler, type ICommandHandler } from '@nestjs/cqrs';
import type { GuardCheckRequest, GuardCheckResponse, ScopeUsage } from '@tollgate/contracts';
import { EventPartitions, PrismaService, type Sql } from '@tollgate/database';
// The metric objects only: the observability module itself listens to the ledger's events.
import { guardDecisions, guardLatency, guardUsageReads } from '@tollgate/observability/metrics';
import { AppError, Caches, Clock, Config, isUnavailable } from '@tollgate/platform';
import { randomUUID } from 'node:crypto';
import { appendSystemEvents, type SystemEvent } from '../append-events/append-system-events.sql';
import { priceStep } from '../pricing/price-step';
import { CheckGuard } from './check-guard.command';
import { effectiveLimits, scopeKeysOf } from './effective-limits';
import { decide, EMPTY_USAGE, usageKey, type Decision, type StepEstimate, type UsageTotals } from './guard-decision';
import { readProjectSettings, type ProjectSettings } from './project-settings.sql';
import { CoalescedReads } from './coalesced-reads';
import { KeyedMutex } from './keyed-mutex';
import { readScopeUsage, type UsageRequest } from './read-scope-usage.sql';

class GuardTimeout extends Error {}

/** Usage of every (scope, window) of a check, read at `at`, in one snapshot. */
interface UsageRead {
  at: Date;
  usage: ReadonlyMap<string, UsageTotals>;
}

const NO_SETTINGS: ProjectSettings = { unpricedPolicy: 'count_tokens', policies: [], overrides: [] };

/** A lock wait past lock_timeout, or a statement past its timeout: the guard could not decide in time. */
const isTimeout = (err: unknown) => ['55P03', '57014'].includes((err as { code?: string })?.code ?? '');

@CommandHandler(CheckGuard)
export class CheckGuardHandler implements ICommandHandler<CheckGuard, GuardCheckResponse> {
  private readonly logger = new Logger('guard');
  private readonly mutex = new KeyedMutex();
  private readonly reads = new CoalescedReads<UsageRead>();

  constructor(
    private readonly prisma: PrismaService,
    private readonly partitions: EventPartitions,
    private readonly config: Config,
    private readonly clock: Clock,
    private readonly caches: Caches,
  ) {}

  async execute({ projectId, request }: CheckGuard): Promise<GuardCheckResponse> {
    const started = process.hrtime.bigint();
    let outcome = 'error';
    try {
      const response = await this.decideWithin(projectId, request);
      outcome = response.reason ? `failmode_${response.decision}` : response.decision === 'allow' && response.warnings.length ? 'warn' : response.decision;
      return response;
    } finally {
      guardDecisions.inc({ outcome });
      guardLatency.observe({ outcome }, Number(process.hrtime.bigint() - started) / 1e9);
    }
  }

  private async decideWithin(projectId: string, request: GuardCheckRequest): Promise<GuardCheckResponse> {
    const now = this.clock.now();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new GuardTimeout()), this.config.values.GUARD_TIMEOUT_MS);
    });
    try {
      return await Promise.race([this.evaluate(projectId, request, now), timeout]);
    } catch (err) {
      // The caller chose what an undecidable step gets; a bug is still a bug (500, logged).
      if (err instanceof GuardTimeout || isTimeout(err) || isUnavailable(err)) {
        const timedOut = err instanceof GuardTimeout || isTimeout(err);
        this.logger.warn({ msg: 'guard could not decide', failMode: request.failMode, cause: timedOut ? 'timeout' : String((err as Error).message) });
        return {
          decision: request.failMode === 'closed' ? 'deny' : 'allow',
          reason: `guard unavailable (${timedOut ? `no answer within ${this.config.values.GUARD_TIMEOUT_MS} ms` : 'database unreachable'}); failMode ${request.failMode}`,
          violations: [],
          warnings: [],
          skipped: [],
          usage: {},
          asOf: now.toISOString(),
        };
      }
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  private async evaluate(projectId: string, request: GuardCheckRequest, now: Date): Promise<GuardCheckResponse> {
    // Before any transaction: creating a partition locks the whole log, which an open transaction
    // that has read it would wait on forever. (Cached: a no-op once this month's partition is known.)
    await this.partitions.ensureFor([now]);
    const settings = ((await this.caches.projects.get(projectId, () => readProjectSettings(this.prisma.sql, projectId))) as ProjectSettings | null) ?? NO_SETTINGS;
    const { limits, skipped } = effectiveLimits(request, settings.policies);
    const estimate = this.estimate(request, settings.overrides, now);
    const requests = dedupe(limits.map((l) => ({ scope: l.scope, scopeId: l.scopeKey.slice(l.scope.length + 1), window: l.window })));
    const reserving = request.reserve && !request.dryRun;
    const audit = !request.dryRun;

    const read = async (db: Sql): Promise<UsageRead> => {
      // The window ends when usage is read, after any wait for the scope's lock: a step event
      // committed while this check queued is inside it (its reservation is settled by then).
      const at = this.clock.now();
      guardUsageReads.inc();
      return { at, usage: await readScopeUsage(db, projectId, requests, at) };
    };
    const run = async (db: Sql, { at, usage }: UsageRead) => {
      const decision = decide(limits, usage, estimate, settings.unpricedPolicy);
      const events: SystemEvent[] = [];
      let reservation: GuardCheckResponse['reservation'];
      if (reserving && decision.decision === 'allow') {
        const made = await this.reserve(db, projectId, request, estimate!, at);
        if (!made) {
          // A concurrent retry of the same step reserved first: answer with its reservation.
          const existing = await this.existingReservation(projectId, request.stepId!, db);
          return { at, usage, decision, reservation: existing?.reservation };
        }
        reservation = made;
        events.push({ eventId: `reservation:${reservation.id}:reserved`, type: 'BudgetReserved', occurredAt: at, scopes: request.context, reservationId: reservation.id, data: { stepId: request.stepId, ...reservation } });
      }
      if (audit && (decision.decision === 'deny' || decision.warnings.length)) {
        events.push({ eventId: `decision:${randomUUID()}`, type: 'GuardDecided', occurredAt: at, scopes: request.context, data: { decision: decision.decision, violations: decision.violations, warnings: decision.warnings, stepId: request.stepId ?? null } });
      }
      if (events.length) await appendSystemEvents(db, projectId, events);
      return { at, usage, decision, reservation };
    };

    let result: { at: Date; usage: ReadonlyMap<string, UsageTotals>; decision: Decision; reservation?: GuardCheckResponse['reservation'] };
    if (reserving) {
      const existing = await this.existingReservation(projectId, request.stepId!);
      if (existing) return { ...existing, skipped, asOf: now.toISOString() };
      // Checks that reserve serialize on every scope the step touches, so N agents racing one
      // budget each see the reservations of those before them. Other scopes do not wait.
      const keys = scopeKeysOf(request.context);
      const release = await this.mutex.acquire(keys.map((k) => `${projectId}\u001f${k}`));
      try {
        result = await this.prisma.transaction(async (tx) => {
          await tx.query(
            `SELECT pg_advisory_xact_lock(h) FROM (SELECT hashtextextended($1 || chr(31) || k, 0) AS h FROM unnest($2::text[]) AS k ORDER BY 1) AS s`,
            projectId,
            keys,
          );
          return run(tx, await read(tx));
        }, this.config.values.GUARD_TIMEOUT_MS);
      } finally {
        release();
      }
    } else {
      // A check that reserves nothing only reads: concurrent checks reading the same usage share
      // one statement, started after each of them arrived (see CoalescedReads).
      const key = [projectId, ...requests.map((r) => usageKey(`${r.scope}:${r.scopeId}`, r.window)).sort()].join('\u001f');
      result = await run(this.prisma.sql, await this.reads.run(key, () => read(this.prisma.sql)));
    }
    return {
      decision: result.decision.decision,
      violations: result.decision.violations,
      warnings: result.decision.warnings,
      skipped,
      usage: usageView(requests, result.usage),
      ...(result.reservation ? { reservation: result.reservation } : {}),
      asOf: result.at.toISOString(),
    };
  }

  private estimate(request: GuardCheckRequest, overrides: Parameters<typeof priceStep>[2], now: Date): StepEstimate | undefined {
    if (!request.estimate) return undefined;
    const { provider, model, inputTokens, maxOutputTokens } = request.estimate;
    const cost = priceStep({ provider, model, usage: { inputTokens, outputTokens: maxOutputTokens } }, now, overrides);
    return { inputTokens, outputTokens: maxOutputTokens, costMicros: cost.priced ? Number(cost.costMicros) : null, costUnit: cost.priced ? cost.currency : 'USD' };
  }

  private async reserve(db: Sql, projectId: string, request: GuardCheckRequest, estimate: StepEstimate, now: Date) {
    const id = `rsv_${randomUUID().replace(/-/g, '')}`;
    const expiresAt = new Date(now.getTime() + this.config.values.GUARD_RESERVATION_TTL_MS);
    const inserted = await db.query<{ id: string }>(
      `INSERT INTO reservations (id, project_id, step_id, scope_keys, cost_micros, cost_unit, input_tokens, output_tokens, created_at, expires_at)
       VALUES ($1, $2, $3, $4::text[], $5, $6, $7, $8, $9, $10)
       ON CONFLICT (project_id, step_id) DO NOTHING RETURNING id`,
      id,
      projectId,
      request.stepId,
      scopeKeysOf(request.context),
      estimate.costMicros ?? 0,
      estimate.costUnit,
      estimate.inputTokens,
      estimate.outputTokens,
      now,
      expiresAt,
    );
    if (!inserted.length) return null;
    return { id, estimatedCost: (estimate.costMicros ?? 0) / 1e6, costUnit: estimate.costUnit, inputTokens: estimate.inputTokens, outputTokens: estimate.outputTokens, expiresAt: expiresAt.toISOString() };
  }

  /** A retried check for a step that already holds a reservation gets that reservation back. */
  private async existingReservation(projectId: string, stepId: string, db: Sql = this.prisma.sql): Promise<Omit<GuardCheckResponse, 'skipped' | 'asOf'> | null> {
    const [found] = await db.query<{ id: string; status: string; cost_micros: string; cost_unit: string; input_tokens: string; output_tokens: string; expires_at: Date }>(
      'SELECT id, status, cost_micros, cost_unit, input_tokens, output_tokens, expires_at FROM reservations WHERE project_id = $1 AND step_id = $2',
      projectId,
      stepId,
    );
    if (!found) return null;
    if (found.status !== 'open') throw new AppError('conflict', `stepId ${stepId} already had a reservation, now ${found.status}; use a new stepId for a new step`, 'stepId');
    return {
      decision: 'allow',
      violations: [],
      warnings: [],
      usage: {},
      reservation: { id: found.id, estimatedCost: Number(found.cost_micros) / 1e6, costUnit: found.cost_unit, inputTokens: Number(found.input_tokens), outputTokens: Number(found.output_tokens), expiresAt: found.expires_at.toISOString() },
    };
  }
}

function dedupe(requests: UsageRequest[]): UsageRequest[] {
  const seen = new Map<string, UsageRequest>();
  for (const r of requests) seen.set(`${r.scope}:${r.scopeId}@${r.window}`, r);
  return [...seen.values()];
}

function usageView(requests: UsageRequest[], usage: ReadonlyMap<string, UsageTotals>): Record<string, ScopeUsage> {
  const out: Record<string, ScopeUsage> = {};
  for (const r of requests) {
    const key = usageKey(`${r.scope}:${r.scopeId}`, r.window);
    const u = usage.get(key) ?? EMPTY_USAGE;
    out[key] = {
      scope: r.scope,
      window: r.window,
      inputTokens: u.inputTokens,
      outputTokens: u.outputTokens,
      totalTokens: u.inputTokens + u.outputTokens,
      estimatedCost: u.costMicros / 1e6,
      costUnit: u.costUnit,
      reservedCost: u.reservedCostMicros / 1e6,
      reservedInputTokens: u.reservedInputTokens,
      reservedOutputTokens: u.reservedOutputTokens,
      unpricedEvents: u.unpricedEvents,
    };
  }
  return out;
}
