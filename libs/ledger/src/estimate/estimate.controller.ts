import { Body, Controller, HttpCode, Post, UseGuards } from '@nestjs/common';
import { QueryBus } from '@nestjs/cqrs';
import {
  estimateRequestSchema,
  estimateResponseSchema,
  type EstimateRequest,
  type EstimateResponse,
} from '@tollgate/contracts';
import { AuthGuard, CurrentPrincipal, Documented, RequireScope, ZodPipe, type Principal } from '@tollgate/platform';
import { EstimateStep } from './estimate-step.query';

@Controller('v1/estimate')
@UseGuards(AuthGuard)
export class EstimateController {
  constructor(private readonly queries: QueryBus) {}

  @Post()
  @HttpCode(200)
  @RequireScope('guard', 'read')
  @Documented({
    summary: 'What a step would cost before making it, priced as the guard would reserve it',
    tag: 'guard',
    auth: 'guard',
    errors: ['not_found'],
    body: estimateRequestSchema,
    response: estimateResponseSchema,
  })
  estimate(
    @CurrentPrincipal() principal: Principal,
    @Body(new ZodPipe(estimateRequestSchema)) body: EstimateRequest,
  ): Promise<EstimateResponse> {
    return this.queries.execute(new EstimateStep(principal.projectId, body));
  }
}
