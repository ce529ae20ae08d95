import { CommandHandler, EventBus, type ICommandHandler } from '@nestjs/cqrs';
import type { IngestResponse, IngestResult } from '@tollgate/contracts';
import { EventPartitions, PrismaService } from '@tollgate/database';
import { Clock, Config } from '@tollgate/platform';
import { StepUsageRecorded } from '../events';
import { priceStep } from '../pricing/price-step';
import { PriceOverrides } from '../prices/price-overrides.repository';
import { AppendEvents } from './append-events.command';
import { insertStepEvents, type StepRow } from './insert-step-events.sql';
import { validateStepEvents } from './validate-step-events';

@CommandHandler(AppendEvents)
export class AppendEventsHandler implements ICommandHandler<AppendEvents, IngestResponse> {
  constructor(
    private readonly prisma: PrismaService,
    private readonly partitions: EventPartitions,
    private readonly prices: PriceOverrides,
    private readonly eventBus: EventBus,
    private readonly config: Config,
    private readonly clock: Clock,
  ) {}

  async execute({ projectId, events }: AppendEvents): Promise<IngestResponse> {
    const now = this.clock.now();
    const { valid, decided } = validateStepEvents(events, now, this.config.values.INGEST_MAX_FUTURE_SKEW_MS);
    const results: IngestResult[] = new Array(events.length);
    for (const [index, result] of decided) results[index] = result;

    if (valid.length > 0) {
      const overrides = await this.prices.forProject(projectId);
      const rows: StepRow[] = valid.map(({ event }) => {
        const occurredAt = new Date(event.occurredAt);
        return { event, occurredAt, cost: priceStep(event, occurredAt, overrides) };
      });
      // Settlement events are stamped now; their month needs a partition too.
      await this.partitions.ensureFor([now, ...rows.map((r) => r.occurredAt)]);
      // One statement, so one round trip and atomic without an explicit transaction.
      const stored = await insertStepEvents(this.prisma.sql, projectId, rows);
      const published: StepUsageRecorded[] = [];
      valid.forEach(({ index, event }, i) => {
        const position = stored.get(event.eventId);
        if (position === undefined) {
          results[index] = { index, eventId: event.eventId, status: 'duplicate' };
          return;
        }
        results[index] = { index, eventId: event.eventId, status: 'accepted', position };
        const cost = rows[i].cost;
        published.push(new StepUsageRecorded(projectId, BigInt(position), event, cost.priced ? cost.costMicros : null));
      });
      this.eventBus.publishAll(published);
    }

    const count = (status: IngestResult['status']) => results.filter((r) => r.status === status).length;
    return { accepted: count('accepted'), duplicates: count('duplicate'), rejected: count('rejected'), results };
  }
}
