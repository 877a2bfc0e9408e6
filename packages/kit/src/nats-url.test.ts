import { describe, expect, it } from 'vitest';
import { natsConnectOptions, parseNatsUrl, redact } from './nats-url.ts';

describe('NATS_URL', () => {
  it('takes one server, a host:port alone, and a cluster comma separated', () => {
    expect(parseNatsUrl('nats://127.0.0.1:4222')).toEqual({ servers: ['127.0.0.1:4222'], tls: false });
    expect(parseNatsUrl('nats:4222').servers).toEqual(['nats:4222']);
    expect(parseNatsUrl('nats://nats').servers).toEqual(['nats:4222']);
    expect(parseNatsUrl('nats://[::1]:4223').servers).toEqual(['[::1]:4223']);
    expect(parseNatsUrl(' nats://a:4222, nats://b:4223 ,,nats://c ').servers).toEqual([
      'a:4222',
      'b:4223',
      'c:4222',
    ]);
  });

  it('reads credentials from the URL: user and password (percent-decoded), or a token', () => {
    expect(natsConnectOptions('nats://mcs:p%40ss%3Aw%2Frd@a:4222,nats://b:4222')).toEqual({
      servers: ['a:4222', 'b:4222'],
      user: 'mcs',
      pass: 'p@ss:w/rd',
    });
    expect(natsConnectOptions('nats://s3cr3t@a:4222')).toEqual({ servers: ['a:4222'], token: 's3cr3t' });
    expect(natsConnectOptions('tls://a:4222')).toEqual({ servers: ['a:4222'], tls: {} });
    expect(() => parseNatsUrl('nats://u:p@a:4222,nats://u:q@b:4222')).toThrow(/different credentials/);
  });

  it('refuses what nats.js would quietly misread', () => {
    expect(() => parseNatsUrl('')).toThrow(/no server/);
    expect(() => parseNatsUrl('http://127.0.0.1:4222')).toThrow(/nats:\/\/ or tls:\/\//);
    expect(() => parseNatsUrl('nats://127.0.0.1:4222/js')).toThrow(/only a host and a port/);
    expect(() => parseNatsUrl('nats://127.0.0.1:99999')).toThrow(/not a URL/);
    expect(() => parseNatsUrl('nats://u:secret@127.0.0.1:99999')).toThrow(/^(?!.*secret)/);
  });

  it('keeps credentials out of what it logs', () => {
    expect(redact('nats://mcs:pw@a:4222,nats://tok@b:4222')).toBe('nats://a:4222,nats://b:4222');
    expect(redact('mcs:pw@a:4222, tok@b')).toBe('a:4222, b');
  });
});
