import { Query } from '@nestjs/cqrs';
import type { EstimateRequest, EstimateResponse } from '@tollgate/contracts';

/** What a step would cost before it runs, priced as the guard would reserve it. */
export class EstimateStep extends Query<EstimateResponse> {
  constructor(
    readonly projectId: string,
    readonly request: EstimateRequest,
  ) {
    super();
  }
}
