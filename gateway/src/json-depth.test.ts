import { describe, expect, it } from 'vitest';
import { MAX_JSON_DEPTH, nestedDeeperThan } from './json-depth.ts';

const bytes = (s: string) => Buffer.from(s, 'utf8');
const nested = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;

describe('nestedDeeperThan', () => {
  it('counts arrays and objects, up to the limit and not beyond', () => {
    expect(nestedDeeperThan(bytes(nested(MAX_JSON_DEPTH)))).toBe(false);
    expect(nestedDeeperThan(bytes(nested(MAX_JSON_DEPTH + 1)))).toBe(true);
    expect(nestedDeeperThan(bytes(`${'{"a":'.repeat(3)}1}}}`), 3)).toBe(false);
    expect(nestedDeeperThan(bytes(`${'{"a":'.repeat(4)}1}}}}`), 3)).toBe(true);
    expect(nestedDeeperThan(bytes('[[],[],[[]]]'), 3)).toBe(false);
  });

  it('skips strings, escaped quotes and backslashes included, and any UTF-8', () => {
    expect(nestedDeeperThan(bytes('{"a":"[[[[[{{{{"}'), 1)).toBe(false);
    expect(nestedDeeperThan(bytes('{"a":"\\"[[[[","b":"\\\\"}'), 1)).toBe(false);
    expect(nestedDeeperThan(bytes('{"a":"\\\\",[[]]}'), 2)).toBe(true);
    expect(nestedDeeperThan(bytes('{"é😀":"[["}'), 1)).toBe(false);
  });
});
