import { Injectable } from '@nestjs/common';
import { Config } from '@tollgate/platform';
import { lookup as dnsLookup } from 'node:dns/promises';
import { DestinationPolicy, DestinationRefused } from './destination-policy';

/** Resolves a host name to every address it has (dns.lookup with all: true, by default). */
export type Lookup = (hostname: string) => Promise<{ address: string; family: number }[]>;

const systemLookup: Lookup = (hostname) => dnsLookup(hostname, { all: true, verbatim: true });

/** Where to connect for one request: an address that passed the policy, and the URL it serves. */
export interface CheckedDestination {
  url: URL;
  /** The IP address to connect to (checked), never a name: nothing resolves it again. */
  address: string;
  family: 4 | 6;
}

/** The host name did not resolve (a network failure for the sender, not a refusal). */
export class UnresolvedHost extends Error {}

/**
 * Checks exporter destinations against the operator's policy: when an exporter is saved, and at
 * every delivery for the address actually connected to. A host name is resolved once per
 * delivery, every address it resolves to is checked, and the request goes to the first of them
 * by IP, so a DNS answer that changes between the check and the connect (rebinding) cannot send
 * it elsewhere.
 */
@Injectable()
export class Destinations {
  readonly policy: DestinationPolicy;
  /** Replaced in tests, so that no test resolves a name through the network. */
  lookup: Lookup = systemLookup;

  constructor(config: Config) {
    this.policy = new DestinationPolicy(config.values.TOLLGATE_EXPORTER_ALLOW_HOSTS);
  }

  /** Throws DestinationRefused (with why) or UnresolvedHost; otherwise where to connect. */
  async resolve(raw: string): Promise<CheckedDestination> {
    const { url, ip } = this.policy.checkUrl(raw);
    if (ip) return { url, address: ip.text, family: ip.family };
    let found: { address: string; family: number }[];
    try {
      found = await this.lookup(url.hostname);
    } catch (err) {
      throw new UnresolvedHost(`${url.hostname}: ${(err as { code?: string }).code ?? (err as Error).message}`);
    }
    this.policy.checkResolved(
      url.hostname,
      found.map((a) => a.address),
    );
    const first = found[0];
    return { url, address: first.address, family: first.family === 6 ? 6 : 4 };
  }

  /** For the API: null when the URL may be saved, else why not (for a 400 naming the field). */
  async refusal(raw: string): Promise<string | null> {
    try {
      await this.resolve(raw);
      return null;
    } catch (err) {
      if (err instanceof DestinationRefused) return err.message;
      if (err instanceof UnresolvedHost) return 'has a host name that does not resolve';
      throw err;
    }
  }
}
