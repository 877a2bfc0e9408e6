// The address of the client behind a request, for the sign-in throttle per address. Behind a
// reverse proxy or an Ingress every connection comes from the proxy, so the throttle would count
// all clients as one (and 20 bad sign-ins by anyone would lock everyone out): with TRUSTED_PROXIES
// set, a connection from one of those addresses is read through its X-Forwarded-For, right to
// left, up to the first address that is not a trusted proxy. Without it, or from any other peer,
// the header is ignored: a client could write anything there.
import type { IncomingMessage } from 'node:http';
import net from 'node:net';

export type ClientAddress = (req: IncomingMessage) => string;

/** `::ffff:10.0.0.1` (an IPv4 peer of a dual-stack socket) is `10.0.0.1`. */
const plain = (address: string) =>
  address.startsWith('::ffff:') && net.isIPv4(address.slice(7)) ? address.slice(7) : address;

/** Parses TRUSTED_PROXIES (addresses and CIDR blocks, comma separated); throws on a bad entry. */
export function parseTrustedProxies(value: string): net.BlockList {
  const list = new net.BlockList();
  for (const item of value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const [address = '', bits, extra] = item.split('/');
    const family = net.isIP(address);
    const prefix = bits === undefined ? undefined : Number(bits);
    const max = family === 6 ? 128 : 32;
    if (
      family === 0 ||
      extra !== undefined ||
      (prefix !== undefined && (!/^\d+$/.test(bits!) || prefix > max))
    ) {
      throw new Error(`"${item}" is not an IP address or CIDR block`);
    }
    const type = family === 6 ? 'ipv6' : 'ipv4';
    if (prefix === undefined) list.addAddress(address, type);
    else list.addSubnet(address, prefix, type);
  }
  return list;
}

export function clientAddressOf(trustedProxies: string | undefined): ClientAddress {
  const peer = (req: IncomingMessage) => plain(req.socket.remoteAddress ?? 'unknown');
  if (!trustedProxies?.trim()) return peer;
  const list = parseTrustedProxies(trustedProxies);
  const trusted = (address: string) => {
    const family = net.isIP(address);
    return family !== 0 && list.check(address, family === 6 ? 'ipv6' : 'ipv4');
  };
  return (req) => {
    let address = peer(req);
    if (!trusted(address)) return address;
    const header = req.headers['x-forwarded-for'];
    const hops = (Array.isArray(header) ? header.join(',') : (header ?? ''))
      .split(',')
      .map((s) => plain(s.trim()))
      .filter(Boolean);
    for (let i = hops.length - 1; i >= 0; i--) {
      const hop = hops[i]!;
      if (net.isIP(hop) === 0) return address; // not an address: what the last proxy saw stands
      address = hop;
      if (!trusted(hop)) return hop;
    }
    return address;
  };
}
