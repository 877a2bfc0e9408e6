// When the outbox relay's fast path (relay.ts) sends what it was handed: at the end of the turn
// below a rate, after a short linger above it, so that under load the events of several
// milliseconds go out together as one JetStream message (docs/design.md "Events and their
// guarantees", 2.).
//
// Every write that committed in the same turn of the event loop goes out in one socket write
// (nats.js flushes what was queued in one tick together), instead of a write per event (15 % of
// commerce's CPU under load). From LINGER_ABOVE_PER_SEC items a second, a flush waits until
// `lingerMs` after the previous one, so what came in those milliseconds goes out together.
// Everything downstream then works in batches too: JetStream stores and hands over one message,
// which the webhooks consumer records in one statement and acks once. At 1,100 orders/s on
// 2 cores a 10 ms linger cut the webhooks process's CPU per order by 40 %, its PostgreSQL
// statements' by 60 % and nats-server's by 65 %, for at most 10 ms more between commit and
// delivery (docs/performance.md). Below that rate nothing waits. Where fewer than
// LINGER_BATCH_EVENTS came in those milliseconds (from 250 to about 1,200 a second), the flush
// waits on for them, up to `lingerMaxMs` after the previous one (Kafka's producer does the same
// with batch.size and linger.ms).

/**
 * The rate from which the relay lingers: 250 events/s, where a 10 ms linger gathers 2.5 events
 * or more per publish, i.e. per JetStream message. (It was 500/s; at 420 orders/s, between the
 * two, 250 cut nats-server's CPU per order from 0.36–0.40 to 0.19–0.21 ms and the webhooks
 * service's from 0.82–0.84 to 0.60–0.67, docs/performance.md.)
 */
export const LINGER_ABOVE_PER_SEC = 250;
/**
 * The events a lingering flush waits for, up to `lingerMaxMs`: what a 10 ms linger gathers at
 * 1,100–1,200 orders/s, where a longer linger bought nothing more. Every message costs the same
 * downstream whatever it holds (nats-server stores, hands over and takes an ack for it; the
 * webhooks service records it in one statement, commits and acks it): at 600 orders/s a 10 ms
 * linger sent 6 events a message, and waiting up to 20 ms for 12 cut the machine's CPU per order
 * by 8–12 % (3.15–3.29 → 2.88–2.91 ms: nats-server 0.16 → 0.09, webhooks 0.35–0.36 →
 * 0.28–0.29), docs/performance.md.
 */
export const LINGER_BATCH_EVENTS = 12;
/** The window over which items are counted to tell the rate. */
const RATE_WINDOW_MS = 100;

export interface LingerOptions<T> {
  /** Under load, the least time between two flushes (0: never linger, flush every turn). */
  lingerMs: number;
  /** Under load, how long after a flush the next may wait for LINGER_BATCH_EVENTS items. */
  lingerMaxMs: number;
  /** Sends what waited, in the order it was added. */
  flush: (items: T[]) => void;
  /** The clock (performance.now by default). */
  now?: () => number;
}

export interface Linger<T> {
  /** Adds items, flushed at the end of this turn or, under load, after the linger. */
  add(items: readonly T[]): void;
  /** Takes what is waiting now, cancelling its flush (for stopping). */
  take(): T[];
}

export function createLinger<T>(opts: LingerOptions<T>): Linger<T> {
  const { lingerMs, flush } = opts;
  const lingerMaxMs = Math.max(lingerMs, opts.lingerMaxMs);
  const now = opts.now ?? (() => performance.now());
  let pending: T[] = [];
  let scheduled = false;
  let timer: NodeJS.Timeout | undefined;
  /** The scheduled flush waits past `lingerMs` for its batch to fill. */
  let waitingForBatch = false;
  let lastFlushAt = Number.NEGATIVE_INFINITY;
  /** Items added in the current and the previous RATE_WINDOW_MS. */
  let windowStart = 0;
  let windowCount = 0;
  let previousCount = 0;

  /** Counts `n` items and tells whether the rate calls for lingering. */
  function underLoad(t: number, n: number): boolean {
    if (t - windowStart >= RATE_WINDOW_MS) {
      previousCount = t - windowStart < 2 * RATE_WINDOW_MS ? windowCount : 0;
      windowStart = t;
      windowCount = 0;
    }
    windowCount += n;
    return Math.max(previousCount, windowCount) * (1000 / RATE_WINDOW_MS) >= LINGER_ABOVE_PER_SEC;
  }

  function take(): T[] {
    if (timer) clearTimeout(timer);
    timer = undefined;
    scheduled = false;
    waitingForBatch = false;
    const items = pending;
    pending = [];
    return items;
  }

  const flushNow = () => {
    // A take() in between emptied it (and cleared a timer, but not a setImmediate).
    if (!scheduled) return;
    lastFlushAt = now();
    flush(take());
  };

  function schedule(wait: number): void {
    if (timer) clearTimeout(timer);
    timer = undefined;
    if (wait > 0) timer = setTimeout(flushNow, wait);
    else setImmediate(flushNow);
  }

  return {
    add(items) {
      for (const item of items) pending.push(item);
      const t = now();
      const loaded = lingerMs > 0 && underLoad(t, items.length);
      const full = pending.length >= LINGER_BATCH_EVENTS;
      if (scheduled) {
        // Its batch is there: it goes once `lingerMs` passed since the previous flush.
        if (waitingForBatch && full) {
          waitingForBatch = false;
          schedule(lastFlushAt + lingerMs - t);
        }
        return;
      }
      scheduled = true;
      waitingForBatch = loaded && !full && lingerMaxMs > lingerMs;
      schedule(loaded ? lastFlushAt + (waitingForBatch ? lingerMaxMs : lingerMs) - t : 0);
    },
    take,
  };
}
