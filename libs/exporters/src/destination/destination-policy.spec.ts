import { DestinationPolicy, DestinationRefused, refusedBecause } from './destination-policy';
import { embeddedIpv4, parseIp } from './ip-address';

describe('refusedBecause', () => {
  it.each([
    ['127.0.0.1', 'a loopback address'],
    ['127.255.255.254', 'a loopback address'],
    ['::1', 'a loopback address'],
    ['0:0:0:0:0:0:0:1', 'a loopback address'],
    ['0.0.0.0', 'an unspecified address'],
    ['::', 'an unspecified address'],
    ['10.0.0.1', 'a private address'],
    ['172.31.255.255', 'a private address'],
    ['192.168.0.1', 'a private address'],
    ['fd00:ec2::254', 'a private address'],
    ['fc00::1', 'a private address'],
    ['100.64.0.1', 'a shared (carrier-grade NAT) address'],
    ['100.127.255.255', 'a shared (carrier-grade NAT) address'],
    ['169.254.169.254', 'a link-local address (where cloud metadata services answer)'],
    ['fe80::1%eth0', 'a link-local address (where cloud metadata services answer)'],
    ['fec0::1', 'a site-local address'],
    ['224.0.0.251', 'a multicast address'],
    ['ff02::1', 'a multicast address'],
    ['198.18.0.1', 'a benchmarking address'],
    ['198.19.255.255', 'a benchmarking address'],
    ['255.255.255.255', 'a reserved address'],
    ['::ffff:127.0.0.1', 'a loopback address (in IPv4-mapped form)'],
    ['::ffff:7f00:1', 'a loopback address (in IPv4-mapped form)'],
    ['::ffff:a9fe:a9fe', 'a link-local address (where cloud metadata services answer) (in IPv4-mapped form)'],
    ['::ffff:0:10.0.0.1', 'a private address (in IPv4-translated form)'],
    ['64:ff9b::10.0.0.1', 'a private address (in NAT64 form)'],
    ['64:ff9b::a9fe:a9fe', 'a link-local address (where cloud metadata services answer) (in NAT64 form)'],
    ['64:ff9b:1::1', 'a private address'],
    ['2002:7f00:1::', 'a loopback address (in 6to4 form)'],
    ['2002:c0a8:101::1', 'a private address (in 6to4 form)'],
    ['::7f00:1', 'a reserved address'],
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'a reserved address'],
    ['2001:db8::1', 'a documentation address'],
  ])('%s is %s', (address, why) => {
    expect(refusedBecause(address)).toBe(why);
  });

  it.each([
    '93.184.216.34',
    '8.8.8.8',
    '1.1.1.1',
    '100.128.0.1',
    '172.32.0.1',
    '2606:4700:4700::1111',
    '::ffff:8.8.8.8',
    '64:ff9b::8.8.8.8',
    '2002:808:808::1',
  ])('%s is public', (address) => {
    expect(refusedBecause(address)).toBeNull();
  });

  it('parses IPv6 spellings into their words, and finds the IPv4 address they carry', () => {
    expect(parseIp('[::ffff:127.0.0.1]')).toEqual({
      family: 6,
      text: '0:0:0:0:0:ffff:7f00:1',
      words: [0, 0, 0, 0, 0, 0xffff, 0x7f00, 1],
    });
    expect(parseIp('1::')).toMatchObject({ words: [1, 0, 0, 0, 0, 0, 0, 0] });
    expect(parseIp('::1.2.3.4')).toMatchObject({ words: [0, 0, 0, 0, 0, 0, 0x102, 0x304] });
    expect(parseIp('localhost')).toBeNull();
    expect(parseIp('127.1')).toBeNull();
    expect(
      embeddedIpv4(
        parseIp('2002:a9fe:a9fe::1')!.family === 6 ? (parseIp('2002:a9fe:a9fe::1') as { words: number[] }).words : [],
      ),
    ).toEqual({ address: '169.254.169.254', how: '6to4' });
  });
});

describe('DestinationPolicy', () => {
  const strict = new DestinationPolicy();
  const refusal = (policy: DestinationPolicy, url: string) => {
    try {
      policy.checkUrl(url);
      return null;
    } catch (err) {
      if (err instanceof DestinationRefused) return err.message;
      throw err;
    }
  };

  it('refuses numeric, short and mapped spellings of internal addresses as the URL parser reads them', () => {
    for (const url of [
      'http://2130706433/',
      'http://0x7f000001/',
      'http://0177.0.0.1/',
      'http://127.1/',
      'http://[::ffff:127.0.0.1]/',
      'http://0/',
      'http://[0:0:0:0:0:0:0:1]/',
    ]) {
      expect([url, refusal(strict, url)]).toEqual([
        url,
        expect.stringMatching(/^points at an? (loopback|unspecified) address.*TOLLGATE_EXPORTER_ALLOW_HOSTS/),
      ]);
    }
  });

  it('refuses a user name or a password in the URL, allowed host or not', () => {
    expect(refusal(new DestinationPolicy(['127.0.0.1']), 'http://user:pass@127.0.0.1/')).toMatch(
      /user name or password/,
    );
    expect(refusal(strict, 'https://token@example.com/')).toMatch(/user name or password/);
  });

  it('leaves a host name to be resolved, and refuses it when any address it resolves to is refused', () => {
    expect(strict.checkUrl('https://collector.example.com/v1/traces').ip).toBeNull();
    expect(() => strict.checkResolved('collector.example.com', ['93.184.216.34'])).not.toThrow();
    expect(() => strict.checkResolved('rebind.example.com', ['93.184.216.34', '169.254.169.254'])).toThrow(
      /resolves to a link-local address/,
    );
    expect(() => strict.checkResolved('nowhere.example.com', [])).toThrow(/does not resolve/);
  });

  it('allows what the operator lists: host names by name, addresses and CIDRs by every resolved address', () => {
    const policy = new DestinationPolicy(['127.0.0.1', '10.0.0.0/8', 'Collector.Internal', '[fd00::1]']);
    expect(refusal(policy, 'http://127.0.0.1:4318/')).toBeNull();
    expect(refusal(policy, 'http://[::ffff:127.0.0.1]:4318/')).toBeNull();
    expect(refusal(policy, 'http://10.20.30.40/')).toBeNull();
    expect(refusal(policy, 'http://[fd00::1]/')).toBeNull();
    expect(refusal(policy, 'http://127.0.0.2/')).toMatch(/loopback/);
    expect(refusal(policy, 'http://[fd00::2]/')).toMatch(/private/);
    expect(refusal(policy, 'http://169.254.169.254/')).toMatch(/link-local/);
    expect(() => policy.checkResolved('collector.internal.', ['192.168.1.1'])).not.toThrow();
    expect(() => policy.checkResolved('other.internal', ['10.1.1.1'])).not.toThrow();
    expect(() => policy.checkResolved('other.internal', ['10.1.1.1', '192.168.1.1'])).toThrow(/private/);
  });

  it('refuses a malformed allow-list entry at boot', () => {
    expect(() => new DestinationPolicy(['10.0.0.0/33'])).toThrow(/TOLLGATE_EXPORTER_ALLOW_HOSTS: 10.0.0.0\/33/);
    expect(() => new DestinationPolicy(['http://x'])).toThrow(/TOLLGATE_EXPORTER_ALLOW_HOSTS/);
  });
});
