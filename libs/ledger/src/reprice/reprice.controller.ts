import { Body, Controller, HttpCode, Post, UseGuards } from '@nestjs/common';
import { AuthGuard, CurrentPrincipal, Documented, RequireScope, ZodPipe, type Principal } from '@tollgate/platform';
import { Repricer } from './repricer';
import { repriceResponse, repriceSchema, type RepriceBody } from './reprice.schemas';

/** Repricing stored steps after a price correction, append-only. */
@Controller('v1/prices')
@UseGuards(AuthGuard)
export class RepriceController {
  constructor(private readonly repricer: Repricer) {}

  @Post('reprice')
  @HttpCode(200)
  @RequireScope('admin')
  @Documented({
    summary:
      'Recompute the cost of stored steps in a time range with the prices in force at each step, appending a StepRepriced correction per changed step',
    tag: 'prices',
    auth: 'admin',
    errors: ['not_found'],
    body: repriceSchema,
    response: repriceResponse,
  })
  reprice(@CurrentPrincipal() principal: Principal, @Body(new ZodPipe(repriceSchema)) body: RepriceBody) {
    return this.repricer.reprice(principal.projectId, { ...body, from: new Date(body.from), to: new Date(body.to) });
  }
}
