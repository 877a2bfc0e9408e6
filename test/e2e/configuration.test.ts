// The README's Configuration table is the operator's list of every variable (docs/operations.md
// says so): each variable a part, `pnpm start` or the CLI reads must be documented, in that table
// or in the one other place named below, and nothing the table lists may be a variable nobody reads.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');

/** Variables documented outside the Configuration table, and where. */
const DOCUMENTED_ELSEWHERE: Record<string, string> = {
  MCS_API_KEY: 'packages/cli/README.md',
  MCS_BASE_URL: 'packages/cli/README.md',
  MCS_CONFIG: 'packages/cli/README.md',
  XDG_CONFIG_HOME: 'packages/cli/README.md',
  MCS_WEBHOOK_SECRET: 'README.md', // the example receiver of "Try it"
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'README.md', // "Observability", with the other OTEL_*
  OTEL_SERVICE_NAME: 'README.md',
  OTEL_BSP_SCHEDULE_DELAY: 'README.md',
  OTEL_SDK_DISABLED: 'README.md',
  GOMAXPROCS: 'docs/operations.md',
};

/** Variables that are not configuration, and why. */
const NOT_CONFIGURATION: Record<string, string> = {
  PATH: 'where nats-server is looked for',
  HOME: "the CLI's default config directory",
  NODE_ENV: 'only makes WEBHOOK_SECRETS_KEY required, as its row says',
  MCS_STANDBY: "set by `pnpm start` on a part's standby process",
  MCS_FAILPOINT: 'fault injection for the crash tests',
  TEST_LOG: "the test kit's switch for the parts' logs",
};

/** Non-test TypeScript under a directory, without node_modules and generated code. */
function sources(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === 'gen') continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...sources(path));
    else if (name.endsWith('.ts') && !name.endsWith('.test.ts')) out.push(path);
  }
  return out;
}

/** Every variable the running code reads: `env.X`, `env['X']`, and the keys of the env schemas. */
function variablesRead(): Map<string, string> {
  const dirs = [
    'scripts',
    'gateway/src',
    ...readdirSync(join(ROOT, 'services')).map((s) => `services/${s}/src`),
    'packages/kit/src',
    'packages/cli/src',
  ];
  const found = new Map<string, string>();
  for (const file of dirs.flatMap((d) => sources(join(ROOT, d)))) {
    const text = readFileSync(file, 'utf8');
    const where = relative(ROOT, file);
    for (const m of text.matchAll(/\benv(?:\.|\[['"])([A-Z][A-Z0-9_]{2,})\b/g)) found.set(m[1]!, where);
    // Keys of a zod env schema: `  NAME: z.…`, `duration`, `port`, `booleanFlag`.
    if (/EnvSchema|baseEnvSchema\.extend/.test(text)) {
      for (const m of text.matchAll(/^ {2}([A-Z][A-Z0-9_]{2,}): (?:z\b|duration|port|booleanFlag)/gm)) {
        found.set(m[1]!, where);
      }
    }
  }
  return found;
}

function configurationTable(): Set<string> {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const section = readme.split(/^## Configuration$/m)[1]?.split(/^## /m)[0] ?? '';
  const names = new Set<string>();
  for (const row of section.split('\n').filter((l) => l.startsWith('| `'))) {
    for (const m of (row.split('|')[1] ?? '').matchAll(/`([A-Z][A-Z0-9_]+)`/g)) names.add(m[1]!);
  }
  return names;
}

describe("the README's Configuration table", () => {
  const read = variablesRead();
  const table = configurationTable();

  it('finds the variables it is checked against', () => {
    // Guards the scan itself: a change of pattern that found nothing would pass every check below.
    for (const name of [
      'DATABASE_URL',
      'WEBHOOK_TIMEOUT',
      'AUTH_CACHE_TTL',
      'MCS_ONE_PROCESS',
      'MCS_API_KEY',
    ]) {
      expect(read.has(name), name).toBe(true);
    }
    expect(table.has('WEBHOOK_RETRY_SCHEDULE')).toBe(true);
  });

  it('documents every variable the code reads', () => {
    const missing: string[] = [];
    for (const [name, where] of read) {
      if (name in NOT_CONFIGURATION || table.has(name)) continue;
      const doc = DOCUMENTED_ELSEWHERE[name];
      if (doc && readFileSync(join(ROOT, doc), 'utf8').includes(name)) continue;
      missing.push(`${name} (read in ${where})`);
    }
    expect(missing).toEqual([]);
  });

  it('lists only variables the code reads', () => {
    // The services' URLs are read as `${NAME}_URL` (kit/config serviceUrl).
    const dynamic = new Set(['ACCOUNTS_URL', 'COMMERCE_URL', 'MESSAGING_URL', 'WEBHOOKS_URL']);
    const unread = [...table].filter((name) => !read.has(name) && !dynamic.has(name));
    expect(unread).toEqual([]);
  });
});
