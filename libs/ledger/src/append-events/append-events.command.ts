import { Command } from '@nestjs/cqrs';
import type { IngestResponse } from '@tollgate/contracts';

/** Append a batch of step events (as received, still unvalidated) to a project's log. */
export class AppendEvents extends Command<IngestResponse> {
  constructor(
    readonly projectId: string,
    readonly events: readonly unknown[],
  ) {
    super();
  }
}
