import { Injectable, Optional } from '@nestjs/common';
import { EventBus } from '@nestjs/cqrs';
import { PrismaService } from '@tollgate/database';
import { AppError } from '@tollgate/platform';
import { readProjectSettings } from '../project-settings/project-settings.sql';
import { StepsRepriced } from '../events';
import { BudgetAlerts } from '../budget-alerts/budget-alerts';
import { normalizeModel, normalizeProvider } from '../pricing/price-step';
import { appendRepricedSteps, lockProjectReprices } from './append-repriced-steps.sql';
import { decideReprice, RepriceTally, type RepriceDecision, type RepriceSummary } from './reprice-decision';
import { repricedContributions } from './repriced-contributions.sql';
import { countRangeSteps, readRepriceBatch, type StepRange } from './step-costs.sql';

export interface RepriceRequest {
  from: Date;
  to: Date;
  provider?: string;
  model?: string;
  dryRun?: boolean;
}

export interface RepriceOptions {
  /** Steps per transaction. */
  batchSize?: number;
  /** After each batch, with the totals so far. */
  onBatch?: (soFar: RepriceSummary) => void;
}

export const REPRICE_BATCH_SIZE = 1000;
/** Bounds each batch's lock wait (behind another reprice's batch) and statements. */
const BATCH_TIMEOUT_MS = 60_000;

const rangeOf = (r: RepriceRequest): StepRange => ({
  from: r.from,
  to: r.to,
  ...(r.provider !== undefined ? { provider: normalizeProvider(r.provider) } : {}),
  ...(r.provider !== undefined && r.model !== undefined ? { model: normalizeModel(r.provider, r.model) } : {}),
});

/**
 * Recomputes the cost of a project's stored steps with the prices in force at each step's
 * occurredAt, and appends one `StepRepriced` correction per step whose latest cost differs —
 * never rewriting the step. Batched (one transaction per `batchSize` steps, in occurredAt
 * order); each batch holds the project's reprice lock, so two reprices at once take turns batch
 * by batch, and each reads the latest costs the other committed: nothing is applied twice (the
 * corrections' deterministic ids make sure of it even without the lock). Idempotent: a second
 * identical reprice appends nothing.
 */
@Injectable()
export class Repricer {
  constructor(
    private readonly prisma: PrismaService,
    private readonly eventBus: EventBus,
    // Optional so the SQL spec can run the repricer alone (no alerts there).
    @Optional() private readonly alerts?: BudgetAlerts,
  ) {}

  /** How many steps the request's range holds (a progress bar's total). */
  countSteps(projectId: string, request: RepriceRequest): Promise<number> {
    return countRangeSteps(this.prisma.sql, projectId, rangeOf(request));
  }

  async reprice(projectId: string, request: RepriceRequest, options: RepriceOptions = {}): Promise<RepriceSummary> {
    const batchSize = options.batchSize ?? REPRICE_BATCH_SIZE;
    const dryRun = request.dryRun ?? false;
    // The prices as of the start: every batch of one reprice applies the same ones.
    const settings = await readProjectSettings(this.prisma.sql, projectId);
    if (!settings) throw new AppError('not_found', `No project ${projectId}`, 'projectId');
    const range = rangeOf(request);
    const tally = new RepriceTally({ ...request, dryRun });
    let after: { occurredAt: Date; position: string } | null = null;
    for (;;) {
      const { read, decisions, appended } = await this.prisma.transaction(async (tx) => {
        if (!dryRun) await lockProjectReprices(tx, projectId);
        const steps = await readRepriceBatch(tx, projectId, range, after, batchSize);
        const decisions: RepriceDecision[] = steps.map((s) => decideReprice(s, settings.overrides));
        if (dryRun) return { read: steps, decisions, appended: null };
        const corrections = decisions.flatMap((d) => (d.kind === 'changed' ? [d.correction] : []));
        if (!this.alerts?.applies(settings) || !corrections.length) {
          const stored = await appendRepricedSteps(tx, projectId, corrections);
          return { read: steps, decisions, appended: new Set(stored.keys()) };
        }
        // A correction can take a budget across an alert threshold: decided in this transaction.
        const moved = await repricedContributions(tx, projectId, corrections);
        let appended = new Set<string>();
        await this.alerts.decideIn(
          tx,
          projectId,
          settings,
          [...new Set(moved.flatMap((m) => m.scopeKeys))],
          async () => {
            appended = new Set((await appendRepricedSteps(tx, projectId, corrections)).keys());
            return moved.filter((m) => appended.has(m.correctionId!));
          },
        );
        return { read: steps, decisions, appended };
      }, BATCH_TIMEOUT_MS);
      tally.add(decisions, appended);
      options.onBatch?.(tally.summary());
      if (read.length < batchSize) break;
      const last = read[read.length - 1];
      after = { occurredAt: last.occurredAt, position: last.position };
    }
    const summary = tally.summary();
    if (!dryRun && summary.repriced > 0) this.eventBus.publish(new StepsRepriced(projectId, summary.repriced));
    return summary;
  }
}
