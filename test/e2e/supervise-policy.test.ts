// The restart policy of `pnpm start` (scripts/lib/supervise.ts), on its own: back-off doubling,
// reset after a stable run, and the two crash-loop limits.
import { describe, expect, it } from 'vitest';
import { CrashHistory, DEFAULT_POLICY } from '../../scripts/lib/supervise.ts';

describe('restart policy', () => {
  it('doubles the delay up to the cap, and starts over once the part stayed up', () => {
    const h = new CrashHistory({ ...DEFAULT_POLICY, maxCrashes: 100 });
    const delays: number[] = [];
    let t = 0;
    for (let i = 0; i < 9; i++) {
      h.ready(t);
      t += 1_000;
      const d = h.crashed(t, true);
      if (!d.restart) throw new Error(d.reason);
      delays.push(d.delayMs);
      t += d.delayMs;
    }
    expect(delays).toEqual([100, 200, 400, 800, 1_600, 3_200, 6_400, 10_000, 10_000]);
    h.ready(t);
    expect(h.crashed(t + DEFAULT_POLICY.stableMs, true)).toEqual({ restart: true, delayMs: 100 });
  });

  it('gives up after 5 restarts in a row that exit before they are ready', () => {
    const h = new CrashHistory();
    h.ready(0);
    expect(h.crashed(1_000, true).restart).toBe(true);
    for (let i = 1; i <= 4; i++) expect(h.crashed(1_000 + i * 20_000, false).restart).toBe(true);
    expect(h.crashed(200_000, false)).toEqual({
      restart: false,
      reason: '5 restarts in a row exited before they were ready',
    });
  });

  it('a ready restart clears the count of failed starts', () => {
    const h = new CrashHistory({ ...DEFAULT_POLICY, maxCrashes: 100 });
    for (let i = 0; i < 4; i++) expect(h.crashed(i * 20_000, false).restart).toBe(true);
    h.ready(100_000);
    for (let i = 0; i < 4; i++) expect(h.crashed(200_000 + i * 20_000, false).restart).toBe(true);
  });

  it('gives up after 10 crashes within a minute, however each restart went', () => {
    const h = new CrashHistory();
    for (let i = 0; i < 9; i++) {
      h.ready(i * 5_000);
      expect(h.crashed(i * 5_000 + 1_000, true).restart).toBe(true);
    }
    h.ready(45_000);
    expect(h.crashed(46_000, true)).toEqual({ restart: false, reason: '10 crashes within 60 s' });
  });

  it('forgets crashes older than the window', () => {
    const h = new CrashHistory();
    for (let i = 0; i < 20; i++) {
      h.ready(i * 10_000);
      expect(h.crashed(i * 10_000 + 1_000, true).restart).toBe(true);
    }
  });
});
