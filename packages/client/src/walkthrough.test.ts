// The README's SDK walkthrough is packages/client/examples/walkthrough.ts, shown verbatim; here it
// runs as a reader would run it, against a real stack.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { REPO_ROOT, type Stack, startStack } from '@mcs/testkit';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Mcs } from './index.ts';

const run = promisify(execFile);
const example = new URL('../examples/walkthrough.ts', import.meta.url);
let stack: Stack;

beforeAll(async () => {
  stack = await startStack({ env: { WEBHOOK_ALLOW_HTTP: 'true', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' } });
});
afterAll(() => stack?.stop());

it('is shown in the README as it is', () => {
  const readme = readFileSync(`${REPO_ROOT}README.md`, 'utf8');
  expect(readme).toContain(`\`\`\`ts\n${readFileSync(example, 'utf8')}\`\`\``);
});

it('creates an order, verifies its delivery, lists the pending orders and deletes its endpoint', async () => {
  const { secret_key } = await stack.createAccount();
  const { stdout } = await run(process.execPath, [example.pathname], {
    cwd: new URL('..', import.meta.url).pathname,
    env: { PATH: process.env.PATH ?? '', KEY: secret_key, MCS_BASE_URL: stack.baseUrl },
    timeout: 60_000,
  });
  const lines = stdout.trim().split('\n');
  // The delivery may be verified before the order's answer is printed: lines in any order.
  const created = lines.map((l) => /^created (ord_\w+) 900 EUR$/.exec(l)).find((m) => m !== null) ?? null;
  expect(created, stdout).not.toBeNull();
  expect(lines).toContain(`pending ${created?.[1]}`);
  expect(
    lines.some((l) => /^verified order\.created evt_\w+$/.test(l)),
    stdout,
  ).toBe(true);
  // Its endpoint is deleted at the end: one left behind would turn unhealthy once the receiver closed.
  expect(lines.at(-1), stdout).toMatch(/^deleted we_\w+$/);
  const mcs = new Mcs({ apiKey: secret_key, baseUrl: stack.baseUrl });
  expect((await mcs.webhooks.list()).data).toEqual([]);
});
