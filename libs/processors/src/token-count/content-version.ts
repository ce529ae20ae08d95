import type { MessageShape } from '../mastra-shapes';

/**
 * A cheap fingerprint of everything the count depends on: per part its type, tool state and
 * call id, and the length plus a few sampled characters of each text and payload. Mastra
 * appends parts to the same assistant message across steps and turns a tool call into its
 * result in place, so the id alone would serve stale counts. Object payloads are serialized
 * once per object (memoized by `serialize`), which costs far less than encoding them.
 */
export function contentVersion(message: MessageShape, serialize: (value: unknown) => string): number {
  const f = new Fingerprint();
  f.text(message.role);
  const parts = message.content?.parts;
  if (parts && parts.length > 0) {
    for (const part of parts) {
      f.mark(1).text(part.type);
      if (part.text !== undefined) f.mark(2).sample(part.text);
      if (part.reasoning !== undefined) f.mark(3).sample(part.reasoning);
      if (part.details) for (const d of part.details) f.mark(4).sample(d.text ?? '');
      const invocation = part.toolInvocation;
      if (invocation) {
        f.mark(5)
          .text(invocation.state)
          .mark(6)
          .text(invocation.toolCallId)
          .mark(7)
          .text(invocation.toolName ?? '');
        payloadSample(f.mark(8), invocation.args, serialize);
        payloadSample(f.mark(9), invocation.result, serialize);
      }
      if (part.type === 'file') f.mark(10).text(part.mediaType ?? part.mimeType ?? '');
    }
  } else if (typeof message.content?.content === 'string') {
    f.mark(11).sample(message.content.content);
  }
  const attachments = message.content?.experimental_attachments;
  if (attachments) for (const a of attachments) f.mark(12).text(a.contentType ?? '');
  return f.value();
}

function payloadSample(f: Fingerprint, value: unknown, serialize: (value: unknown) => string): void {
  if (value === undefined) f.mark(13);
  else f.sample(typeof value === 'string' ? value : serialize(value));
}

/**
 * A 53-bit fingerprint (two 32-bit FNV-1a lanes with different primes) of what a count depends
 * on, fed char codes where they lie: no string is built, and comparing two versions compares two
 * numbers. `sample` feeds a text's length plus its first, middle and last characters, which
 * catches appends, rewrites and most edits in O(1).
 */
class Fingerprint {
  private a = 0x811c9dc5 | 0;
  private b = 0x050c5d1f | 0;

  private code(c: number): void {
    this.a = Math.imul(this.a ^ c, 0x01000193);
    this.b = Math.imul(this.b ^ c, 0x2f0d3a85);
  }

  /** Separates fields, so that moving characters from one field to the next changes the value. */
  mark(field: number): this {
    this.code(0x10000 + field);
    return this;
  }

  /** Every character of a (short) string, and its length. */
  text(s: string | undefined): this {
    if (s === undefined) return this.mark(0);
    this.code(0x20000 + s.length);
    for (let i = 0; i < s.length; i++) this.code(s.charCodeAt(i));
    return this;
  }

  /** The length of `s` and up to 24 of its characters: its first, middle and last 8. */
  sample(s: string): this {
    const n = s.length;
    if (n <= 24) return this.text(s);
    this.code(0x20000 + n);
    const mid = n >> 1;
    for (let i = 0; i < 8; i++) this.code(s.charCodeAt(i));
    for (let i = mid - 4; i < mid + 4; i++) this.code(s.charCodeAt(i));
    for (let i = n - 8; i < n; i++) this.code(s.charCodeAt(i));
    return this;
  }

  value(): number {
    return (this.a >>> 0) * 0x200000 + (this.b >>> 11);
  }
}
