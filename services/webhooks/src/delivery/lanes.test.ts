// The lanes' rules alone (engine.test.ts checks the isolation they buy against real receivers:
// hanging endpoints, more hanging endpoints than slots, a failing endpoint).
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createLanes } from './lanes.ts';

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

const lanesOf = (over: { concurrency?: number; perEndpoint?: number; slowConcurrency?: number } = {}) =>
  createLanes({
    concurrency: over.concurrency ?? 8,
    perEndpoint: over.perEndpoint ?? 10,
    slowConcurrency: over.slowConcurrency,
    slowAfterMs: 100,
    timeoutMs: 1_000,
  });

describe('delivery lanes', () => {
  it('gives one endpoint at most a quarter of the fast lane, and frees a slot once', () => {
    const lanes = lanesOf({ concurrency: 8 });
    expect(lanes.laneOf('a')).toBe('fast');
    const a1 = lanes.take('a', 'fast', () => {});
    lanes.take('a', 'fast', () => {});
    expect(lanes.hasRoom('a', 'fast')).toBe(false); // 8 / 4 = 2
    expect(lanes.hasRoom('b', 'fast')).toBe(true);
    a1.release();
    a1.release(); // twice: still one slot
    expect(lanes.hasRoom('a', 'fast')).toBe(true);
    lanes.take('a', 'fast', () => {});
    expect(lanes.hasRoom('a', 'fast')).toBe(false);
  });

  it('the share is also bounded by the per-endpoint limit', () => {
    const lanes = lanesOf({ concurrency: 64, perEndpoint: 3 });
    for (let i = 0; i < 3; i++) lanes.take('a', 'fast', () => {});
    expect(lanes.hasRoom('a', 'fast')).toBe(false);
  });

  it('sends a failing endpoint to the slow lane, one attempt at a time, until one succeeds', () => {
    const lanes = lanesOf();
    lanes.failed('a');
    expect(lanes.isFailing('a')).toBe(true);
    expect(lanes.laneOf('a')).toBe('slow');
    const s = lanes.take('a', 'slow', () => {});
    expect(lanes.hasRoom('a', 'slow')).toBe(false);
    s.release();
    expect(lanes.hasRoom('a', 'slow')).toBe(true);
    lanes.succeeded('a');
    expect(lanes.laneOf('a')).toBe('fast');
  });

  it('forgets an endpoint that gets no more attempts (unhealthy, disabled, deleted)', () => {
    const lanes = lanesOf();
    lanes.failed('a');
    lanes.answeredIn('b', 500);
    expect([lanes.laneOf('a'), lanes.laneOf('b')]).toEqual(['slow', 'slow']);
    lanes.forget('a');
    lanes.forget('b');
    expect([lanes.isFailing('a'), lanes.laneOf('a'), lanes.laneOf('b')]).toEqual([false, 'fast', 'fast']);
  });

  it('moves an attempt still in flight after slowAfterMs to the slow lane and frees its fast slot', () => {
    const lanes = lanesOf({ concurrency: 4 });
    let moved = 0;
    const slots = [lanes.take('a', 'fast', () => moved++), lanes.take('b', 'fast', () => moved++)];
    lanes.take('c', 'fast', () => moved++);
    lanes.take('d', 'fast', () => moved++);
    expect(lanes.hasRoom('e', 'fast')).toBe(false); // 4 of 4
    slots[0]!.answered(); // a answered in time: it stays where it is
    vi.advanceTimersByTime(100);
    expect(moved).toBe(3);
    expect(lanes.hasRoom('e', 'fast')).toBe(true);
    expect(lanes.laneOf('b')).toBe('slow');
    expect(lanes.laneOf('a')).toBe('fast');
    // The slow lane holds concurrency / 2 new attempts: three moved ones already fill it.
    expect(lanes.hasRoom('f', 'slow')).toBe(false);
  });

  it('brings an endpoint back to the fast lane when an answer comes within slowAfterMs', () => {
    const lanes = lanesOf();
    lanes.answeredIn('a', 150);
    expect(lanes.laneOf('a')).toBe('slow');
    lanes.answeredIn('a', 20);
    expect(lanes.laneOf('a')).toBe('fast');
  });

  it('keeps an attempt in the fast lane when the slow lane is at its ceiling (twice the cap)', () => {
    const lanes = lanesOf({ concurrency: 2, perEndpoint: 100 });
    let moved = 0;
    for (let i = 0; i < 4; i++) lanes.take(`s${i}`, 'slow', () => {}); // the ceiling: 2 × 2
    lanes.take('a', 'fast', () => moved++);
    vi.advanceTimersByTime(100);
    expect(moved).toBe(0);
    expect(lanes.laneOf('a')).toBe('slow'); // its next attempts start slow all the same
    expect(lanes.full()).toBe(false); // 1 of 2 fast
    lanes.take('b', 'fast', () => {});
    expect(lanes.full()).toBe(true);
  });
});
