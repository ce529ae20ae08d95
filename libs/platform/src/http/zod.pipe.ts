import { PipeTransform } from '@nestjs/common';
import { findUnstorableText, problemsOf } from '@tollgate/contracts';
import type { z } from 'zod';
import { AppError } from '../errors/app-error';

/**
 * Validates a body, query or path parameter with the zod schema the OpenAPI document is generated
 * from. Every string and key is first checked for what no route can take as text (NUL, a lone
 * surrogate): here, once, so no schema can forget it and no such string reaches SQL.
 */
export class ZodPipe<S extends z.ZodType> implements PipeTransform<unknown, z.infer<S>> {
  constructor(
    private readonly schema: S,
    private readonly prefix = '',
  ) {}

  transform(value: unknown): z.infer<S> {
    if (value === undefined || value === null) {
      throw new AppError('validation_failed', 'Request body is required (a JSON object)', this.prefix || '(body)');
    }
    const unstorable = findUnstorableText(value, this.prefix);
    if (unstorable) throw AppError.validation(unstorable.field, unstorable.reason);
    const parsed = this.schema.safeParse(value, { reportInput: true });
    if (!parsed.success) {
      const [first] = problemsOf(parsed.error, this.prefix);
      throw AppError.validation(first.field, first.reason);
    }
    return parsed.data;
  }
}
