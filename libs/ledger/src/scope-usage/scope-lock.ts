import { memoized } from '@tollgate/contracts';
import { createHash } from 'node:crypto';

/** The lock ids of the scopes checked lately (every reserving check takes its scopes' locks). */
const lockIdOf = memoized(50_000, (key: string) => createHash('sha256').update(key).digest().readBigInt64BE(0));

/**
 * The advisory lock of one scope of one project: 64 bits of a SHA-256, the same in every replica.
 * Computed here so that the locks can be taken in the statement that opens the transaction. The
 * guard's reserving commits take it; the budget alerts derive their own lock of a scope from it.
 */
export function scopeLockId(projectId: string, scopeKey: string): bigint {
  return lockIdOf(`${projectId}\u001f${scopeKey}`);
}
