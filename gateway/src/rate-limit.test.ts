import { describe, expect, it } from 'vitest';
import { createRateLimiter } from './rate-limit.ts';

describe('rate limiter', () => {
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
