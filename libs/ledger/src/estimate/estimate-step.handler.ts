import { QueryHandler, type IQueryHandler } from '@nestjs/cqrs';
import type { EstimateResponse } from '@tollgate/contracts';
import { AppError, Clock } from '@tollgate/platform';
import { estimateView } from '../budgets/guard-decision';
import { catalogTier, CATALOG_PRICE_PREFIX } from '../pricing/price-step';
import { ProjectSettingsReader } from '../project-settings/project-settings.reader';
import { countMessageTokens } from './count-tokens';
import { EstimateStep } from './estimate-step.query';
import { StepPricer } from './step-pricer';

/**
 * The step's input tokens (as given, or counted from its messages with o200k), priced by the
 * StepPricer the guard reserves with, and the catalog's tier when the catalog priced it.
 */
@QueryHandler(EstimateStep)
export class EstimateStepHandler implements IQueryHandler<EstimateStep, EstimateResponse> {
  constructor(
    private readonly pricer: StepPricer,
    private readonly projectSettings: ProjectSettingsReader,
    private readonly clock: Clock,
  ) {}

  async execute({ projectId, request: body }: EstimateStep): Promise<EstimateResponse> {
    const settings = await this.projectSettings.get(projectId);
    if (!settings) throw new AppError('not_found', `No project ${projectId}`);
    const counted = body.messages ? countMessageTokens(body.messages) : body.inputTokens!;
    const priced = await this.pricer.price(
      projectId,
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
