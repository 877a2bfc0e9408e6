import { describe, expect, it } from 'vitest';
import { until } from './until.ts';

describe('until', () => {
  it('resolves to the first value that is not undefined, null or false', async () => {
    let n = 0;
    const got = await until('n to reach 3', () => (++n >= 3 ? { n } : false), { everyMs: 1 });
    expect(got).toEqual({ n: 3 });
    expect(await until('a zero', async () => 0)).toBe(0);
  });

  it('names what it waited for when it times out, with the detail', async () => {
    await expect(
      until('the receiver to get 2 deliveries', () => undefined, {
        timeoutMs: 30,
        everyMs: 5,
        detail: () => 'got 1',
      }),
    ).rejects.toThrow('timed out after 30 ms waiting for the receiver to get 2 deliveries\ngot 1');
    await expect(until('nothing', async () => null, 10)).rejects.toThrow(
      'timed out after 10 ms waiting for nothing',
    );
  });

  it('ends the wait with the error of a probe that throws', async () => {
    await expect(
      until('a probe that throws', () => {
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
  });
});
