import { Command } from '@nestjs/cqrs';
import type { GuardCheckRequest, GuardCheckResponse } from '@tollgate/contracts';

/** May this step run within every budget of its scopes? Optionally reserves its estimate. */
export class CheckGuard extends Command<GuardCheckResponse> {
  constructor(
    readonly projectId: string,
    readonly request: GuardCheckRequest,
  ) {
    super();
  }
}
