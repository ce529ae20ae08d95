import { Module, OnApplicationBootstrap } from '@nestjs/common';
import { ExportersModule } from '@tollgate/exporters';
import { LedgerModule } from '@tollgate/ledger';
import { JobHandlers } from '@tollgate/platform';
import { GuardProcessor } from './guard/guard.processor';
import { ExportsProcessor } from './exporters/exports.processor';
import { MaintenanceProcessor } from './maintenance/maintenance.processor';
import { ProjectorModule } from './projector/projector.processor';

/** The BullMQ processors (the platform module is added by the entrypoint). */
@Module({
  imports: [LedgerModule, ExportersModule, ProjectorModule],
  providers: [MaintenanceProcessor, GuardProcessor, ExportsProcessor],
})
export class WorkerFeaturesModule implements OnApplicationBootstrap {
  constructor(private readonly handlers: JobHandlers) {}

  onApplicationBootstrap(): void {
    // Every job named in QUEUES must have exactly one handler, or the worker does not start.
    this.handlers.assertComplete();
  }
}
