import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

export const KEY_SCOPES = ['ingest', 'guard', 'read', 'admin'] as const;
export type KeyScope = (typeof KEY_SCOPES)[number];

/** A key is `tg_<id>_<secret>`: the id finds the row, the secret is compared by hash. */
const KEY_PATTERN = /^tg_([a-z0-9]{16})_([A-Za-z0-9_-]{43})$/;

export interface IssuedKey {
  id: string;
  /** The whole key; shown once, never stored. */
  key: string;
  secretHash: string;
}

export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

/** Secrets are 256 random bits, so a fast hash is enough: there is nothing to brute-force. */
export function issueKey(): IssuedKey {
  const id = randomBytes(10).toString('hex').slice(0, 16);
  const secret = randomBytes(32).toString('base64url');
  return { id, key: `tg_${id}_${secret}`, secretHash: hashSecret(secret) };
}

export function parseKey(key: string): { id: string; secret: string } | null {
  const m = KEY_PATTERN.exec(key);
  return m ? { id: m[1], secret: m[2] } : null;
}

/** Constant-time comparison of a presented secret with a stored hash. */
export function secretMatches(secret: string, storedHash: string): boolean {
  const a = Buffer.from(hashSecret(secret), 'hex');
  const b = Buffer.from(storedHash, 'hex');
  return a.length === b.length && timingSafeEqual(a, b);
}

/** Constant-time comparison of two tokens of any length (e.g. the admin token). */
export function tokensMatch(presented: string, expected: string): boolean {
  const a = createHash('sha256').update(presented).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}
