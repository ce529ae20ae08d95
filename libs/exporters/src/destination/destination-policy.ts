import { BlockList } from 'node:net';
import { embeddedIpv4, parseIp, unbracket, type IpAddress } from './ip-address';

/** Ranges an exporter may not send to, each with what the tenant is told. */
const REFUSED: { why: string; v4?: [string, number][]; v6?: [string, number][] }[] = [
  { why: 'an unspecified address', v4: [['0.0.0.0', 8]], v6: [['::', 128]] },
  { why: 'a loopback address', v4: [['127.0.0.0', 8]], v6: [['::1', 128]] },
  {
    why: 'a private address',
    v4: [
      ['10.0.0.0', 8],
      ['172.16.0.0', 12],
      ['192.168.0.0', 16],
    ],
    v6: [
      ['fc00::', 7],
      ['64:ff9b:1::', 48],
    ],
  },
  { why: 'a shared (carrier-grade NAT) address', v4: [['100.64.0.0', 10]] },
  {
    why: 'a link-local address (where cloud metadata services answer)',
    v4: [['169.254.0.0', 16]],
    v6: [['fe80::', 10]],
  },
  { why: 'a site-local address', v6: [['fec0::', 10]] },
  { why: 'a multicast address', v4: [['224.0.0.0', 4]], v6: [['ff00::', 8]] },
  { why: 'a benchmarking address', v4: [['198.18.0.0', 15]] },
  {
    why: 'a documentation address',
    v4: [
      ['192.0.2.0', 24],
      ['198.51.100.0', 24],
      ['203.0.113.0', 24],
    ],
    v6: [['2001:db8::', 32]],
  },
  {
    why: 'a reserved address',
    // 192.0.0.0/24: IETF protocol assignments; 240/4 includes the broadcast address; ::/96: the
    // deprecated IPv4-compatible form; 100::/64: discard-only; 2001::/32: Teredo tunnels, whose
    // far end is wherever the tunnel goes.
    v4: [
      ['192.0.0.0', 24],
      ['192.88.99.0', 24],
      ['240.0.0.0', 4],
    ],
    v6: [
      ['::', 96],
      ['100::', 64],
      ['2001::', 32],
      ['2001:10::', 28],
    ],
  },
];

const refusedLists = REFUSED.map(({ why, v4 = [], v6 = [] }) => {
  const list = new BlockList();
  for (const [net, prefix] of v4) list.addSubnet(net, prefix, 'ipv4');
  for (const [net, prefix] of v6) list.addSubnet(net, prefix, 'ipv6');
  return { why, list };
});

/** Why an address is refused (ignoring any allow list), or null for a public address. */
export function refusedBecause(address: string): string | null {
  const ip = parseIp(address);
  if (!ip) return 'not an IP address';
  if (ip.family === 6) {
    const inner = embeddedIpv4(ip.words);
    if (inner) {
      const why = refusedBecause(inner.address);
      return why ? `${why} (in ${inner.how} form)` : null;
    }
  }
  const type = ip.family === 4 ? 'ipv4' : 'ipv6';
  return refusedLists.find((r) => r.list.check(ip.text, type))?.why ?? null;
}

/** Refused by policy: the tenant is told why (never the address a name resolved to). */
export class DestinationRefused extends Error {}

/**
 * Which destinations exporters may send to: public addresses, plus what the operator allows
 * with TOLLGATE_EXPORTER_ALLOW_HOSTS (host names, matched on the URL's host, and IPs or CIDRs,
 * matched on every address the host resolves to).
 */
export class DestinationPolicy {
  private readonly names = new Set<string>();
  private readonly addresses = new BlockList();

  constructor(allow: readonly string[] = []) {
    for (const raw of allow) {
      const entry = raw.trim().toLowerCase();
      if (!entry) continue;
      const [addr, prefix, extra] = entry.split('/');
      const ip = parseIp(addr);
      if (ip && extra === undefined) {
        const bits = prefix === undefined ? (ip.family === 4 ? 32 : 128) : Number(prefix);
        if (!/^\d+$/.test(prefix ?? '0') || bits > (ip.family === 4 ? 32 : 128))
          throw new Error(`TOLLGATE_EXPORTER_ALLOW_HOSTS: ${raw} has a bad prefix length`);
        this.addresses.addSubnet(ip.text, bits, ip.family === 4 ? 'ipv4' : 'ipv6');
      } else if (prefix === undefined && /^[a-z0-9_]([a-z0-9_.-]*[a-z0-9_])?\.?$/.test(entry)) {
        this.names.add(entry.replace(/\.$/, ''));
      } else {
        throw new Error(`TOLLGATE_EXPORTER_ALLOW_HOSTS: ${raw} is neither a host name, an IP address nor a CIDR`);
      }
    }
  }

  /** The operator allowed this host name (so every address it resolves to). */
  allowsName(hostname: string): boolean {
    return this.names.has(unbracket(hostname).toLowerCase().replace(/\.$/, ''));
  }

  /** Null when `address` may be connected to; else why not. */
  refuseAddress(address: string): string | null {
    const ip = parseIp(address);
    if (!ip) return 'not an IP address';
    if (this.isAllowed(ip)) return null;
    return refusedBecause(ip.text);
  }

  /**
   * What can be decided from the URL alone: a user name or password in it is refused, an IP
   * address host is checked. Returns the URL and whether its host still has to be resolved.
   */
  checkUrl(raw: string): { url: URL; ip: IpAddress | null } {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw new DestinationRefused('is not a valid URL');
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new DestinationRefused('must be an http(s) URL');
    if (url.username || url.password)
      throw new DestinationRefused(
        'must not contain a user name or password (send credentials in headers, which are stored encrypted)',
      );
    const ip = parseIp(url.hostname);
    if (ip && !this.allowsName(url.hostname)) {
      const why = this.refuseAddress(ip.text);
      if (why) throw new DestinationRefused(`points at ${why}, which exporters may not send to${ALLOW_HINT}`);
    }
    return { url, ip };
  }

  /** Every address a host resolved to must pass: one refused address refuses the host. */
  checkResolved(hostname: string, addresses: readonly string[]): void {
    if (addresses.length === 0) throw new DestinationRefused('has a host name that does not resolve');
    if (this.allowsName(hostname)) return;
    for (const a of addresses) {
      const why = this.refuseAddress(a);
      if (why)
        throw new DestinationRefused(
          `has a host name that resolves to ${why}, which exporters may not send to${ALLOW_HINT}`,
        );
    }
  }

  private isAllowed(ip: IpAddress): boolean {
    if (this.addresses.check(ip.text, ip.family === 4 ? 'ipv4' : 'ipv6')) return true;
    const inner = ip.family === 6 ? embeddedIpv4(ip.words) : null;
    return inner !== null && this.addresses.check(inner.address, 'ipv4');
  }
}

const ALLOW_HINT = ' (the operator can allow it with TOLLGATE_EXPORTER_ALLOW_HOSTS)';
