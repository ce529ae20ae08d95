import type { z } from 'zod';

/** A JSON-path-like name for a zod issue path, e.g. `events[3].usage.inputTokens`. */
export function fieldPath(path: ReadonlyArray<PropertyKey>, prefix = ''): string {
  let out = prefix;
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`;
    else out += out ? `.${String(key)}` : String(key);
  }
  return out || '(body)';
}

export interface FieldProblem {
  field: string;
  reason: string;
}

/** The first problem of a failed parse, named by field, plus the others. */
export function problemsOf(error: z.ZodError, prefix = ''): FieldProblem[] {
  return error.issues.map((issue) => {
    // Unknown keys are reported on the object; name the key itself, which is what the user must fix.
    if (issue.code === 'unrecognized_keys') {
      return { field: fieldPath([...issue.path, issue.keys[0]], prefix), reason: `is not a known field${issue.keys.length > 1 ? ` (nor ${issue.keys.slice(1).join(', ')})` : ''}` };
    }
    if (issue.code === 'invalid_type' && issue.input === undefined) {
      return { field: fieldPath(issue.path, prefix), reason: 'is required' };
    }
    return { field: fieldPath(issue.path, prefix), reason: issue.message };
  });
}
