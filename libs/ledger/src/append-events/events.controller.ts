import { Body, Controller, HttpCode, Post, UseGuards } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import { ingestRequestSchema, ingestResponseSchema, stepUsageEventSchema } from '@tollgate/contracts';
import { AuthGuard, CurrentPrincipal, Documented, RequireScope, ZodPipe, type Principal } from '@tollgate/platform';
import { z } from 'zod';
import { AppendEvents } from './append-events.command';

const documentedBody = z.object({ events: z.array(stepUsageEventSchema).min(1).max(1000) });

@Controller('v1/events')
@UseGuards(AuthGuard)
export class EventsController {
  constructor(private readonly commands: CommandBus) {}

  @Post()
  @HttpCode(200)
  @RequireScope('ingest')
  @Documented({
    summary: 'Record step events (1..1000 per request, at most 1 MiB); idempotent by eventId',
    tag: 'events',
    auth: 'ingest',
    body: documentedBody,
    response: ingestResponseSchema,
    responseDescription: 'One result per event, in order: accepted, duplicate, or rejected with the field and reason',
  })
  ingest(
    @CurrentPrincipal() principal: Principal,
    @Body(new ZodPipe(ingestRequestSchema)) body: z.infer<typeof ingestRequestSchema>,
  ) {
    return this.commands.execute(new AppendEvents(principal.projectId, body.events));
  }
}
