// Target safety (docs/design.md "The delivery engine", target safety): a delivery may only reach public addresses unless
// the operator allows private networks. The check runs on the address a connection really
// uses, after DNS, so a name that later resolves elsewhere (rebinding) gains nothing.
import { lookup } from 'node:dns/promises';
import net from 'node:net';

// Two lists: Node matches IPv4 addresses against IPv6 rules in their mapped form, so one list
// holding ::ffff:0:0/96 would refuse every IPv4 address.
const blocked4 = new net.BlockList();
const blocked6 = new net.BlockList();
for (const [addr, prefix] of [
  ['0.0.0.0', 8], // "this" network
  ['10.0.0.0', 8], // private
  ['100.64.0.0', 10], // CGNAT
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local, cloud metadata (169.254.169.254)
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation
  ['192.88.99.0', 24], // 6to4 relay
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation
  ['203.0.113.0', 24], // documentation
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
] as const) {
  blocked4.addSubnet(addr, prefix, 'ipv4');
}
for (const [addr, prefix] of [
  ['::', 128], // unspecified
  ['::1', 128], // loopback
  ['::ffff:0:0', 96], // IPv4-mapped: the v4 address decides, and we refuse rather than guess
  ['::ffff:0:0:0', 96], // IPv4-translated (SIIT), e.g. ::ffff:0:7f00:1: the same
  ['::', 96], // IPv4-compatible (deprecated)
  ['64:ff9b::', 96], // NAT64 to any v4 address
  ['64:ff9b:1::', 48], // local NAT64
  ['100::', 64], // discard
  ['2001::', 32], // Teredo
  ['2001:db8::', 32], // documentation
  ['2002::', 16], // 6to4 (embeds a v4 address)
  ['fc00::', 7], // unique local (incl. fd00:ec2::254 metadata)
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated)
  ['ff00::', 8], // multicast
] as const) {
  blocked6.addSubnet(addr, prefix, 'ipv6');
}

/** True when `ip` is loopback, private, link-local, CGNAT, multicast, documentation, metadata… */
export function isForbiddenAddress(ip: string): boolean {
  const family = net.isIP(ip);
  if (family === 4) return blocked4.check(ip, 'ipv4');
  if (family === 6) return blocked6.check(ip, 'ipv6');
  return true; // not an address at all
}

/** The URL's host without IPv6 brackets. */
export function hostOf(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
}

export class ForbiddenTargetError extends Error {
  override name = 'ForbiddenTargetError';
}

/** The name did not resolve within the time allowed (a resolver that does not answer, e.g. offline). */
export class LookupTimeoutError extends Error {
  override name = 'LookupTimeoutError';
}

export type LookupAll = (host: string) => Promise<Array<{ address: string; family: number }>>;

const systemLookup: LookupAll = (host) => lookup(host, { all: true, verbatim: true });

/** `lookup(host)`, abandoned with LookupTimeoutError after `timeoutMs` (the system resolver cannot be cancelled). */
export function lookupWithin(
  host: string,
  timeoutMs: number,
  lookupAll: LookupAll = systemLookup,
): Promise<Array<{ address: string; family: number }>> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new LookupTimeoutError(`${host} did not resolve within ${timeoutMs} ms`)),
      timeoutMs,
    );
  });
  return Promise.race([lookupAll(host), timeout]).finally(() => clearTimeout(timer));
}

/**
 * Resolves `host` and returns an address a connection may use, or throws ForbiddenTargetError.
 * Every address the name resolves to must be allowed: a mixed answer is refused.
 */
export async function resolveAllowed(
  host: string,
  allowPrivate: boolean,
  opts: { timeoutMs?: number; lookup?: LookupAll } = {},
): Promise<{ address: string; family: number }> {
  return (await resolveAllAllowed(host, allowPrivate, opts))[0]!;
}

/**
 * Every address of `host`, in the resolver's order, when all of them are allowed (else
 * ForbiddenTargetError): a connection may try each in turn, as clients do when one is down.
 */
export async function resolveAllAllowed(
  host: string,
  allowPrivate: boolean,
  opts: { timeoutMs?: number; lookup?: LookupAll } = {},
): Promise<Array<{ address: string; family: number }>> {
  if (net.isIP(host)) {
    if (!allowPrivate && isForbiddenAddress(host)) {
      throw new ForbiddenTargetError(`${host} is not a public address`);
    }
    return [{ address: host, family: net.isIP(host) }];
  }
  const all =
    opts.timeoutMs === undefined
      ? await (opts.lookup ?? systemLookup)(host)
      : await lookupWithin(host, opts.timeoutMs, opts.lookup);
  if (all.length === 0) throw new Error(`${host} has no addresses`);
  if (!allowPrivate) {
    const bad = all.find((a) => isForbiddenAddress(a.address));
    if (bad)
      throw new ForbiddenTargetError(`${host} resolves to ${bad.address}, which is not a public address`);
  }
  return all;
}

/** Suffixes reserved for this machine or private networks (RFC 6761, 6762, 8375, ICANN 2024). */
const PRIVATE_SUFFIXES = ['localhost', 'localdomain', 'local', 'internal', 'home.arpa', 'lan'];

/**
 * Names that mean this machine or a private network whatever DNS says today: reserved suffixes
 * (`metadata.google.internal`, `printer.local`) and single-label names (`metadata`,
 * `instance-data`), which only resolve through a private search domain.
 */
export function isLocalName(host: string): boolean {
  if (net.isIP(host)) return false;
  const h = host.toLowerCase().replace(/\.$/, '');
  if (!h.includes('.')) return true;
  return PRIVATE_SUFFIXES.some((s) => h === s || h.endsWith(`.${s}`));
}
