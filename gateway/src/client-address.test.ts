import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { clientAddressOf, parseTrustedProxies } from './client-address.ts';

const request = (peer: string, forwarded?: string | string[]) =>
  ({
    socket: { remoteAddress: peer },
    headers: forwarded === undefined ? {} : { 'x-forwarded-for': forwarded },
  }) as unknown as IncomingMessage;

describe('the client address behind a request', () => {
  it('is the peer, whatever X-Forwarded-For says, without trusted proxies', () => {
    const of = clientAddressOf(undefined);
    expect(of(request('203.0.113.9', '198.51.100.1'))).toBe('203.0.113.9');
    expect(of(request('::ffff:203.0.113.9'))).toBe('203.0.113.9');
  });

  it('reads X-Forwarded-For from a trusted proxy, right to left, up to the first untrusted address', () => {
    const of = clientAddressOf('10.0.0.0/8, 192.168.1.7');
    // The Ingress (10.1.2.3) saw the client 198.51.100.1; what the client wrote before is ignored.
    expect(of(request('10.1.2.3', '1.2.3.4, 198.51.100.1'))).toBe('198.51.100.1');
    // Two trusted proxies in a row, then the client.
    expect(of(request('::ffff:10.1.2.3', ['198.51.100.2, 192.168.1.7', '10.9.9.9']))).toBe('198.51.100.2');
    // A peer that is not a proxy: its header counts for nothing.
    expect(of(request('203.0.113.9', '198.51.100.1'))).toBe('203.0.113.9');
    // Junk in the header: the last address a trusted proxy vouched for.
    expect(of(request('10.1.2.3', 'bogus'))).toBe('10.1.2.3');
    expect(of(request('10.1.2.3'))).toBe('10.1.2.3');
    // Every hop trusted: the leftmost.
    expect(of(request('10.1.2.3', '10.4.4.4'))).toBe('10.4.4.4');
  });

  it('refuses a setting that is not addresses and CIDR blocks', () => {
    expect(() => parseTrustedProxies('10.0.0.0/8,fd00::/8')).not.toThrow();
    for (const bad of ['ingress', '10.0.0.0/33', '10.0.0.0/8/1', '10.0.0.0/x', 'fd00::/129']) {
      expect(() => parseTrustedProxies(bad), bad).toThrow(/not an IP address or CIDR block/);
    }
  });
});
