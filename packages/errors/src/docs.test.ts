// docs/errors.md lists every code of the catalog with its type and HTTP status, and nothing else
// (`pnpm --filter @mcs/errors docs` rewrites its table).
import { readFileSync } from 'node:fs';
import { expect, it } from 'vitest';
import { catalog, type ErrorCode, statusOf } from './catalog.ts';

it('docs/errors.md has one row per catalog code, with its type and status', () => {
  const text = readFileSync(new URL('../../../docs/errors.md', import.meta.url), 'utf8');
  const rows = new Map<string, [string, string]>();
  for (const line of text.split('\n')) {
    const cells = line.split('|').map((c) => c.trim());
    const code = /^`(\w+)`$/.exec(cells[1] ?? '')?.[1];
    if (!code) continue;
    rows.set(code, [cells[2] ?? '', cells[3] ?? '']);
  }
  const codes = Object.keys(catalog) as ErrorCode[];
  expect([...rows.keys()].sort()).toEqual([...codes].sort());
  for (const code of codes)
    expect(rows.get(code), code).toEqual([`\`${catalog[code].type}\``, String(statusOf(code))]);
});
