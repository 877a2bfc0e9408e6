import { createHmac, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { serviceSignature, standardSignature } from '../delivery/sign.ts';
import { createSecretBox, newSigningSecret } from './secrets.ts';

describe('secret box', () => {
  it('opens what it sealed, again and again (the cached path), and never a tampered value', () => {
    const box = createSecretBox(randomBytes(32));
    const secret = newSigningSecret();
    const sealed = box.seal(secret);
    expect(Buffer.from(sealed).toString('utf8')).not.toContain(secret.slice(6));
    expect(box.open(sealed)).toBe(secret);
    expect(box.open(sealed)).toBe(secret);
    // A view into a larger buffer opens the same.
    const framed = Buffer.concat([Buffer.from('xx'), sealed, Buffer.from('yy')]);
    expect(box.open(framed.subarray(2, 2 + sealed.length))).toBe(secret);
    const tampered = Buffer.from(sealed);
    tampered[tampered.length - 1]! ^= 1;
    expect(() => box.open(tampered)).toThrow();
    // Another box (another key) cannot open it, cached or not.
    expect(() => createSecretBox(randomBytes(32)).open(sealed)).toThrow();
  });
});

describe('signatures', () => {
  it('match a plain HMAC of the documented inputs, for every secret (cached keys do not mix)', () => {
    for (let i = 0; i < 3; i++) {
      const secret = newSigningSecret();
      const body = `{"n":${i}}`;
      const raw = Buffer.from(secret.slice(6), 'base64');
      for (let twice = 0; twice < 2; twice++) {
        expect(serviceSignature(secret, body)).toBe(createHmac('sha256', secret).update(body).digest('hex'));
        expect(standardSignature(secret, 'msg_1', 1700000000, body)).toBe(
          `v1,${createHmac('sha256', raw).update(`msg_1.1700000000.${body}`).digest('base64')}`,
        );
      }
    }
  });
});
