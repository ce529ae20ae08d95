import { Module } from '@nestjs/common';
import { AppendEventsHandler } from './append-events/append-events.handler';
import { CheckGuardHandler } from './check-guard/check-guard.handler';
import { GuardReader } from './check-guard/guard-reader';
import { ScopeUsageReportHandler } from './check-guard/scope-usage-report.handler';
import { GuardTuning } from './check-guard/batching/guard-tuning';
import { BatchCommit } from './check-guard/batching/batch-commit';
import { CheckLoader } from './check-guard/loaded-check';
import { EstimateController } from './estimate/estimate.controller';
import { EstimateStepHandler } from './estimate/estimate-step.handler';
import { StepPricer } from './estimate/step-pricer';
import { GuardController } from './check-guard/http/guard.controller';
import { PoliciesController } from './policies/policies.controller';
import { PoliciesService } from './policies/policies.service';
import { ReservationsService } from './reservations/reservations.service';
import { EventsController } from './append-events/events.controller';
import { StepsController } from './read-steps/steps.controller';
import { StepsReader } from './read-steps/steps-reader';
import { ProjectSettingsReader } from './project-settings/project-settings.reader';
import { PricesController } from './prices/prices.controller';
import { PricesService } from './prices/prices.service';
import { RepriceController } from './reprice/reprice.controller';
import { Repricer } from './reprice/repricer';
import { AdminController } from './projects/admin.controller';
import { AlertsController } from './budget-alerts/alerts.controller';
import { AlertsReader } from './budget-alerts/alerts-reader';
import { BudgetAlerts } from './budget-alerts/budget-alerts';
import { ProjectsService } from './projects/projects.service';

/** The ledger's domain: shared by the API, the worker and the CLI. */
@Module({
  providers: [
    AppendEventsHandler,
    CheckGuardHandler,
    ScopeUsageReportHandler,
    EstimateStepHandler,
    CheckLoader,
    BatchCommit,
    GuardTuning,
    StepPricer,
    ProjectSettingsReader,
    PoliciesService,
    PricesService,
    ProjectsService,
    Repricer,
    ReservationsService,
    BudgetAlerts,
    GuardReader,
    AlertsReader,
    StepsReader,
  ],
  exports: [
    StepPricer,
    ProjectSettingsReader,
    PoliciesService,
    PricesService,
    ProjectsService,
    Repricer,
    ReservationsService,
    GuardReader,
    AlertsReader,
    StepsReader,
  ],
})
export class LedgerModule {}

/** The ledger's HTTP surface, for the API app. */
@Module({
  imports: [LedgerModule],
  controllers: [
    EstimateController,
    EventsController,
    AdminController,
    PricesController,
    RepriceController,
    GuardController,
    PoliciesController,
    StepsController,
    AlertsController,
  ],
})
export class LedgerHttpModule {}
