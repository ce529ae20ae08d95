import { z } from 'zod';
import { shortText } from '@tollgate/contracts';
import { KEY_SCOPES } from '@tollgate/platform';

export const createProjectSchema = z.strictObject({
  name: shortText(200),
  /** What the guard does with usage whose model has no price: count its tokens only, or deny cost-limited steps. */
  unpricedPolicy: z.enum(['count_tokens', 'deny']).default('count_tokens'),
  id: z.string().regex(/^[a-z0-9][a-z0-9_-]{2,62}$/, 'must be 3-63 lowercase letters, digits, - or _').optional(),
});

export const createKeySchema = z.strictObject({
  scopes: z.array(z.enum(KEY_SCOPES)).min(1, 'must name at least one scope').refine((s) => new Set(s).size === s.length, 'must not repeat a scope'),
  name: shortText(200).optional(),
});

export const projectResponse = z.object({ id: z.string(), name: z.string(), unpricedPolicy: z.string(), createdAt: z.string() });
export const keyResponse = z.object({ id: z.string(), projectId: z.string(), key: z.string().describe('Shown once; only its hash is stored'), scopes: z.array(z.string()), createdAt: z.string() });
