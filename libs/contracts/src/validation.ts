import { z } from 'zod';

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
      return {
        field: fieldPath([...issue.path, issue.keys[0]], prefix),
        reason: `is not a known field${issue.keys.length > 1 ? ` (nor ${issue.keys.slice(1).join(', ')})` : ''}`,
      };
    }
    if (issue.code === 'invalid_type' && issue.input === undefined) {
      return { field: fieldPath(issue.path, prefix), reason: 'is required' };
    }
    return { field: fieldPath(issue.path, prefix), reason: issue.message };
  });
}

/**
 * Text that PostgreSQL cannot store or that is not Unicode: NUL (text and jsonb refuse it) and a
 * UTF-16 surrogate without its other half (jsonb refuses its escape; encoding it as UTF-8 would
 * quietly turn it into U+FFFD, so a lookup would match something else).
 */
const SUSPECT = /[\u0000\uD800-\uDFFF]/;

/** Why a string cannot be taken as text, or null when it can. */
export function unstorableTextReason(text: string): string | null {
  // Most strings hold neither: one regex test, and a scan (no lookbehind: the SDK runs this too) only when needed.
  if (!SUSPECT.test(text)) return null;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code === 0) return 'must not contain NUL (U+0000)';
    if (code < 0xd800 || code > 0xdfff) continue;
    if (code <= 0xdbff && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      i++;
      continue;
    }
    return `must not contain a lone surrogate (U+${code.toString(16).toUpperCase()})`;
  }
  return null;
}

/**
 * The first string of a request value (a parsed body, query or path parameter), or object key,
 * that cannot be taken as text, named by its path. Depth-first in key order, so the answer is
 * the same for the same request.
 */
export function findUnstorableText(value: unknown, prefix = ''): FieldProblem | null {
  const visit = (v: unknown, path: PropertyKey[]): FieldProblem | null => {
    if (typeof v === 'string') {
      const reason = unstorableTextReason(v);
      return reason ? { field: fieldPath(path, prefix), reason } : null;
    }
    if (v === null || typeof v !== 'object') return null;
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        const found = visit(v[i], [...path, i]);
        if (found) return found;
      }
      return null;
    }
    for (const key of Object.keys(v)) {
      const reason = unstorableTextReason(key);
      if (reason) return { field: fieldPath([...path, key], prefix), reason: `${reason} in its name` };
      const found = visit((v as Record<string, unknown>)[key], [...path, key]);
      if (found) return found;
    }
    return null;
  };
  return visit(value, []);
}

/** No event is older (see EARLIEST_OCCURRED_AT); nothing a request names needs to be. */
export const EARLIEST_INSTANT = Date.UTC(2000, 0, 1);
/**
 * Leaves a day below year 10000, so a range's inclusive end (+1 ms) and its day buckets stay in
 * the four-digit years that Date#toISOString writes and PostgreSQL reads back.
 */
export const LATEST_INSTANT = Date.UTC(9999, 11, 31);

/** Whether an epoch-ms instant is one a request may name. */
export const isAcceptedInstant = (ms: number): boolean =>
  Number.isFinite(ms) && ms >= EARLIEST_INSTANT && ms < LATEST_INSTANT;

/** A timestamp in a request: ISO-8601 with a time zone, between 2000-01-01 and 9999-12-31. */
export const isoInstantSchema = z.iso
  .datetime({ offset: true, message: 'must be an ISO-8601 timestamp with a time zone' })
  .refine((s) => isAcceptedInstant(Date.parse(s)), 'must be between 2000-01-01 and 9999-12-31');
