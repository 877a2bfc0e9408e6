// Per-account rate limits: a token bucket per account holding one second of its plan's rate.
// Kept in this process: with N gateway replicas behind a balancer, each allows rate/N when
// RATE_LIMIT_REPLICAS=N is set, so the account sees its plan's limit overall.

export interface RateDecision {
  ok: boolean;
  /** Whole seconds until a request would pass (Retry-After). */
  retryAfter: number;
}

export interface RateLimiter {
  take(accountId: string, perSecond: number, now?: number): RateDecision;
}

export function createRateLimiter(replicas = 1): RateLimiter {
  const buckets = new Map<string, { tokens: number; at: number }>();
  return {
    take(accountId, perSecond, now = performance.now()) {
      const rate = Math.max(perSecond / replicas, 0.001); // tokens per second
      const capacity = Math.max(rate, 1);
      let b = buckets.get(accountId);
      if (!b) {
        if (buckets.size > 100_000) buckets.clear();
        b = { tokens: capacity, at: now };
        buckets.set(accountId, b);
      }
      b.tokens = Math.min(capacity, b.tokens + ((now - b.at) / 1000) * rate);
      b.at = now;
      if (b.tokens >= 1) {
        b.tokens -= 1;
        return { ok: true, retryAfter: 0 };
      }
      return { ok: false, retryAfter: Math.max(1, Math.ceil((1 - b.tokens) / rate)) };
    },
  };
}
