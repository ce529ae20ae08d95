import { Module } from '@nestjs/common';
import { LedgerHttpModule } from '@tollgate/ledger';
import { MetricsHttpModule } from '@tollgate/metrics';
import { HealthController } from '@tollgate/platform';
import { DocsController } from './docs.controller';

/** Everything the HTTP API serves (the platform module is added by the entrypoint). */
@Module({
  imports: [LedgerHttpModule, MetricsHttpModule],
  controllers: [HealthController, DocsController],
})
export class ApiFeaturesModule {}
