import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { checkCsrf, csrfTokenFor, sameOrigin } from './csrf.ts';
import { openFlash, sealFlash } from './flash.ts';
import { newSessionToken } from './sessions.ts';

const req = (headers: Record<string, string>) => ({ headers, socket: {} }) as unknown as IncomingMessage;

describe('CSRF token', () => {
  it('is fixed for a session, different for another, and reveals nothing of the session token', () => {
    const a = newSessionToken();
    const b = newSessionToken();
    expect(csrfTokenFor(a)).toBe(csrfTokenFor(a));
    expect(csrfTokenFor(a)).not.toBe(csrfTokenFor(b));
    expect(csrfTokenFor(a)).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(csrfTokenFor(a)).not.toContain(a);
  });

  it('accepts only the token of the same session', () => {
    const a = newSessionToken();
    const good = csrfTokenFor(a);
    expect(checkCsrf(a, good)).toBe(true);
    expect(checkCsrf(newSessionToken(), good)).toBe(false);
    // Same length, one character off; shorter; longer; empty; missing; not a string.
    const flipped = (good[0] === 'A' ? 'B' : 'A') + good.slice(1);
    for (const bad of [flipped, good.slice(1), `${good}A`, '', null, undefined, ['x'], 42]) {
      expect(checkCsrf(a, bad), String(bad)).toBe(false);
    }
    // The session token itself is not the CSRF token.
    expect(checkCsrf(a, a)).toBe(false);
  });
});

describe('same-origin check', () => {
  it('accepts same-origin posts and clients that send neither header', () => {
    expect(sameOrigin(req({ host: 'dash.example.com' }))).toBe(true);
    expect(sameOrigin(req({ host: '127.0.0.1:8080', origin: 'http://127.0.0.1:8080' }))).toBe(true);
    expect(
      sameOrigin(
        req({ host: '127.0.0.1:8080', origin: 'http://127.0.0.1:8080', 'sec-fetch-site': 'same-origin' }),
      ),
    ).toBe(true);
    // Behind a TLS-terminating proxy that rewrites Host.
    expect(
      sameOrigin(
        req({
          host: 'gateway:8080',
          'x-forwarded-host': 'dash.example.com',
          origin: 'https://dash.example.com',
        }),
      ),
    ).toBe(true);
  });

  it('refuses cross-site posts', () => {
    expect(sameOrigin(req({ host: 'dash.example.com', origin: 'https://evil.example' }))).toBe(false);
    expect(sameOrigin(req({ host: 'dash.example.com', origin: 'null' }))).toBe(false);
    expect(sameOrigin(req({ host: 'dash.example.com', origin: 'not a url' }))).toBe(false);
    expect(sameOrigin(req({ host: 'dash.example.com', origin: 'https://dash.example.com:444' }))).toBe(false);
    expect(sameOrigin(req({ host: 'dash.example.com', 'sec-fetch-site': 'cross-site' }))).toBe(false);
    expect(sameOrigin(req({ host: 'dash.example.com', 'sec-fetch-site': 'same-site' }))).toBe(false);
  });
});

describe('flash', () => {
  it('opens only with the session that sealed it', () => {
    const a = newSessionToken();
    const flash = { kind: 'ok' as const, text: 'added', secret: { endpoint: 'we_1', value: 'whsec_abc' } };
    const sealed = sealFlash(a, flash);
    expect(sealed).not.toContain('whsec_abc');
    expect(sealed).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(openFlash(a, sealed)).toEqual(flash);
    expect(openFlash(newSessionToken(), sealed)).toBeUndefined();
  });

  it('refuses tampered or malformed values', () => {
    const a = newSessionToken();
    const sealed = Buffer.from(sealFlash(a, { kind: 'error', text: 'no' }), 'base64url');
    sealed[sealed.length - 1]! ^= 1;
    expect(openFlash(a, sealed.toString('base64url'))).toBeUndefined();
    for (const bad of ['', 'abc', '%%%', 'A'.repeat(60)]) expect(openFlash(a, bad)).toBeUndefined();
  });
});
