import { PipeTransform } from '@nestjs/common';
import { problemsOf } from '@tollgate/contracts';
import type { z } from 'zod';
import { AppError } from '../errors/app-error';

/** Validates a body (or query) with the zod schema the OpenAPI document is generated from. */
export class ZodPipe<S extends z.ZodType> implements PipeTransform<unknown, z.infer<S>> {
  constructor(
    private readonly schema: S,
    private readonly prefix = '',
  ) {}

  transform(value: unknown): z.infer<S> {
    if (value === undefined || value === null) {
      throw new AppError('validation_failed', 'Request body is required (a JSON object)', this.prefix || '(body)');
    }
    const parsed = this.schema.safeParse(value, { reportInput: true });
    if (!parsed.success) {
      const [first] = problemsOf(parsed.error, this.prefix);
      throw AppError.validation(first.field, first.reason);
    }
    return parsed.data;
  }
}
