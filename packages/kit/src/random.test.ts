import { describe, expect, it } from 'vitest';
import { pooledRandomBytes } from './random.ts';

describe('pooledRandomBytes', () => {
  it('hands out each byte once: 10,000 nonces across many refills, all different', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 10_000; i++) {
      const b = pooledRandomBytes(12);
      expect(b.length).toBe(12);
      seen.add(b.toString('hex'));
    }
    expect(seen.size).toBe(10_000);
  });
});
