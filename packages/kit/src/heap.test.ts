// settleHeap on this process's own heap: after a burst of allocation that grew the young
// generation, it shrinks the heap back to what is live.
import { readFileSync } from 'node:fs';
import v8 from 'node:v8';
import { describe, expect, it } from 'vitest';
import { PART_NODE_FLAGS } from './config.ts';
import { settleHeap } from './heap.ts';

const space = (name: string) => v8.getHeapSpaceStatistics().find((s) => s.space_name === name)!.space_size;

describe('settleHeap', () => {
  it('gives back the young generation a burst of allocation grew', async () => {
    // Like loading code: much allocated, a good part of it kept for a while.
    let keep: object[] = [];
    for (let i = 0; i < 2_000_000; i++) {
      const o = { i, s: `x${i}`, a: [i] };
      if (i % 3 === 0) keep.push(o);
      if (keep.length > 200_000) keep = [];
    }
    keep = [];
    const grown = space('new_space');
    expect(grown).toBeGreaterThan(8 * 2 ** 20);

    const settled = await settleHeap();
    expect(settled).not.toBeNull();
    expect(space('new_space')).toBeLessThanOrEqual(2 * 2 ** 20);
    expect(settled!.afterMiB).toBeLessThan(settled!.beforeMiB - 8);
  });

  it("the image starts every part with the parts' Node flags (kit/config)", () => {
    const dockerfile = readFileSync(new URL('../../../deploy/Dockerfile', import.meta.url), 'utf8');
    const entrypoint = /^ENTRYPOINT (\[.*\])$/m.exec(dockerfile);
    expect(JSON.parse(entrypoint![1]!)).toEqual(['node', ...PART_NODE_FLAGS]);
  });
});
