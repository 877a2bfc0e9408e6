import { describe, expect, it } from 'vitest';
import { parseRetryAfter } from '../delivery/sender.ts';
import { halfRetriesSpent, remainingSpanMs } from './health.ts';

describe('early warning and Retry-After rules', () => {
  it('counts half the retries as spent from the failure of retry ceil(n / 2)', () => {
    // Five retries: attempts 1–3 leave more than half, the failure of attempt 4 (retry 3) does not.
    expect([1, 2, 3, 4, 5, 6].map((run) => halfRetriesSpent(run, 5))).toEqual([
      false,
      false,
      false,
      true,
      true,
      true,
    ]);
    expect([1, 2, 3].map((run) => halfRetriesSpent(run, 2))).toEqual([false, true, true]);
  });

  it('caps a Retry-After by what the schedule has left from the failing attempt', () => {
    const schedule = [30_000, 300_000, 1_800_000, 7_200_000, 86_400_000];
    expect(remainingSpanMs(1, schedule)).toBe(30_000 + 300_000 + 1_800_000 + 7_200_000 + 86_400_000);
    expect(remainingSpanMs(5, schedule)).toBe(86_400_000);
    expect(remainingSpanMs(6, schedule)).toBe(0);
  });

  it('reads Retry-After as delta-seconds or an HTTP date', () => {
    const now = Date.parse('2026-01-01T00:00:00.000Z');
    expect(parseRetryAfter('120', now)).toBe(120_000);
    expect(parseRetryAfter(' 0 ', now)).toBe(0);
    expect(parseRetryAfter('Thu, 01 Jan 2026 00:00:30 GMT', now)).toBe(30_000);
    expect(parseRetryAfter('Wed, 31 Dec 2025 23:00:00 GMT', now)).toBe(0); // in the past
    expect(parseRetryAfter(['5', '7'], now)).toBe(5_000);
    for (const bad of [undefined, '', 'soon', '-5', '1.5'])
      expect(parseRetryAfter(bad, now), String(bad)).toBeNull();
  });
});
