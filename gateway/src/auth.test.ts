// The gateway's key cache: one call to accounts for requests that miss together, renewal ahead
// of expiry, and a key still checked with accounts at least once per TTL. The accounts service
// is a scripted Connect client here, on a clock the test moves (its real behaviour is covered end
// to end, e.g. test/e2e/supervisor.test.ts and the gateway suite).
import { create } from '@bufbuild/protobuf';
import { type Client, Code, ConnectError } from '@connectrpc/connect';
import { accounts } from '@mcs/proto';
import { apiErrorOf } from '@mcs/testkit';
import { describe, expect, it } from 'vitest';
import { createAuthenticator, UNKNOWN_KEYS_BURST, UNKNOWN_KEYS_PER_S } from './auth.ts';

const HEADER = `Bearer sk_test_${'a'.repeat(24)}`;
const TTL = 1_000;

/**
 * Answers authenticateKey as `state.answer` says, counting the calls; while `state.held`, a call
 * waits until release() (so a test can tell an answer from the cache from one after a call).
 */
function scriptedAccounts() {
  let release = () => {};
  const state = {
    calls: 0,
    answer: 'ok' as 'ok' | 'revoked' | 'down',
    held: false,
    release: () => release(),
  };
  const client = {
    async authenticateKey() {
      state.calls++;
      if (state.held) await new Promise<void>((r) => (release = r));
      else await Promise.resolve();
      if (state.answer === 'revoked') throw new ConnectError('no such key', Code.Unauthenticated);
      if (state.answer === 'down') throw new ConnectError('accounts unavailable', Code.Unavailable);
      return create(accounts.AuthenticateKeyResponseSchema, {
        accountId: 'acct_1',
        livemode: false,
        kind: accounts.KeyKind.SECRET,
        rateLimit: 100,
        keyId: 'key_1',
      });
    },
  } as unknown as Client<typeof accounts.AccountService>;
  return { client, state };
}

/** Lets every settled promise's callbacks run (the background renewal's included). */
const settle = () => new Promise((r) => setImmediate(r));

function setUp() {
  const { client, state } = scriptedAccounts();
  const clock = { now: 1_000_000 };
  const auth = createAuthenticator(client, TTL, () => clock.now);
  return { auth, state, clock };
}

describe('createAuthenticator', () => {
  it('sends one call to accounts for requests that miss the cache together, then answers from it', async () => {
    const { auth, state } = setUp();
    const principals = await Promise.all(Array.from({ length: 20 }, () => auth.authenticate(HEADER)));
    expect(state.calls).toBe(1);
    for (const p of principals)
      expect(p).toMatchObject({ accountId: 'acct_1', secret: true, keyId: 'key_1' });
    await auth.authenticate(HEADER);
    expect(state.calls).toBe(1);
  });

  it('renews an entry in the last fifth of its TTL while answering from it, with one call', async () => {
    const { auth, state, clock } = setUp();
    await auth.authenticate(HEADER);
    clock.now += TTL * 0.7;
    await auth.authenticate(HEADER);
    expect(state.calls).toBe(1); // not yet
    clock.now += TTL * 0.15; // in the last fifth
    state.held = true;
    // Answered while the renewal is still waiting on accounts: from the cache.
    const principals = await Promise.all(Array.from({ length: 10 }, () => auth.authenticate(HEADER)));
    expect(principals).toHaveLength(10);
    expect(state.calls).toBe(2); // one renewal for the ten
    state.held = false;
    state.release();
    await settle();
    clock.now += TTL * 0.5; // past the first entry's TTL, within the renewed one's
    await auth.authenticate(HEADER);
    expect(state.calls).toBe(2);
  });

  it('an expired entry waits for accounts: one call for all, and its error reaches every request', async () => {
    const { auth, state, clock } = setUp();
    await auth.authenticate(HEADER);
    state.answer = 'down';
    clock.now += TTL;
    const results = await Promise.allSettled(Array.from({ length: 5 }, () => auth.authenticate(HEADER)));
    expect(state.calls).toBe(2);
    for (const r of results) expect(r.status).toBe('rejected');
  });

  it('a renewal that fails leaves the entry until its TTL ends; one that finds the key revoked drops it', async () => {
    const { auth, state, clock } = setUp();
    await auth.authenticate(HEADER);
    state.answer = 'down';
    clock.now += TTL * 0.9;
    await expect(auth.authenticate(HEADER)).resolves.toMatchObject({ keyId: 'key_1' }); // its renewal fails
    await settle();
    await expect(auth.authenticate(HEADER)).resolves.toMatchObject({ keyId: 'key_1' });
    clock.now += TTL * 0.1; // the TTL is over: accounts must answer now
    await expect(auth.authenticate(HEADER)).rejects.toThrow(/unavailable/);

    state.answer = 'ok';
    await auth.authenticate(HEADER);
    state.answer = 'revoked';
    clock.now += TTL * 0.9;
    await expect(auth.authenticate(HEADER)).resolves.toMatchObject({ keyId: 'key_1' }); // its renewal finds it revoked
    await settle();
    expect((await apiErrorOf(auth.authenticate(HEADER))).code).toBe('api_key_invalid');
  });

  it('does not cache a verification that was under way when the key was revoked', async () => {
    const { auth, state } = setUp();
    state.held = true;
    const first = auth.authenticate(HEADER);
    await settle();
    auth.forget('key_1');
    state.held = false;
    state.release();
    await first;
    state.answer = 'revoked';
    expect((await apiErrorOf(auth.authenticate(HEADER))).code).toBe('api_key_invalid');
    expect(state.calls).toBe(2);
  });

  it('refuses, per address, keys not in the cache once too many unknown ones came from it', async () => {
    const { auth, state, clock } = setUp();
    state.answer = 'revoked';
    const key = (i: number) => `Bearer sk_test_${String(i).padStart(24, 'x')}`;
    for (let i = 0; i < UNKNOWN_KEYS_BURST; i++) {
      expect((await apiErrorOf(auth.authenticate(key(i), '203.0.113.7'))).code).toBe('api_key_invalid');
    }
    expect(state.calls).toBe(UNKNOWN_KEYS_BURST);
    // The bucket is empty: refused without a call, and told when to come back.
    const refused = await auth.authenticate(key(999), '203.0.113.7').catch((e: ConnectError) => e);
    expect((await apiErrorOf(Promise.reject(refused))).code).toBe('rate_limited');
    expect((refused as ConnectError).metadata.get('retry-after')).toBe('1');
    expect(state.calls).toBe(UNKNOWN_KEYS_BURST);
    // A valid key not in the cache is refused too from there; from another address it is checked.
    state.answer = 'ok';
    expect((await apiErrorOf(auth.authenticate(HEADER, '203.0.113.7'))).code).toBe('rate_limited');
    expect((await auth.authenticate(HEADER, '198.51.100.1')).accountId).toBe('acct_1');
    // Once cached, it passes from the throttled address as well.
    expect((await auth.authenticate(HEADER, '203.0.113.7')).accountId).toBe('acct_1');
    // A second later, UNKNOWN_KEYS_PER_S more are checked.
    clock.now += 1_000;
    state.answer = 'revoked';
    const calls = state.calls;
    for (let i = 0; i < UNKNOWN_KEYS_PER_S; i++)
      await auth.authenticate(key(2000 + i), '203.0.113.7').catch(() => {});
    expect(state.calls).toBe(calls + UNKNOWN_KEYS_PER_S);
    expect((await apiErrorOf(auth.authenticate(key(3000), '203.0.113.7'))).code).toBe('rate_limited');
  });

  it('never holds back real keys, however many new ones come at once, nor counts accounts being down', async () => {
    const { auth, state } = setUp();
    const key = (i: number) => `Bearer sk_test_${String(i).padStart(24, 'y')}`;
    const all = await Promise.all(
      Array.from({ length: UNKNOWN_KEYS_BURST * 3 }, (_, i) => auth.authenticate(key(i), '192.0.2.1')),
    );
    expect(all.every((p) => p.accountId === 'acct_1')).toBe(true);
    state.answer = 'down';
    for (let i = 0; i < UNKNOWN_KEYS_BURST * 2; i++) {
      await auth.authenticate(key(10_000 + i), '192.0.2.1').catch(() => {});
    }
    state.answer = 'ok';
    expect((await auth.authenticate(key(99_999), '192.0.2.1')).accountId).toBe('acct_1');
  });

  it('lets no burst of unknown keys at once spend more checks than the bucket holds', async () => {
    const { auth, state } = setUp();
    state.answer = 'revoked';
    const key = (i: number) => `Bearer sk_test_${String(i).padStart(24, 'z')}`;
    const codes = await Promise.all(
      Array.from({ length: 200 }, (_, i) => apiErrorOf(auth.authenticate(key(i), '203.0.113.9'))),
    );
    expect(state.calls).toBe(UNKNOWN_KEYS_BURST);
    expect(codes.filter((c) => c.code === 'api_key_invalid')).toHaveLength(UNKNOWN_KEYS_BURST);
    expect(codes.filter((c) => c.code === 'rate_limited')).toHaveLength(200 - UNKNOWN_KEYS_BURST);
  });
});
