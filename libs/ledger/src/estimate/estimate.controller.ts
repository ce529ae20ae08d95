import { Body, Controller, HttpCode, Post, UseGuards } from '@nestjs/common';
import {
  estimateRequestSchema,
  estimateResponseSchema,
  type EstimateRequest,
  type EstimateResponse,
} from '@tollgate/contracts';
import {
  AppError,
  AuthGuard,
  Clock,
  CurrentPrincipal,
  Documented,
  RequireScope,
  ZodPipe,
  type Principal,
} from '@tollgate/platform';
import { estimateView } from '../budgets/guard-decision';
import { ProjectSettingsReader } from '../project-settings/project-settings.reader';
import { catalogTier, CATALOG_PRICE_PREFIX } from '../pricing/price-step';
import { countMessageTokens } from './count-tokens';
import { StepPricer } from './step-pricer';

@Controller('v1/estimate')
@UseGuards(AuthGuard)
export class EstimateController {
  constructor(
    private readonly pricer: StepPricer,
    private readonly projectSettings: ProjectSettingsReader,
    private readonly clock: Clock,
  ) {}

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
  async estimate(
    @CurrentPrincipal() principal: Principal,
    @Body(new ZodPipe(estimateRequestSchema)) body: EstimateRequest,
  ): Promise<EstimateResponse> {
    const settings = await this.projectSettings.get(principal.projectId);
    if (!settings) throw new AppError('not_found', `No project ${principal.projectId}`);
    const counted = body.messages ? countMessageTokens(body.messages) : body.inputTokens!;
    const priced = await this.pricer.price(
      principal.projectId,
      { provider: body.provider, model: body.model, inputTokens: counted, maxOutputTokens: body.maxOutputTokens },
      settings,
      this.clock.now(),
    );
    const fromCatalog = priced.priced && priced.priceId?.startsWith(CATALOG_PRICE_PREFIX);
    const tier = fromCatalog
      ? catalogTier(
          { inputTokens: priced.inputTokens, outputTokens: priced.outputTokens },
          body.provider,
          body.model,
          this.clock.now(),
        )
      : null;
    return {
      provider: body.provider,
      model: body.model,
      countedInputTokens: counted,
      counted: body.messages ? 'o200k' : 'given',
      ...estimateView(priced),
      tier,
    };
  }
}
