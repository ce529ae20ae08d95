import { Body, Controller, Delete, Get, HttpCode, Param, Post, Put, UseGuards } from '@nestjs/common';
import { AuthGuard, CurrentPrincipal, Documented, RequireScope, ZodPipe, type Principal } from '@tollgate/platform';
import { z } from 'zod';
import {
  deadLettersResponse,
  exporterNameSchema,
  exporterResponse,
  exportersResponse,
  putExporterResponse,
  putExporterSchema,
  replayResponse,
  replaySchema,
  retryResponse,
  type PutExporter,
} from '../exporter/exporter-settings';
import { ExportersService } from './exporters.service';

const namePipe = new ZodPipe(exporterNameSchema, 'name');
const batchIdPipe = new ZodPipe(z.string().regex(/^xb_[0-9a-f]{20}$/, 'must be a batch id (xb_…)'), 'batchId');

/** A project's exporters: configuration, state, dead letters and replay. Admin keys only. */
@Controller('v1/exporters')
@UseGuards(AuthGuard)
@RequireScope('admin')
export class ExportersController {
  constructor(private readonly exporters: ExportersService) {}

  @Put(':name')
  @HttpCode(200)
  @Documented({
    summary: 'Create or replace an exporter (webhook or otlp); secrets are stored encrypted and never returned',
    tag: 'exporters',
    auth: 'admin',
    errors: ['conflict', 'not_configured'],
    body: putExporterSchema,
    response: putExporterResponse,
  })
  put(
    @CurrentPrincipal() p: Principal,
    @Param('name', namePipe) name: string,
    @Body(new ZodPipe(putExporterSchema)) body: PutExporter,
  ) {
    return this.exporters.put(p.projectId, name, body);
  }

  @Get()
  @Documented({
    summary: "List the project's exporters with their state, lag and dead letters",
    tag: 'exporters',
    auth: 'admin',
    response: exportersResponse,
  })
  list(@CurrentPrincipal() p: Principal) {
    return this.exporters.list(p.projectId);
  }

  @Get(':name')
  @Documented({
    summary: 'An exporter: settings (without secrets), status and pause reason, checkpoint, lag, dead letters',
    tag: 'exporters',
    auth: 'admin',
    errors: ['not_found'],
    response: exporterResponse,
  })
  get(@CurrentPrincipal() p: Principal, @Param('name', namePipe) name: string) {
    return this.exporters.get(p.projectId, name);
  }

  @Delete(':name')
  @HttpCode(204)
  @Documented({
    summary: 'Delete an exporter, its checkpoint and its dead letters',
    tag: 'exporters',
    auth: 'admin',
    errors: ['not_found'],
  })
  async delete(@CurrentPrincipal() p: Principal, @Param('name', namePipe) name: string) {
    await this.exporters.delete(p.projectId, name);
  }

  @Post(':name/replay')
  @HttpCode(200)
  @Documented({
    summary: 'Re-send history: move the checkpoint back to fromPosition or fromTime (never forward)',
    tag: 'exporters',
    auth: 'admin',
    errors: ['not_found'],
    body: replaySchema,
    response: replayResponse,
  })
  replay(
    @CurrentPrincipal() p: Principal,
    @Param('name', namePipe) name: string,
    @Body(new ZodPipe(replaySchema)) body: z.infer<typeof replaySchema>,
  ) {
    const from =
      body.fromPosition !== undefined ? { position: BigInt(body.fromPosition) } : { time: new Date(body.fromTime!) };
    return this.exporters.replay(p.projectId, name, from);
  }

  @Post(':name/pause')
  @HttpCode(200)
  @Documented({
    summary: 'Pause an exporter (events wait in the log)',
    tag: 'exporters',
    auth: 'admin',
    errors: ['not_found'],
    response: exporterResponse,
  })
  pause(@CurrentPrincipal() p: Principal, @Param('name', namePipe) name: string) {
    return this.exporters.pause(p.projectId, name);
  }

  @Post(':name/resume')
  @HttpCode(200)
  @Documented({
    summary: 'Resume a paused exporter where it stopped',
    tag: 'exporters',
    auth: 'admin',
    errors: ['not_found'],
    response: exporterResponse,
  })
  resume(@CurrentPrincipal() p: Principal, @Param('name', namePipe) name: string) {
    return this.exporters.resume(p.projectId, name);
  }

  @Get(':name/dead-letters')
  @Documented({
    summary: 'Batches that failed for good (and those being retried), with their last error',
    tag: 'exporters',
    auth: 'admin',
    errors: ['not_found'],
    response: deadLettersResponse,
  })
  deadLetters(@CurrentPrincipal() p: Principal, @Param('name', namePipe) name: string) {
    return this.exporters.deadLetters(p.projectId, name);
  }

  @Post(':name/dead-letters/retry')
  @HttpCode(202)
  @Documented({
    summary: 'Send every dead-lettered batch again',
    tag: 'exporters',
    auth: 'admin',
    errors: ['not_found'],
    response: retryResponse,
  })
  retryAll(@CurrentPrincipal() p: Principal, @Param('name', namePipe) name: string) {
    return this.exporters.retryDeadLetters(p.projectId, name);
  }

  @Post(':name/dead-letters/:batchId/retry')
  @HttpCode(202)
  @Documented({
    summary: 'Send one dead-lettered batch again',
    tag: 'exporters',
    auth: 'admin',
    errors: ['not_found'],
    response: retryResponse,
  })
  retryOne(
    @CurrentPrincipal() p: Principal,
    @Param('name', namePipe) name: string,
    @Param('batchId', batchIdPipe) batchId: string,
  ) {
    return this.exporters.retryDeadLetters(p.projectId, name, batchId);
  }
}
