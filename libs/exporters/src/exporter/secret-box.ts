import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

const VERSION = 'v1';

/** The key is missing or cannot open what was sealed with another key. */
export class SecretKeyError extends Error {}

/**
 * Seals exporter secrets with AES-256-GCM under a key derived from TOLLGATE_SECRET_KEY (a
 * high-entropy string, so one SHA-256 is the derivation). Format: `v1.<iv>.<tag>.<ciphertext>`
 * in base64url. The exporter id is bound as associated data, so a sealed value copied onto
 * another exporter's row does not open.
 */
export class SecretBox {
  private readonly key: Buffer;

  constructor(secretKey: string) {
    this.key = createHash('sha256').update(secretKey, 'utf8').digest();
  }

  seal(value: unknown, boundTo: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(boundTo, 'utf8'));
    const ciphertext = Buffer.concat([cipher.update(JSON.stringify(value), 'utf8'), cipher.final()]);
    return [
      VERSION,
      iv.toString('base64url'),
      cipher.getAuthTag().toString('base64url'),
      ciphertext.toString('base64url'),
    ].join('.');
  }

  open<T>(sealed: string, boundTo: string): T {
    const [version, iv, tag, ciphertext] = sealed.split('.');
    if (version !== VERSION || !iv || !tag || ciphertext === undefined)
      throw new SecretKeyError('Sealed secret has an unknown format');
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64url'));
      decipher.setAAD(Buffer.from(boundTo, 'utf8'));
      decipher.setAuthTag(Buffer.from(tag, 'base64url'));
      const plain = Buffer.concat([decipher.update(Buffer.from(ciphertext, 'base64url')), decipher.final()]);
      return JSON.parse(plain.toString('utf8')) as T;
    } catch {
      throw new SecretKeyError('Exporter secrets do not open with TOLLGATE_SECRET_KEY (was the key changed?)');
    }
  }
}
