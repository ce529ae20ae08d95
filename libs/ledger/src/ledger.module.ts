import { Module } from '@nestjs/common';
import { AppendEventsHandler } from './append-events/append-events.handler';
import { EventsController } from './append-events/events.controller';
import { PriceOverrides } from './prices/price-overrides.repository';
import { PricesController } from './prices/prices.controller';
import { AdminController } from './projects/admin.controller';
import { ProjectsService } from './projects/projects.service';

/** The ledger's domain: shared by the API and the worker. */
@Module({
  providers: [AppendEventsHandler, PriceOverrides, ProjectsService],
  exports: [PriceOverrides, ProjectsService],
})
export class LedgerModule {}

/** The ledger's HTTP surface, for the API app. */
@Module({
  imports: [LedgerModule],
  controllers: [EventsController, AdminController, PricesController],
})
export class LedgerHttpModule {}
