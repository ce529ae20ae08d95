import { isIP } from 'node:net';

/** An IP address in canonical form, with the IPv4 address an IPv6 one carries, if any. */
export type IpAddress = { family: 4; text: string } | { family: 6; text: string; words: number[] };

/** `[::1]` (a URL's hostname) → `::1`. */
export const unbracket = (host: string) => (host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host);

/**
 * Parses an address as node's own sockets take it (net.isIP decides what is one), so that no
 * spelling reaches a connect without having been classified. Zone ids (`fe80::1%eth0`) are
 * dropped: the zone does not change which range the address is in.
 */
export function parseIp(text: string): IpAddress | null {
  const bare = unbracket(text.trim());
  const family = isIP(bare);
  if (family === 4) return { family: 4, text: bare.split('.').map(Number).join('.') };
  if (family !== 6) return null;
  const words = ipv6Words(bare.replace(/%.*$/, ''));
  return words ? { family: 6, text: words.map((w) => w.toString(16)).join(':'), words } : null;
}

/** The eight 16-bit words of an IPv6 address (with `::` expanded and a dotted IPv4 tail folded in). */
function ipv6Words(text: string): number[] | null {
  let tail: number[] = [];
  let head = text;
  const dotted = /(?:^|:)(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const v4 = dotted[1].split('.').map(Number);
    tail = [(v4[0] << 8) | v4[1], (v4[2] << 8) | v4[3]];
    head = text.slice(0, text.length - dotted[1].length);
    // `::1.2.3.4` leaves `::`; `::ffff:1.2.3.4` leaves `::ffff:`.
    if (head.endsWith(':') && !head.endsWith('::')) head = head.slice(0, -1);
  }
  const halves = head.split('::');
  if (halves.length > 2) return null;
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((h) => parseInt(h, 16)));
  const left = parse(halves[0]);
  const right = halves.length === 2 ? parse(halves[1]) : [];
  const given = left.length + right.length + tail.length;
  if (halves.length === 1 && given !== 8) return null;
  if (given > 8 || [...left, ...right].some((w) => !Number.isInteger(w) || w < 0 || w > 0xffff)) return null;
  return [...left, ...new Array(8 - given).fill(0), ...right, ...tail];
}

const v4Of = (hi: number, lo: number) => [hi >> 8, hi & 0xff, lo >> 8, lo & 0xff].join('.');

/**
 * The IPv4 address an IPv6 address stands for, when a packet to it ends up at that IPv4 address:
 * IPv4-mapped (::ffff:a.b.c.d), IPv4-translated (::ffff:0:a.b.c.d), NAT64 (64:ff9b::a.b.c.d) and
 * 6to4 (2002:aabb:ccdd::). Each is checked as that IPv4 address.
 */
export function embeddedIpv4(words: number[]): { address: string; how: string } | null {
  const zeros = (from: number, to: number) => words.slice(from, to).every((w) => w === 0);
  if (zeros(0, 5) && words[5] === 0xffff) return { address: v4Of(words[6], words[7]), how: 'IPv4-mapped' };
  if (zeros(0, 4) && words[4] === 0xffff && words[5] === 0)
    return { address: v4Of(words[6], words[7]), how: 'IPv4-translated' };
  if (words[0] === 0x64 && words[1] === 0xff9b && zeros(2, 6))
    return { address: v4Of(words[6], words[7]), how: 'NAT64' };
  if (words[0] === 0x2002) return { address: v4Of(words[1], words[2]), how: '6to4' };
  return null;
}
