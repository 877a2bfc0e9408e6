// Rewrites the table of docs/errors.md from the catalog: `pnpm --filter @mcs/errors docs`.
// (src/docs.test.ts fails when the table and the catalog differ.)
import { readFileSync, writeFileSync } from 'node:fs';
import { catalog, type ErrorCode, statusOf } from '../src/catalog.ts';

const file = new URL('../../../docs/errors.md', import.meta.url);
const rows = (Object.keys(catalog) as ErrorCode[]).map((code) => {
  const e = catalog[code];
  return `| \`${code}\` | \`${e.type}\` | ${statusOf(code)} | ${e.doc.replace(/\|/g, '\\|')} |`;
});
const table = ['| Code | Type | HTTP status | When |', '| --- | --- | --- | --- |', ...rows].join('\n');
const text = readFileSync(file, 'utf8');
const start = text.indexOf('| Code ');
writeFileSync(file, `${start < 0 ? `${text}\n` : text.slice(0, start)}${table}\n`);
