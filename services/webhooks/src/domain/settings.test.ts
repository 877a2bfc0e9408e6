import { describe, expect, it } from 'vitest';
import { formatDelay, parseSchedule } from './settings.ts';

describe('retry schedule of an account', () => {
  it('formats delays in the largest unit that divides them', () => {
    expect([1_500, 5_000, 300_000, 7_200_000, 86_400_000].map(formatDelay)).toEqual([
      '1500ms',
      '5s',
      '5m',
      '2h',
      '24h',
    ]);
  });

  it('takes 1 to 5 delays of 1s to 24h', () => {
    expect(parseSchedule(['1s', '2.5s', '1m', '2h', '24h'])).toEqual([
      1_000, 2_500, 60_000, 7_200_000, 86_400_000,
    ]);
    const code = (list: string[]) => {
      try {
        parseSchedule(list);
        return 'accepted';
      } catch (err) {
        return (err as Error).message;
      }
    };
    expect(code([])).toContain('1 to 5 delays');
    expect(code(['1s', '1s', '1s', '1s', '1s', '1s'])).toContain('1 to 5 delays');
    expect(code(['999ms'])).toContain('from 1s to 24h');
    expect(code(['25h'])).toContain('from 1s to 24h');
    expect(code(['soon'])).toContain('is not a delay');
  });
});
