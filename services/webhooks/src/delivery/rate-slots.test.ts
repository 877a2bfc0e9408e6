// How start slots are taken from what a replica reserved: spacing, reservations sized by what
// waits, slots lost when unused, a new rate. The reservation here is GCRA in memory, the rule
// reserveStarts runs in PostgreSQL; engine.test.ts shares one max_rate between two engines through
// the real table.
import { createLogger } from '@mcs/kit/log';
import { afterEach, describe, expect, it } from 'vitest';
import { createRateSlots, type RateSlots } from './rate-slots.ts';

const log = createLogger('rate-slots-test', process.env.TEST_LOG ?? 'silent');

function setup(over: { fail?: boolean } = {}) {
  let tat = 0;
  const reservations: Array<{ from: number; ms: number }> = [];
  const pending: Promise<void>[] = [];
  let wakes = 0;
  const slots: RateSlots = createRateSlots({
    reserveStarts: async (_endpointId, from, ms) => {
      reservations.push({ from: from.getTime(), ms });
      if (over.fail) throw new Error('database down');
      tat = Math.max(tat, from.getTime()) + ms;
      return tat;
    },
    log,
    wake: () => {
      wakes++;
    },
    track: (p) => {
      pending.push(p);
    },
  });
  opened.push(slots);
  const settle = () => Promise.all(pending.splice(0));
  return { slots, reservations, settle, wakes: () => wakes };
}

const opened: RateSlots[] = [];
afterEach(() => {
  for (const s of opened.splice(0)) s.stop();
});

describe('rate slots', () => {
  it('reserves first, then hands out one start per 1000 / rate ms', async () => {
    const { slots, reservations, settle, wakes } = setup();
    const now = 1_000_000;
    expect(slots.take('ep', 10, 50, now)).toBe(false); // nothing reserved yet
    expect(slots.take('ep', 10, 50, now)).toBe(false); // one reservation at a time
    expect(reservations).toEqual([{ from: now, ms: 100 }]); // ceil(10 / 10) = 1 slot of 100 ms
    await settle();
    expect(wakes()).toBe(1);
    expect(slots.take('ep', 10, 50, now)).toBe(true);
    expect(slots.take('ep', 10, 50, now)).toBe(false); // used up: reserve the next
    await settle();
    expect(reservations[1]).toEqual({ from: now, ms: 100 });
    expect(slots.take('ep', 10, 50, now)).toBe(false); // [now + 100, now + 200): not yet due
    expect(slots.take('ep', 10, 50, now + 100)).toBe(true);
  });

  it('reserves about 100 ms of slots, never more than what waits', async () => {
    const { slots, reservations, settle } = setup();
    const now = 5_000;
    slots.take('ep', 200, 3, now);
    await settle();
    expect(reservations[0]).toEqual({ from: now, ms: 15 }); // 3 waiting: 3 slots of 5 ms
    for (const t of [now, now + 5, now + 10]) expect(slots.take('ep', 200, 3, t)).toBe(true);
    slots.take('ep', 200, 500, now + 15);
    await settle();
    expect(reservations[1]).toEqual({ from: now + 15, ms: 100 }); // 20 slots of 5 ms
  });

  it('loses a slot that went by unused instead of starting late on it', async () => {
    const { slots, reservations, settle } = setup();
    slots.take('ep', 10, 100, 0);
    await settle(); // reserved [0, 100): one slot, at 0
    // At 80 the slot at 0 is more than half a step gone: lost, and the next is reserved.
    expect(slots.take('ep', 10, 100, 80)).toBe(false);
    await settle();
    expect(reservations[1]).toEqual({ from: 80, ms: 100 }); // [100, 200)
    expect(slots.take('ep', 10, 100, 90)).toBe(false);
    expect(slots.take('ep', 10, 100, 100)).toBe(true);
    // Within half a step a slot is still taken late.
    slots.take('ep', 10, 100, 200);
    await settle();
    expect(slots.take('ep', 10, 100, 240)).toBe(true);
  });

  it('reserves anew when the rate changes, and forgets an endpoint whose max_rate is removed', async () => {
    const { slots, reservations, settle } = setup();
    slots.note('ep', 10);
    expect(slots.rateOf('ep')).toBe(10);
    slots.take('ep', 10, 10, 0);
    await settle();
    expect(slots.take('ep', 20, 1, 0)).toBe(false); // 1 waiting: one slot of 50 ms
    await settle();
    expect(reservations.map((r) => r.ms)).toEqual([100, 50]);
    slots.note('ep', null);
    expect(slots.rateOf('ep')).toBeUndefined();
  });

  it('tries again after a second when a reservation fails', async () => {
    const { slots, reservations, settle, wakes } = setup({ fail: true });
    expect(slots.take('ep', 10, 1, 0)).toBe(false);
    await settle();
    expect(wakes()).toBe(1); // the reservation ended
    await new Promise((r) => setTimeout(r, 1_100));
    expect(wakes()).toBe(2); // and the retry's wake-up came
    expect(slots.take('ep', 10, 1, 1_100)).toBe(false);
    expect(reservations).toHaveLength(2);
  });
});
