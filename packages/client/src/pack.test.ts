// Publishable: `pnpm pack` of @mcs/webhook-verify and @mcs/client yields tarballs of built
// JavaScript + declarations that npm installs into a plain Node 20 project outside the workspace,
// where a script (run by the system's Node 20, not the workspace's Node 24) uses them against the
// real stack, and a TypeScript consumer compiles under `tsc --strict` against the shipped types.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { type AccountKeys, type Stack, startStack } from '@mcs/testkit';
import { afterAll, beforeAll, expect, it } from 'vitest';

const run = promisify(execFile);
const here = fileURLToPath(new URL('..', import.meta.url));
const NODE20 = ['/usr/bin/node', '/usr/local/bin/node'].find(existsSync) ?? 'node';
const NPM = ['/usr/bin/npm', '/usr/local/bin/npm'].find(existsSync) ?? 'npm';

let stack: Stack;
let keys: AccountKeys;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'mcs-pack-'));
  stack = await startStack({ env: { WEBHOOK_ALLOW_HTTP: 'true', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' } });
  keys = await stack.createAccount();
});
afterAll(async () => {
  await stack?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const SCRIPT = `
import http from 'node:http';
import { Mcs, NotFoundError, constructEvent } from '@mcs/client';
import { verifyWebhook } from '@mcs/webhook-verify';

const mcs = new Mcs({ apiKey: process.env.MCS_API_KEY, baseUrl: process.env.MCS_BASE_URL });
const deliveries = [];
const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    deliveries.push({ raw: Buffer.concat(chunks), headers: req.headers });
    res.end('ok');
  });
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const endpoint = await mcs.webhooks.create({ url: 'http://127.0.0.1:' + server.address().port + '/hook', events: ['order.created'] });
const order = await mcs.orders.create({
  customer: { name: 'Ada', phone: '+4915112345678' },
  currency: 'EUR',
  items: [{ name: 'Tea', unit_amount: 450, quantity: 2 }],
});
const ids = [];
for await (const o of mcs.orders.list({ limit: 1 })) ids.push(o.id);
let notFound = null;
try { await mcs.orders.retrieve('ord_01kaaaaaaaaaaaaaaaaaaaaaaa'); } catch (e) { notFound = e instanceof NotFoundError ? e.code : String(e); }
const deadline = Date.now() + 30000;
while (deliveries.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
const d = deliveries[0];
const event = constructEvent(d.raw, d.headers, endpoint.secret);
const plain = verifyWebhook(endpoint.secret, d.raw, d.headers);
server.close();
console.log(JSON.stringify({ node: process.version, order: order.id, total: order.total, ids, notFound, event: event.type, eventOrder: event.data.id, plain: plain.id === event.id }));
`;

const CONSUMER = `
import { Mcs, McsError, type Order, type WebhookEvent } from '@mcs/client';

export async function total(mcs: Mcs): Promise<number> {
  const order: Order = await mcs.orders.create({
    customer: { name: 'Ada', phone: '+4915112345678' },
    currency: 'EUR',
    items: [{ name: 'Tea', unit_amount: 450, quantity: 2 }],
  });
  const amount: number = order.total;
  const status: 'pending' | 'paid' | 'fulfilled' | 'cancelled' | 'refunded' = order.status;
  // @ts-expect-error currency is required: the types are exact, not all-optional
  await mcs.orders.create({ customer: { name: 'Ada', phone: '+4915112345678' }, items: [] });
  for await (const o of mcs.orders.list()) if (o.status === status) return amount + o.total;
  return amount;
}

export function describe(event: WebhookEvent): string {
  if (event.type === 'order.created') return event.data.customer.phone;
  return event.type;
}

export function codeOf(err: unknown): string | undefined {
  return err instanceof McsError ? err.code : undefined;
}
`;

it('packs, installs with npm outside the workspace, runs on Node 20 and type-checks under tsc --strict', async () => {
  const tarballs = join(dir, 'tarballs');
  for (const pkg of ['webhook-verify', 'client']) {
    await run('pnpm', ['pack', '--pack-destination', tarballs], {
      cwd: join(here, '..', pkg),
      timeout: 180_000,
    });
  }
  const files = readdirSync(tarballs).sort();
  expect(files).toEqual(['mcs-client-0.1.0.tgz', 'mcs-webhook-verify-0.1.0.tgz']);
  const listing = (await run('tar', ['tzf', join(tarballs, 'mcs-client-0.1.0.tgz')])).stdout;
  expect(listing).toContain('package/dist/index.js');
  expect(listing).toContain('package/dist/index.d.ts');
  expect(listing).not.toContain('.test.');
  expect(listing).not.toContain('package/src/');

  const project = join(dir, 'project');
  await run('mkdir', ['-p', project]);
  writeFileSync(
    join(project, 'package.json'),
    JSON.stringify({ name: 'consumer', private: true, type: 'module' }),
  );
  // Our two packages come from the tarballs; openapi-fetch from npm's cache when it has it.
  await run(
    NPM,
    [
      'install',
      '--prefer-offline',
      '--no-audit',
      '--no-fund',
      join(tarballs, 'mcs-webhook-verify-0.1.0.tgz'),
      join(tarballs, 'mcs-client-0.1.0.tgz'),
    ],
    { cwd: project, timeout: 180_000, env: { ...process.env, PATH: `/usr/bin:${process.env.PATH ?? ''}` } },
  );

  writeFileSync(join(project, 'journey.mjs'), SCRIPT);
  const { stdout } = await run(NODE20, ['journey.mjs'], {
    cwd: project,
    timeout: 60_000,
    env: { PATH: process.env.PATH ?? '', MCS_API_KEY: keys.secret_key, MCS_BASE_URL: stack.baseUrl },
  });
  const result = JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}');
  expect(result.node).toMatch(/^v20\./);
  expect(result).toMatchObject({
    total: 900,
    notFound: 'resource_missing',
    event: 'order.created',
    plain: true,
  });
  expect(result.ids).toEqual([result.order]);
  expect(result.eventOrder).toBe(result.order);

  writeFileSync(join(project, 'consumer.ts'), CONSUMER);
  const tsc = join(here, 'node_modules/typescript/bin/tsc');
  const compiled = await run(
    NODE20,
    [
      tsc,
      '--strict',
      '--noEmit',
      '--target',
      'es2022',
      '--module',
      'nodenext',
      '--moduleResolution',
      'nodenext',
      '--lib',
      'es2022,dom,dom.asynciterable',
      'consumer.ts',
    ],
    { cwd: project, timeout: 120_000 },
  ).catch((err: { stdout?: string }) => ({ stdout: `tsc failed:\n${err.stdout ?? String(err)}` }));
  expect(compiled.stdout).toBe('');
}, 300_000);
