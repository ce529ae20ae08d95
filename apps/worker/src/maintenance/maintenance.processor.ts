import { InjectQueue, Processor, WorkerHost } from '@nestjs/bullmq';
import { Logger, OnApplicationBootstrap } from '@nestjs/common';
import { EventPartitions } from '@tollgate/database';
import { Config, JobHandlers, parseJob, type JobPayload } from '@tollgate/platform';
import type { Job, Queue } from 'bullmq';
import { keepJobScheduler } from '../job-schedulers';

/** Routes maintenance jobs to their handlers; the work itself lives in the handlers. */
@Processor('maintenance')
export class MaintenanceProcessor extends WorkerHost implements OnApplicationBootstrap {
  private readonly logger = new Logger('maintenance');

  constructor(
    private readonly handlers: JobHandlers,
    private readonly partitions: EventPartitions,
    private readonly config: Config,
    @InjectQueue('maintenance') private readonly queue: Queue,
  ) {
    super();
    handlers.register('maintenance', 'partitions.ensure', (data) => this.ensurePartitions(data as JobPayload<'maintenance', 'partitions.ensure'>));
  }

  async onApplicationBootstrap(): Promise<void> {
    // Hourly, and once now: a month boundary never finds the log without its partition.
    await keepJobScheduler(this.queue, 'partitions.ensure', { every: 3600_000 }, { name: 'partitions.ensure', data: {}, opts: { removeOnComplete: 100, removeOnFail: 100 } });
  }

  async process(job: Job): Promise<unknown> {
    const { name, data } = parseJob('maintenance', job.name, job.data);
    const handler = this.handlers.get('maintenance', name);
    if (!handler) throw new Error(`No handler for maintenance/${name}`);
    return handler(data);
  }

  private async ensurePartitions(data: JobPayload<'maintenance', 'partitions.ensure'>) {
    const names = await this.partitions.ensureAhead(new Date(), data.monthsAhead ?? this.config.values.PARTITIONS_AHEAD_MONTHS);
    this.logger.debug({ msg: 'partitions ensured', names });
    return { partitions: names };
  }
}
