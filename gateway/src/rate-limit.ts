// Per-account rate limits, shared by every gateway replica.
//
// The limit is a token bucket (GCRA) per account holding one second of its plan's rate, kept in
// PostgreSQL (`gateway.rate_limits`, one row per account): every replica draws on the same bucket,
// so an account gets its rate whichever replicas its requests land on. The hot path stays local:
// a replica reserves a small batch of tokens in one statement and hands them out from memory,
// refilling in the background before it runs dry. A refused reservation tells how long until the
// next batch is due, and the replica refuses locally until then, so a client far over its limit
// costs the database about ten statements a second, not one per request.
//
// Reserved tokens that are not used within a second are dropped (the shared bucket already
// counted them): a replica never holds more than a batch, so an account gets at most its rate
// overall, and all of it when all its traffic lands on one replica.
//
// When the shared bucket cannot be reached in time (PostgreSQL down or slow), each replica falls
// back to a bucket of its own holding rate / RATE_LIMIT_REPLICAS, and tries the store again a
// second later.
import type pg from 'pg';

export interface RateDecision {
  ok: boolean;
  /** Whole seconds until a request would pass (Retry-After). */
  retryAfter: number;
}

export interface RateLimiter {
  /** A decision at once when this replica can answer alone, else a promise of one. */
  take(accountId: string, perSecond: number): RateDecision | Promise<RateDecision>;
}

/** The shared bucket of every account. */
export interface TokenStore {
  /**
   * Takes up to `want` tokens of the account's bucket (`perSecond` tokens a second, holding
   * `burstMs` worth). `aheadMs`: how far the bucket's schedule now runs ahead of the store's clock
   * (a new token is free once it is below `burstMs - 1000 / perSecond`).
   */
  reserve(
    accountId: string,
    perSecond: number,
    burstMs: number,
    want: number,
  ): Promise<{ granted: number; aheadMs: number }>;
}

const OK: RateDecision = { ok: true, retryAfter: 0 };

/** One second of the rate, and at least one token. */
function burstOf(perSecond: number): number {
  return Math.max(1000, 1000 / perSecond);
}

/** A token bucket per account in this process only (tests, and the fallback of the shared one). */
export function createRateLimiter(replicas = 1): {
  take(accountId: string, perSecond: number, now?: number): RateDecision;
} {
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
        return OK;
      }
      return { ok: false, retryAfter: Math.max(1, Math.ceil((1 - b.tokens) / rate)) };
    },
  };
}

interface Local {
  /** Tokens reserved from the shared bucket and not handed out yet. */
  tokens: number;
  /** They are dropped after this (performance.now() ms). */
  expiresAt: number;
  /** No reservation before this: the shared bucket has nothing for us yet. */
  deniedUntil: number;
  /** The reservation in flight. */
  pending: Promise<void> | undefined;
  /** Requests waiting for a reservation. */
  waiting: number;
  /** Requests of the current second, and of the previous one (the batch follows local demand). */
  seen: number;
  seenBefore: number;
  second: number;
}

export interface SharedLimiterOptions {
  store: TokenStore;
  /** Replicas a fallback bucket divides the rate by (RATE_LIMIT_REPLICAS). */
  replicas: number;
  /** How long a reservation may take before the fallback answers (ms). */
  timeoutMs?: number;
  /** How long the fallback answers after the store failed (ms). */
  retryStoreAfterMs?: number;
  /** Reservation failures, for the log. */
  onStoreError?: (err: Error) => void;
  now?: () => number;
}

/** Largest share of the rate one reservation takes: ≤ 10 statements a second per busy account. */
const MAX_BATCH_SHARE = 0.1;
const TOKEN_TTL_MS = 1000;

export function createSharedRateLimiter(opts: SharedLimiterOptions): RateLimiter {
  const now = opts.now ?? (() => performance.now());
  const timeoutMs = opts.timeoutMs ?? 250;
  const retryStoreAfterMs = opts.retryStoreAfterMs ?? 1000;
  const fallback = createRateLimiter(opts.replicas);
  const locals = new Map<string, Local>();
  let storeDownUntil = 0;

  function localOf(accountId: string, t: number): Local {
    let l = locals.get(accountId);
    if (!l) {
      if (locals.size > 100_000) locals.clear();
      l = {
        tokens: 0,
        expiresAt: 0,
        deniedUntil: 0,
        pending: undefined,
        waiting: 0,
        seen: 0,
        seenBefore: 0,
        second: Math.floor(t / 1000),
      };
      locals.set(accountId, l);
    }
    const second = Math.floor(t / 1000);
    if (second !== l.second) {
      l.seenBefore = second === l.second + 1 ? l.seen : 0;
      l.seen = 0;
      l.second = second;
    }
    if (l.tokens > 0 && t >= l.expiresAt) l.tokens = 0;
    return l;
  }

  /**
   * Tokens to ask for: about a tenth of a second of this replica's demand, within the batch cap,
   * and at least one per request waiting (up to the bucket's size).
   */
  function batchOf(l: Local, perSecond: number): number {
    const cap = Math.max(1, Math.floor(perSecond * MAX_BATCH_SHARE));
    const demand = Math.max(l.seen, l.seenBefore);
    const batch = Math.min(cap, Math.max(1, Math.ceil(demand * MAX_BATCH_SHARE)));
    return Math.max(batch, Math.min(l.waiting, Math.max(1, Math.floor(perSecond))));
  }

  function withTimeout<T>(p: Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    return Promise.race([
      p,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`rate limit store: no answer in ${timeoutMs} ms`)),
          timeoutMs,
        );
      }),
    ]).finally(() => clearTimeout(timer));
  }

  function refill(accountId: string, l: Local, perSecond: number): Promise<void> {
    if (l.pending) return l.pending;
    const want = batchOf(l, perSecond);
    const burstMs = burstOf(perSecond);
    const interval = 1000 / perSecond;
    const p = withTimeout(opts.store.reserve(accountId, perSecond, burstMs, want))
      .then(
        ({ granted, aheadMs }) => {
          const t = now();
          if (granted > 0) {
            l.tokens += granted;
            l.expiresAt = t + TOKEN_TTL_MS;
          }
          if (granted >= want) l.deniedUntil = 0;
          else {
            // The next full batch is free once the schedule has fallen back far enough.
            const wait = aheadMs + want * interval - burstMs;
            l.deniedUntil = t + Math.max(0, Math.min(wait, burstMs));
          }
        },
        (err: Error) => {
          storeDownUntil = now() + retryStoreAfterMs;
          opts.onStoreError?.(err);
        },
      )
      .finally(() => {
        l.pending = undefined;
      });
    l.pending = p;
    return p;
  }

  function decide(accountId: string, l: Local, perSecond: number, t: number): RateDecision {
    if (l.tokens >= 1) {
      l.tokens -= 1;
      // Top up before running dry, so the next requests do not wait for the store.
      if (l.tokens <= batchOf(l, perSecond) / 2 && t >= l.deniedUntil && t >= storeDownUntil)
        void refill(accountId, l, perSecond);
      return OK;
    }
    if (t < storeDownUntil) return fallback.take(accountId, perSecond);
    return { ok: false, retryAfter: Math.max(1, Math.ceil((l.deniedUntil - t) / 1000)) };
  }

  const settled = (l: Local, t: number) => l.tokens >= 1 || t < l.deniedUntil || t < storeDownUntil;

  /** Waits for reservations until one serves this request or the bucket says no (a few rounds at most). */
  async function reserveAndDecide(accountId: string, l: Local, rate: number): Promise<RateDecision> {
    l.waiting++;
    try {
      for (let round = 0; round < 4; round++) {
        await refill(accountId, l, rate);
        const t = now();
        if (settled(l, t)) return decide(accountId, l, rate, t);
      }
      return decide(accountId, l, rate, now());
    } finally {
      l.waiting--;
    }
  }

  return {
    take(accountId, perSecond) {
      const rate = Math.max(perSecond, 0.001);
      const t = now();
      const l = localOf(accountId, t);
      l.seen++;
      if (settled(l, t)) return decide(accountId, l, rate, t);
      return reserveAndDecide(accountId, l, rate);
    },
  };
}

/**
 * The shared buckets in PostgreSQL: one UNLOGGED row per account (a crash or a fail-over
 * empties the table, which only refills every bucket). One statement per reservation; the
 * store's clock decides, so the replicas' clocks need not agree.
 */
export function createPgTokenStore(pool: pg.Pool): TokenStore {
  return {
    async reserve(accountId, perSecond, burstMs, want) {
      const res = await pool.query<{ granted: number; ahead: number }>({
        name: 'gateway_rate_reserve',
        text: RESERVE_SQL,
        values: [accountId, 1000 / perSecond, want, burstMs],
      });
      const row = res.rows[0]!;
      return { granted: Number(row.granted), aheadMs: Number(row.ahead) };
    },
  };
}

/**
 * GCRA with a batch: `tat` is the theoretical arrival time of the next token (ms since the
 * epoch). Taking k tokens moves it k intervals later; that is allowed while it stays within
 * `burst` of now. $1 account, $2 interval (ms per token), $3 tokens wanted, $4 burst (ms).
 */
export const RESERVE_SQL = `
insert into gateway.rate_limits as r (account_id, tat, granted, at)
select $1, n.t + k.k * $2::float8, k.k, n.t
  from (select extract(epoch from clock_timestamp()) * 1000 as t) n,
       lateral (select least($3::int, floor($4::float8 / $2::float8))::int as k) k
on conflict (account_id) do update set
  at = excluded.at,
  granted = greatest(0, least($3::int, floor((excluded.at + $4::float8 - greatest(r.tat, excluded.at)) / $2::float8)))::int,
  tat = greatest(r.tat, excluded.at)
      + greatest(0, least($3::int, floor((excluded.at + $4::float8 - greatest(r.tat, excluded.at)) / $2::float8))) * $2::float8
returning granted, tat - at as ahead`;
