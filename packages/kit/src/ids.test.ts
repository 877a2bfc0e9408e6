import { describe, expect, it } from 'vitest';
import { isId, newId } from './ids.ts';

describe('newId', () => {
  it('is prefixed and well-formed', () => {
    const id = newId('ord');
    expect(id).toMatch(/^ord_[0-9a-hjkmnp-tv-z]{26}$/);
    expect(isId('ord', id)).toBe(true);
    expect(isId('prod', id)).toBe(false);
    expect(isId('ord', `${id}x`)).toBe(false);
    expect(isId('ord', id.replace(/.$/, 'i'))).toBe(false);
  });

  it('increases strictly, even within one millisecond or when the clock steps back', () => {
    const t = Date.now() + 10_000;
    const ids = [newId('x', t), newId('x', t), newId('x', t), newId('x', t - 5), newId('x', t + 1)];
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('sorts by creation time across milliseconds', () => {
    const a = newId('x', Date.now() + 20_000);
    const b = newId('x', Date.now() + 20_001);
    expect(a < b).toBe(true);
  });
});
