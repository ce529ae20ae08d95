import { CommandHandler, EventBus, type ICommandHandler } from '@nestjs/cqrs';
import { StepUsageRecorded, type IngestResponse, type IngestResult } from '@tollgate/contracts';
import { EventPartitions, PrismaService } from '@tollgate/database';
import { Clock, Config } from '@tollgate/platform';
import { reservationsExceeded, zeroCostSteps } from '@tollgate/telemetry/metrics';
import { ProjectSettingsReader } from '../project-settings/project-settings.reader';
import { priceStep } from '../pricing/price-step';
import { readReservationContexts } from '../reservations/release-reservation.sql';
import { scopeKeysOf } from '../budgets/effective-limits';
import { BudgetAlerts } from '../budget-alerts/budget-alerts';
import { AppendEvents } from './append-events.command';
import { insertStepEvents, isZeroCostWithTokens, type StepRow } from './insert-step-events.sql';
import { stepContributions } from './step-contributions';
import { validateStepEvents, type ValidatedBatch } from './validate-step-events';

@CommandHandler(AppendEvents)
export class AppendEventsHandler implements ICommandHandler<AppendEvents, IngestResponse> {
  constructor(
    private readonly prisma: PrismaService,
    private readonly partitions: EventPartitions,
    private readonly projectSettings: ProjectSettingsReader,
    private readonly eventBus: EventBus,
    private readonly config: Config,
    private readonly clock: Clock,
    private readonly alerts: BudgetAlerts,
  ) {}

  async execute({ projectId, events }: AppendEvents): Promise<IngestResponse> {
    const now = this.clock.now();
    const settings = await this.projectSettings.get(projectId);
    const operatorMax = this.config.values.INGEST_MAX_AGE_DAYS;
    const maxAgeDays = Math.min(operatorMax, settings?.maxEventAgeDays ?? operatorMax);
    const { valid, decided } = validateStepEvents(events, now, {
      maxFutureSkewMs: this.config.values.INGEST_MAX_FUTURE_SKEW_MS,
      maxAgeDays,
    });
    const results: IngestResult[] = new Array(events.length);
    for (const [index, result] of decided) results[index] = result;

    await this.rejectForeignSettlements(projectId, valid, results);
    if (valid.length > 0) {
      const overrides = settings?.overrides ?? [];
      const rows: StepRow[] = valid.map(({ event }) => {
        const occurredAt = new Date(event.occurredAt);
        return { event, occurredAt, cost: priceStep(event, occurredAt, overrides) };
      });
      // Settlement events are stamped now; their month needs a partition too.
      await this.partitions.ensureFor([now, ...rows.map((r) => r.occurredAt)]);
      // One statement, so one round trip and atomic without an explicit transaction; with the
      // budget alerts it crossed in the same transaction when the project has alerts.
      const stored = this.alerts.applies(settings)
        ? await this.alerts.commit(
            projectId,
            settings,
            [...new Set(rows.flatMap((r) => scopeKeysOf(r.event)))],
            async (tx) => {
              const inserted = await insertStepEvents(tx, projectId, rows);
              return { result: inserted, steps: stepContributions(rows, inserted) };
            },
          )
        : await insertStepEvents(this.prisma.sql, projectId, rows);
      const published: StepUsageRecorded[] = [];
      valid.forEach(({ index, event }, i) => {
        const step = stored.get(event.eventId);
        if (step === undefined) {
          results[index] = { index, eventId: event.eventId, status: 'duplicate' };
          return;
        }
        const { position, exceeded } = step;
        results[index] = {
          index,
          eventId: event.eventId,
          status: 'accepted',
          position,
          ...(exceeded ? { reservationExceeded: exceeded } : {}),
        };
        if (exceeded) reservationsExceeded.inc();
        if (isZeroCostWithTokens(event)) zeroCostSteps.inc();
        const cost = rows[i].cost;
        published.push(new StepUsageRecorded(projectId, BigInt(position), event, cost.priced ? cost.costMicros : null));
      });
      this.eventBus.publishAll(published);
    }

    const count = (status: IngestResult['status']) => results.filter((r) => r.status === status).length;
    return { accepted: count('accepted'), duplicates: count('duplicate'), rejected: count('rejected'), results };
  }

  /**
   * A step event settles the reservation it names only if it is the step that reservation was
   * made for: it must carry every scope id of the reservation's context. Otherwise it would free
   * one scope's hold and land on another; it is rejected (nothing of it is stored).
   */
  private async rejectForeignSettlements(projectId: string, valid: ValidatedBatch['valid'], results: IngestResult[]) {
    const named = [...new Set(valid.flatMap(({ event }) => (event.reservationId ? [event.reservationId] : [])))];
    if (!named.length) return;
    const contexts = await readReservationContexts(this.prisma.sql, projectId, named);
    for (let i = valid.length - 1; i >= 0; i--) {
      const { index, event } = valid[i];
      if (!event.reservationId) continue;
      const context = contexts.get(event.reservationId);
      const reason =
        context === undefined
          ? `names no reservation of this project (${event.reservationId})`
          : context
              .filter((k) => !scopeKeysOf(event).includes(k))
              .map((k) => `is a reservation for ${k}, which this event does not carry`)[0];
      if (!reason) continue;
      results[index] = {
        index,
        eventId: event.eventId,
        status: 'rejected',
        field: `events[${index}].reservationId`,
        reason,
      };
      valid.splice(i, 1);
    }
  }
}
