import { Module, OnApplicationBootstrap } from '@nestjs/common';
import { LedgerModule } from '@tollgate/ledger';
import { JobHandlers } from '@tollgate/platform';
import { MaintenanceProcessor } from './maintenance/maintenance.processor';
import { ProjectorModule } from './projector/projector.processor';

/** The BullMQ processors (the platform module is added by the entrypoint). */
@Module({
  imports: [LedgerModule, ProjectorModule],
  providers: [MaintenanceProcessor],
})
export class WorkerFeaturesModule implements OnApplicationBootstrap {
  constructor(private readonly handlers: JobHandlers) {}

  onApplicationBootstrap(): void {
    // Every job named in QUEUES must have exactly one handler, or the worker does not start.
    this.handlers.assertComplete();
  }
}
