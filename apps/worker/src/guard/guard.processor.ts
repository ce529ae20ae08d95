import { InjectQueue, Processor, WorkerHost } from '@nestjs/bullmq';
import { Logger, OnApplicationBootstrap } from '@nestjs/common';
import { ReservationsService } from '@tollgate/ledger';
import { JobHandlers } from '@tollgate/platform';
import type { Job, Queue } from 'bullmq';
import { keepJobScheduler } from '../job-schedulers';

/** The guard's housekeeping jobs: registers their handlers; JobHandlers.route runs them. */
@Processor('guard')
export class GuardProcessor extends WorkerHost implements OnApplicationBootstrap {
  private readonly logger = new Logger('guard');

  constructor(
    private readonly handlers: JobHandlers,
    reservations: ReservationsService,
    @InjectQueue('guard') private readonly queue: Queue,
  ) {
    super();
    handlers.register('guard', 'reservations.sweep', async () => {
      const lapsed = await reservations.sweep();
      if (lapsed) this.logger.log({ msg: 'reservations lapsed', count: lapsed });
      return { lapsed };
    });
  }

  async onApplicationBootstrap(): Promise<void> {
    await keepJobScheduler(
      this.queue,
      'reservations.sweep',
      { every: 30_000 },
      { name: 'reservations.sweep', data: {}, opts: { removeOnComplete: 100, removeOnFail: 100 } },
    );
  }

  process(job: Job): Promise<unknown> {
    return this.handlers.route('guard', job);
  }
}
