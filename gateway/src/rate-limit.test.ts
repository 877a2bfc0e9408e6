import { createDatabase, type Database } from '@mcs/kit/db';
import { freshDatabase, type MigratedDatabase } from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateGateway } from './db/migrate.ts';
import {
  createPgTokenStore,
  createRateLimiter,
  createSharedRateLimiter,
  type RateDecision,
  type RateLimiter,
  type TokenStore,
} from './rate-limit.ts';

describe('local rate limiter (the fallback)', () => {
  it('allows a second of the rate, then refuses with Retry-After, then refills', () => {
    const rl = createRateLimiter();
    for (let i = 0; i < 5; i++) expect(rl.take('a', 5, 0).ok).toBe(true);
    const refused = rl.take('a', 5, 0);
    expect(refused).toEqual({ ok: false, retryAfter: 1 });
    expect(rl.take('b', 5, 0).ok).toBe(true); // accounts do not share buckets
    expect(rl.take('a', 5, 199).ok).toBe(false);
    expect(rl.take('a', 5, 250).ok).toBe(true);
  });

  it('gives whole seconds for slow plans and splits the rate across replicas', () => {
    const slow = createRateLimiter();
    expect(slow.take('a', 0.5, 0).ok).toBe(true);
    expect(slow.take('a', 0.5, 0)).toEqual({ ok: false, retryAfter: 2 });
    const shared = createRateLimiter(2);
    let ok = 0;
    for (let i = 0; i < 10; i++) if (shared.take('a', 10, 0).ok) ok++;
    expect(ok).toBe(5);
  });
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const take = async (l: RateLimiter, account: string, rate: number): Promise<RateDecision> =>
  await l.take(account, rate);

describe('shared rate limiter (PostgreSQL)', () => {
  let database: MigratedDatabase;
  /** One pool per "replica", as three gateway processes have. */
  const pools: Database[] = [];

  beforeAll(async () => {
    database = await freshDatabase(migrateGateway, 'rate-limit-test');
    for (let i = 0; i < 3; i++) pools.push(createDatabase(database.url, { name: `gw${i}`, max: 4 }));
  });
  afterAll(async () => {
    for (const p of pools) await p.close();
    await database?.close();
  });

  const replicas = () =>
    pools.map((p) => createSharedRateLimiter({ store: createPgTokenStore(p.pool), replicas: 3 }));

  /**
   * Offers `perTick` requests every 5 ms for `ms` to the replicas `spread` picks; returns how many
   * passed and the time it took.
   */
  async function hammer(
    limiters: RateLimiter[],
    account: string,
    rate: number,
    ms: number,
    spread: (i: number) => number,
  ) {
    let allowed = 0;
    let refused = 0;
    let i = 0;
    const t0 = performance.now();
    while (performance.now() - t0 < ms) {
      const batch: Promise<RateDecision>[] = [];
      for (let k = 0; k < 4; k++) batch.push(take(limiters[spread(i++)]!, account, rate));
      for (const d of await Promise.all(batch)) {
        if (d.ok) allowed++;
        else {
          refused++;
          expect(d.retryAfter).toBeGreaterThanOrEqual(1);
        }
      }
      await sleep(5);
    }
    return { allowed, refused, seconds: (performance.now() - t0) / 1000 };
  }

  it('is exact within 10 % when all traffic lands on one replica of three', async () => {
    const rate = 100;
    const limiters = replicas();
    const { allowed, refused, seconds } = await hammer(limiters, 'acct_one', rate, 3_000, () => 0);
    // A full bucket (one second of the rate) plus the rate for the time hammered.
    const expected = rate + rate * seconds;
    console.info(
      `one replica of three: ${allowed} allowed, ${refused} refused in ${seconds.toFixed(2)} s (expected ≈ ${expected.toFixed(0)})`,
    );
    expect(refused).toBeGreaterThan(0);
    expect(allowed).toBeGreaterThanOrEqual(expected * 0.9);
    expect(allowed).toBeLessThanOrEqual(expected * 1.1);
  });

  it('shares one bucket when traffic is spread unevenly over three replicas', async () => {
    const rate = 60;
    const limiters = replicas();
    // 70 % to replica 0, 20 % to 1, 10 % to 2.
    const pick = (i: number) => (i % 10 < 7 ? 0 : i % 10 < 9 ? 1 : 2);
    const { allowed, seconds } = await hammer(limiters, 'acct_uneven', rate, 3_000, pick);
    const expected = rate + rate * seconds;
    console.info(
      `uneven over three: ${allowed} allowed in ${seconds.toFixed(2)} s (expected ≈ ${expected.toFixed(0)})`,
    );
    // Never more than the account's rate; a little less at most (tokens reserved and unused).
    expect(allowed).toBeLessThanOrEqual(expected * 1.1);
    expect(allowed).toBeGreaterThanOrEqual(expected * 0.85);
  });

  it('answers a concurrent burst from the bucket, not from the first reservation alone', async () => {
    const [l] = replicas();
    const decisions = await Promise.all(Array.from({ length: 30 }, () => take(l!, 'acct_burst', 50)));
    expect(decisions.filter((d) => d.ok)).toHaveLength(30);
  });

  it('keeps accounts apart and honours slow plans with whole-second Retry-After', async () => {
    const [a, b] = replicas();
    expect((await take(a!, 'acct_slow', 0.5)).ok).toBe(true);
    const refused = await take(b!, 'acct_slow', 0.5); // the other replica sees the same bucket
    expect(refused.ok).toBe(false);
    expect(refused.retryAfter).toBeGreaterThanOrEqual(1);
    expect(refused.retryAfter).toBeLessThanOrEqual(2);
    expect((await take(b!, 'acct_other', 0.5)).ok).toBe(true);
  });

  it('costs the store about ten statements a second for an account far over its limit', async () => {
    let statements = 0;
    const store = createPgTokenStore(pools[0]!.pool);
    const counted: TokenStore = {
      reserve: (...args) => {
        statements++;
        return store.reserve(...args);
      },
    };
    const l = createSharedRateLimiter({ store: counted, replicas: 3 });
    const { allowed, refused, seconds } = await hammer([l], 'acct_abuse', 200, 2_000, () => 0);
    console.info(
      `${allowed + refused} requests (${refused} refused) in ${seconds.toFixed(2)} s cost ${statements} statements`,
    );
    expect(refused).toBeGreaterThan(0);
    expect(statements / seconds).toBeLessThan(40);
    expect(statements).toBeLessThan((allowed + refused) / 5);
  });

  it('falls back to rate / replicas per replica when the store does not answer in time', async () => {
    const errors: string[] = [];
    const hanging: TokenStore = { reserve: () => new Promise(() => {}) };
    const l = createSharedRateLimiter({
      store: hanging,
      replicas: 2,
      timeoutMs: 50,
      onStoreError: (e) => errors.push(e.message),
    });
    const t0 = performance.now();
    const first = await take(l, 'acct_down', 10);
    expect(performance.now() - t0).toBeLessThan(500);
    expect(first.ok).toBe(true);
    let ok = 1;
    for (let i = 0; i < 20; i++) if ((await take(l, 'acct_down', 10)).ok) ok++;
    expect(ok).toBe(5); // rate 10 over 2 replicas: a bucket of 5 here
    expect(errors).toHaveLength(1); // and the store is not asked again within the second
  });
});
