// The linger's rules alone, on fake timers (relay.test.ts checks them end to end through
// JetStream with real time: a burst, then a trickle held and sent together).
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createLinger, LINGER_ABOVE_PER_SEC, LINGER_BATCH_EVENTS } from './linger.ts';

beforeEach(() => {
  vi.useFakeTimers({ now: 1_000_000 });
});
afterEach(() => {
  vi.useRealTimers();
});

/** A linger on the fake clock whose flushes are recorded with the time they happened. */
function lingerOf(lingerMs: number, lingerMaxMs: number) {
  const flushes: { at: number; items: number[] }[] = [];
  const linger = createLinger<number>({
    lingerMs,
    lingerMaxMs,
    flush: (items) => flushes.push({ at: Date.now(), items }),
    now: () => Date.now(),
  });
  return { linger, flushes };
}

const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);
/** Enough items in one turn to reach the lingering rate (a tenth of a second's worth). */
const BURST = LINGER_ABOVE_PER_SEC / 10;

describe('relay linger', () => {
  it('below the rate flushes what one turn added at the end of that turn, together', async () => {
    const { linger, flushes } = lingerOf(10, 25);
    linger.add([1]);
    linger.add([2, 3]);
    expect(flushes).toEqual([]);
    await vi.advanceTimersByTimeAsync(0);
    expect(flushes).toEqual([{ at: 1_000_000, items: [1, 2, 3] }]);
    // Another turn, 50 ms later: again at once (3 items in 100 ms is far below the rate).
    await vi.advanceTimersByTimeAsync(50);
    linger.add([4]);
    await vi.advanceTimersByTimeAsync(0);
    expect(flushes.at(-1)).toEqual({ at: 1_000_050, items: [4] });
  });

  it('from the rate, what follows a flush waits until lingerMs after it', async () => {
    const { linger, flushes } = lingerOf(10, 10);
    linger.add(range(0, BURST)); // the first flush of a burst is at once: nothing came before
    await vi.advanceTimersByTimeAsync(0);
    expect(flushes).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(3);
    linger.add([100]);
    await vi.advanceTimersByTimeAsync(1);
    linger.add([101]);
    await vi.advanceTimersByTimeAsync(5);
    expect(flushes).toHaveLength(1); // 9 ms after the first flush
    await vi.advanceTimersByTimeAsync(1);
    expect(flushes).toHaveLength(2);
    expect(flushes[1]).toEqual({ at: 1_000_010, items: [100, 101] });
  });

  it('under load, fewer than a batch wait up to lingerMaxMs; a full batch goes at lingerMs', async () => {
    const { linger, flushes } = lingerOf(10, 25);
    linger.add(range(0, BURST));
    await vi.advanceTimersByTimeAsync(0);
    linger.add(range(100, LINGER_BATCH_EVENTS - 1));
    await vi.advanceTimersByTimeAsync(24);
    expect(flushes).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(flushes[1]).toEqual({ at: 1_000_025, items: range(100, LINGER_BATCH_EVENTS - 1) });

    // The next: it fills 4 ms after that flush, and goes at lingerMs, not lingerMaxMs.
    linger.add([200]);
    await vi.advanceTimersByTimeAsync(4);
    linger.add(range(201, LINGER_BATCH_EVENTS - 1));
    await vi.advanceTimersByTimeAsync(5);
    expect(flushes).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(1);
    expect(flushes[2]).toEqual({ at: 1_000_035, items: [200, ...range(201, LINGER_BATCH_EVENTS - 1)] });
  });

  it('a batch filled after lingerMs already passed goes at the end of that turn', async () => {
    const { linger, flushes } = lingerOf(10, 25);
    linger.add(range(0, BURST));
    await vi.advanceTimersByTimeAsync(0);
    linger.add([100]);
    await vi.advanceTimersByTimeAsync(15); // waiting for a batch, past lingerMs
    linger.add(range(101, LINGER_BATCH_EVENTS));
    await vi.advanceTimersByTimeAsync(0);
    expect(flushes[1]).toEqual({ at: 1_000_015, items: [100, ...range(101, LINGER_BATCH_EVENTS)] });
  });

  it('after two quiet windows the rate is forgotten and items go at once again', async () => {
    const { linger, flushes } = lingerOf(10, 25);
    linger.add(range(0, BURST));
    await vi.advanceTimersByTimeAsync(0);
    await vi.advanceTimersByTimeAsync(200);
    linger.add([100]);
    await vi.advanceTimersByTimeAsync(0);
    expect(flushes[1]).toEqual({ at: 1_000_200, items: [100] });
  });

  it('the previous window’s rate still counts in the next one', async () => {
    const { linger, flushes } = lingerOf(10, 10);
    linger.add(range(0, BURST));
    await vi.advanceTimersByTimeAsync(0);
    await vi.advanceTimersByTimeAsync(120); // a new window, the burst's still the previous one
    linger.add([100]);
    await vi.advanceTimersByTimeAsync(0);
    // The last flush was 120 ms ago, longer than lingerMs: it goes at once all the same.
    expect(flushes[1]).toEqual({ at: 1_000_120, items: [100] });
    linger.add([101]);
    await vi.advanceTimersByTimeAsync(9);
    expect(flushes).toHaveLength(2); // still lingering: 10 ms after the flush of [100]
    await vi.advanceTimersByTimeAsync(1);
    expect(flushes[2]).toEqual({ at: 1_000_130, items: [101] });
  });

  it('lingerMs 0 never lingers, whatever the rate', async () => {
    const { linger, flushes } = lingerOf(0, 25);
    for (let turn = 0; turn < 5; turn++) {
      linger.add(range(turn * 100, BURST * 4));
      await vi.advanceTimersByTimeAsync(0);
      expect(flushes).toHaveLength(turn + 1);
      expect(flushes[turn]!.at).toBe(1_000_000 + turn);
      await vi.advanceTimersByTimeAsync(1);
    }
  });

  it('take() hands over what waits and cancels its flush', async () => {
    const { linger, flushes } = lingerOf(10, 25);
    linger.add([1, 2]);
    expect(linger.take()).toEqual([1, 2]);
    await vi.advanceTimersByTimeAsync(100);
    expect(flushes).toEqual([]);
    // Under load, with a timer pending.
    linger.add(range(0, BURST));
    await vi.advanceTimersByTimeAsync(0);
    linger.add([7]);
    expect(linger.take()).toEqual([7]);
    // The rate and the last flush stay: what comes next still waits for its batch.
    linger.add([8]);
    await vi.advanceTimersByTimeAsync(24);
    expect(flushes).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(flushes[1]).toEqual({ at: 1_000_125, items: [8] });
  });
});
