import { Module } from '@nestjs/common';
import { ExportersHttpModule } from '@tollgate/exporters';
import { LedgerHttpModule } from '@tollgate/ledger';
import { PrometheusHttpModule } from '@tollgate/telemetry';
import { MastraObservabilityHttpModule } from '@tollgate/usage-metrics';
import { HealthController } from '@tollgate/platform';
import { DashboardController } from './dashboard.controller';
import { DocsController } from './docs.controller';

/** Everything the HTTP API serves (the platform module is added by the entrypoint). */
@Module({
  imports: [LedgerHttpModule, ExportersHttpModule, PrometheusHttpModule, MastraObservabilityHttpModule],
  controllers: [HealthController, DocsController, DashboardController],
})
export class ApiFeaturesModule {}
