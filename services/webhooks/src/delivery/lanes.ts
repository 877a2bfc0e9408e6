// Isolation: slow endpoints never hold the slots healthy ones need (engine.ts starts attempts
// through these lanes). The global cap (WEBHOOK_CONCURRENCY) is the fast lane. An attempt starts
// there unless its endpoint's last attempt failed or ran slow; one still in flight after
// `slowAfterMs` (a hanging or dripping receiver) moves to the slow lane and gives its fast slot
// back at once. New attempts of failing or slow endpoints start only while the slow lane holds
// fewer than `slowConcurrency` (half the cap by default), a failing endpoint's one at a time;
// attempts moved there count too, up to twice the cap (past that one stays in the fast lane until
// it ends). One endpoint holds at most a quarter of the fast lane (and WEBHOOK_ENDPOINT_CONCURRENCY).
// So a few endpoints that hang, drip or fail delay a healthy one by at most `slowAfterMs`, and the
// attempts in flight stay bounded (three times the cap).

export type Lane = 'fast' | 'slow';

/**
 * The most attempts the lanes let be in flight at once for an overall cap of `concurrency`: the
 * fast lane, and a slow lane of up to twice that (attempts moved there keep their connections).
 */
export const maxInFlight = (concurrency: number) => 3 * concurrency;

/** One attempt's place in a lane, from its start to its end. */
export interface LaneSlot {
  /** The receiver's answer (or the failure) is in: the attempt no longer moves to the slow lane. */
  answered(): void;
  /** The attempt ended: its slot is free. */
  release(): void;
}

export interface Lanes {
  /** The lane an attempt of `endpointId` starts in now. */
  laneOf(endpointId: string): Lane;
  /** Whether another attempt of `endpointId` may start in `lane` now. */
  hasRoom(endpointId: string, lane: Lane): boolean;
  /** Both lanes are full: no attempt of any endpoint may start. */
  full(): boolean;
  /**
   * Starts an attempt of `endpointId` in `lane`. `moved` is called when it moves to the slow lane
   * (a fast slot came free).
   */
  take(endpointId: string, lane: Lane, moved: () => void): LaneSlot;
  /** An attempt of `endpointId` was answered after `latencyMs`: slow or not, from now on. */
  answeredIn(endpointId: string, latencyMs: number): void;
  /** Whether the endpoint's last attempt failed (one attempt in flight at a time until one succeeds). */
  isFailing(endpointId: string): boolean;
  succeeded(endpointId: string): void;
  failed(endpointId: string): void;
  /**
   * The endpoint gets no more attempts (unhealthy, disabled or deleted): what is kept about it
   * goes, so the sets hold live endpoints only (a deleted one would otherwise stay for good).
   */
  forget(endpointId: string): void;
}

export function createLanes(opts: {
  /** The fast lane's size (WEBHOOK_CONCURRENCY). */
  concurrency: number;
  /** One endpoint's attempts in flight at most (WEBHOOK_ENDPOINT_CONCURRENCY). */
  perEndpoint: number;
  /** Attempts of failing or slow endpoints in flight at most; default concurrency / 2. */
  slowConcurrency?: number | undefined;
  /** An attempt in flight this long moves to the slow lane; default min(1 s, timeoutMs / 2). */
  slowAfterMs?: number | undefined;
  timeoutMs: number;
}): Lanes {
  const active = new Map<string, number>();
  /**
   * Endpoints whose last attempt failed get one attempt in flight at a time until one succeeds:
   * a hanging or failing receiver then holds one slot, not perEndpoint slots, and cannot crowd
   * healthy endpoints out of the global cap (isolation). Bounded by the number of endpoints.
   */
  const failing = new Set<string>();
  /** An endpoint's share of the fast lane. */
  const share = Math.max(1, Math.min(opts.perEndpoint, Math.floor(opts.concurrency / 4)));
  const limitOf = (endpointId: string) => (failing.has(endpointId) ? 1 : share);
  /**
   * Endpoints whose last attempt ran past slowAfterMs (still running, or answered that late):
   * their attempts start in the slow lane until one answers sooner. Bounded by the endpoints.
   */
  const slowEndpoints = new Set<string>();
  const slowCap = Math.max(1, opts.slowConcurrency ?? Math.floor(opts.concurrency / 2));
  const slowAfterMs = opts.slowAfterMs ?? Math.min(1_000, Math.max(1, Math.floor(opts.timeoutMs / 2)));
  /** Attempts in flight in each lane. */
  let fast = 0;
  let slow = 0;

  return {
    laneOf: (endpointId) => (failing.has(endpointId) || slowEndpoints.has(endpointId) ? 'slow' : 'fast'),
    hasRoom: (endpointId, lane) =>
      (lane === 'slow' ? slow < slowCap : fast < opts.concurrency) &&
      (active.get(endpointId) ?? 0) < limitOf(endpointId),
    full: () => fast >= opts.concurrency && slow >= slowCap,
    take(endpointId, start, moved) {
      let lane = start;
      if (lane === 'fast') fast++;
      else slow++;
      // Still in flight after slowAfterMs: the fast slot goes back, the endpoint turns slow.
      const slowTimer =
        lane === 'fast'
          ? setTimeout(() => {
              slowEndpoints.add(endpointId);
              // The slow lane's ceiling (maxInFlight less the fast lane): the attempt keeps its fast slot.
              if (slow >= opts.concurrency * 2) return;
              lane = 'slow';
              fast--;
              slow++;
              moved();
            }, slowAfterMs)
          : undefined;
      active.set(endpointId, (active.get(endpointId) ?? 0) + 1);
      let released = false;
      return {
        answered: () => clearTimeout(slowTimer),
        release() {
          if (released) return;
          released = true;
          clearTimeout(slowTimer);
          if (lane === 'fast') fast--;
          else slow--;
          const n = (active.get(endpointId) ?? 1) - 1;
          if (n === 0) active.delete(endpointId);
          else active.set(endpointId, n);
        },
      };
    },
    answeredIn(endpointId, latencyMs) {
      // An answer within slowAfterMs brings the endpoint back to the fast lane; a later one sends it to the slow lane.
      if (latencyMs < slowAfterMs) slowEndpoints.delete(endpointId);
      else slowEndpoints.add(endpointId);
    },
    isFailing: (endpointId) => failing.has(endpointId),
    succeeded(endpointId) {
      failing.delete(endpointId);
    },
    failed(endpointId) {
      failing.add(endpointId);
    },
    forget(endpointId) {
      failing.delete(endpointId);
      slowEndpoints.delete(endpointId);
    },
  };
}
