// max_rate (docs/api.md): start slots for rate-limited endpoints, shared by every replica.
//
// Each replica reserves the next start times of an endpoint in the database (claims.ts
// reserveStarts: GCRA on `endpoints.rate_tat`, the theoretical arrival time), k slots of
// 1000 / rate ms at a time — about 100 ms of them, at most what is waiting — so a reservation
// costs one short statement per k deliveries, and only for endpoints with a max_rate (the others
// never run it). Slots are disjoint across replicas; one a replica leaves unused is lost, never
// given twice: starting late on it could crowd another replica's.
import type { Logger } from '@mcs/kit/log';

/**
 * Moves an endpoint's reserved time forward by `ms` from no earlier than `from`, and answers the
 * end of what it reserved (epoch ms), or undefined when the endpoint is gone (claims.ts
 * reserveStarts).
 */
export type ReserveStarts = (endpointId: string, from: Date, ms: number) => Promise<number | undefined>;

export interface RateSlots {
  /**
   * Takes a start slot for a delivery to `endpointId` under its max_rate `rate`: true when taken
   * (start now). Otherwise the next slot is later, or slots are being reserved, and `wake` is
   * called once one may be free.
   */
  take(endpointId: string, rate: number, waitingCount: number, now: number): boolean;
  /** The endpoint's max_rate as its last start saw it (null: none; its slots are dropped). */
  note(endpointId: string, rate: number | null): void;
  /** The endpoint's max_rate as its last start saw it, if it had one. */
  rateOf(endpointId: string): number | undefined;
  /** Clears the wake-up timers (the reservations under way were given to `track`). */
  stop(): void;
}

export function createRateSlots(opts: {
  reserveStarts: ReserveStarts;
  log: Logger;
  /** Called when a slot may be free: a reservation ended, or a reserved slot came due. */
  wake: () => void;
  /** Each reservation under way, so the engine's stop() can wait for it. */
  track: (p: Promise<void>) => void;
}): RateSlots {
  /** Per endpoint, the start times this process reserved: [next, end) every `step` ms. */
  const slots = new Map<string, { next: number; end: number; step: number }>();
  /** Endpoints with a reservation statement under way. */
  const reserving = new Set<string>();
  const rates = new Map<string, number>();
  /** One wake-up timer per endpoint waiting for its slot. */
  const timers = new Map<string, NodeJS.Timeout>();
  let stopped = false;

  function wakeAt(endpointId: string, ms: number): void {
    if (timers.has(endpointId) || stopped) return;
    const t = setTimeout(() => {
      timers.delete(endpointId);
      opts.wake();
    }, ms);
    timers.set(endpointId, t);
  }

  function reserve(endpointId: string, rate: number, waitingCount: number, now: number): void {
    const step = 1000 / rate;
    const k = Math.max(1, Math.min(Math.ceil(rate / 10), waitingCount, 1000));
    reserving.add(endpointId);
    const p = opts
      .reserveStarts(endpointId, new Date(now), k * step)
      .then((reservedEnd) => {
        const end = reservedEnd ?? now + step; // deleted: its claim skips it
        slots.set(endpointId, { next: end - k * step, end, step });
      })
      .catch((err) => {
        opts.log.warn({ err: (err as Error).message, endpoint: endpointId }, 'rate slot reservation failed');
        wakeAt(endpointId, 1_000);
      })
      .finally(() => {
        reserving.delete(endpointId);
        opts.wake();
      });
    opts.track(p);
  }

  return {
    take(endpointId, rate, waitingCount, now) {
      const step = 1000 / rate;
      let s = slots.get(endpointId);
      if (s && s.step !== step) s = undefined; // the rate changed: reserve anew
      // A slot that went by unused is lost.
      if (s && s.next < now - step / 2) s.next += Math.ceil((now - step / 2 - s.next) / step) * step;
      if (!s || s.next >= s.end - 0.001) {
        if (!reserving.has(endpointId)) reserve(endpointId, rate, waitingCount, now);
        return false;
      }
      if (s.next > now) {
        wakeAt(endpointId, Math.ceil(s.next - now));
        return false;
      }
      s.next += step;
      return true;
    },
    note(endpointId, rate) {
      if (rate === null) {
        if (rates.delete(endpointId)) slots.delete(endpointId);
      } else {
        rates.set(endpointId, rate);
      }
    },
    rateOf: (endpointId) => rates.get(endpointId),
    stop() {
      stopped = true;
      for (const t of timers.values()) clearTimeout(t);
      timers.clear();
    },
  };
}
