// /docs in a real browser (Chromium): every page of the navigation renders, every link and
// in-page anchor resolves, the reference covers every operation and event type of the served
// OpenAPI document, no internal proto names leak, and the signature verification snippets of the
// webhooks guide (Node and Python) verify a real signed delivery and refuse a tampered one.
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import {
  type AccountKeys,
  createTestCerts,
  type Receiver,
  type Stack,
  startReceiver,
  startStack,
  type TestCerts,
} from '@mcs/testkit';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium } from './browser.ts';

let stack: Stack;
let browser: Browser;
let page: Page;
let certs: TestCerts;
let receiver: Receiver;
let keys: AccountKeys;
let doc: any;

beforeAll(async () => {
  certs = createTestCerts();
  stack = await startStack({
    env: { NODE_EXTRA_CA_CERTS: certs.caFile, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' },
  });
  receiver = await startReceiver({ certs });
  keys = await stack.createAccount();
  doc = await (await fetch(`${stack.baseUrl}/v1/openapi.json`)).json();
  browser = await launchChromium();
  page = await browser.newPage();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await stack?.stop();
  await receiver?.close();
});

async function open(path: string): Promise<void> {
  const res = await page.goto(`${stack.baseUrl}${path}`);
  expect(res?.status(), path).toBe(200);
  expect(res?.headers()['content-type'], path).toMatch(/^text\/html/);
}

describe('/docs in Chromium', () => {
  it('renders every page of the navigation, and every link and anchor resolves', async () => {
    await open('/docs');
    const navPages = await page.$$eval('nav a', (as) =>
      as.map((a) => new URL((a as unknown as { href: string }).href)).map((u) => u.pathname),
    );
    const pages = [...new Set(navPages)].filter((p) => p.startsWith('/docs'));
    for (const p of [
      '/docs',
      '/docs/reference',
      '/docs/authentication',
      '/docs/errors',
      '/docs/pagination',
      '/docs/idempotency',
      '/docs/rate-limits',
      '/docs/test-mode',
      '/docs/webhooks',
    ]) {
      expect(pages).toContain(p);
    }
    const ids = new Map<string, Set<string>>();
    const links: Array<{ from: string; href: string }> = [];
    for (const p of pages) {
      await open(p);
      const text = (await page.textContent('main')) ?? '';
      expect(text, p).not.toMatch(/\bmcs\.(commerce|messaging|webhooks|events|accounts|api)\.v1\b/);
      expect(text, p).not.toMatch(/over HTTPS/i);
      ids.set(p, new Set(await page.$$eval('[id]', (els) => els.map((e) => e.id))));
      for (const href of await page.$$eval('a[href]', (as) =>
        as.map((a) => (a as unknown as { href: string }).href),
      ))
        links.push({ from: p, href });
    }
    const broken: string[] = [];
    const origin = new URL(stack.baseUrl).origin;
    for (const { from, href } of links) {
      const url = new URL(href);
      if (url.origin !== origin) continue; // outside links are not ours to check
      if (!ids.has(url.pathname)) {
        const res = await fetch(url.href.replace(/#.*$/, ''));
        if (res.status !== 200) broken.push(`${from} → ${href}: ${res.status}`);
        continue;
      }
      const anchor = decodeURIComponent(url.hash.slice(1));
      if (anchor && !ids.get(url.pathname)!.has(anchor)) broken.push(`${from} → ${href}: no #${anchor}`);
    }
    expect(broken).toEqual([]);
    expect(links.length).toBeGreaterThan(200);
  }, 120_000);

  it('documents every operation and every event type of the served document', async () => {
    await open('/docs/reference');
    for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, any>>)) {
      for (const [method, op] of Object.entries(ops)) {
        const section = page.locator(`section#${op.operationId}`);
        const text = (await section.textContent()) ?? '';
        expect(text, op.operationId).toContain(`${method.toUpperCase()} ${path}`);
        expect(text, op.operationId).toContain(op.summary);
        expect(text, op.operationId).toContain('curl');
        expect(text, op.operationId).toContain('Errors');
        for (const p of op.parameters ?? []) if (p.name) expect(text, op.operationId).toContain(p.name);
        // The response example shown is the document's, and parses.
        const blocks = await section.locator('pre code.language-json').allTextContents();
        const ok = (Object.values(op.responses['200'].content)[0] as { example: unknown }).example;
        expect(blocks.map((b) => JSON.parse(b))).toContainEqual(ok);
      }
    }
    await open('/docs/webhooks');
    for (const [type, hook] of Object.entries(doc.webhooks as Record<string, any>)) {
      const example = (await page.locator(`section[id="event-${type}"] pre code`).textContent()) ?? '';
      expect(JSON.parse(example), type).toEqual(hook.post.requestBody.content['application/json'].example);
    }
  });

  it('gives Node and Python snippets that verify a real delivery and refuse a tampered one', async () => {
    const created = await stack.api(keys.secret_key, 'POST', '/v1/webhooks', {
      url: receiver.url,
      events: ['product.created'],
    });
    expect(created.status, created.text).toBe(200);
    const secret = created.json.secret as string;
    await stack.api(keys.secret_key, 'POST', '/v1/products', { name: 'Tea', price: 450, currency: 'EUR' });
    const [delivery] = await receiver.waitFor(1, 30_000);
    const headers = {
      'x-service-signature': String(delivery!.headers['x-service-signature']),
      'webhook-id': String(delivery!.headers['webhook-id']),
      'webhook-timestamp': String(delivery!.headers['webhook-timestamp']),
      'webhook-signature': String(delivery!.headers['webhook-signature']),
    };
    await open('/docs/webhooks');
    const dir = mkdtempSync(join(tmpdir(), 'mcs-docs-'));
    const fixture = join(dir, 'delivery.json');
    writeFileSync(fixture, JSON.stringify({ secret, body: delivery!.body, headers }));

    const node = (await page.locator('pre[data-snippet="node"] code').textContent()) ?? '';
    writeFileSync(join(dir, 'verify.mjs'), node);
    writeFileSync(
      join(dir, 'check.mjs'),
      `import { readFileSync } from 'node:fs';
import { verifyServiceSignature, verifyStandardWebhook } from './verify.mjs';
const { secret, body, headers } = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const raw = Buffer.from(body);
const bad = Buffer.from(body.replace('Tea', 'Tee'));
console.log(JSON.stringify([
  verifyServiceSignature(secret, raw, headers['x-service-signature']),
  verifyStandardWebhook(secret, raw, headers),
  verifyServiceSignature(secret, bad, headers['x-service-signature']),
  verifyStandardWebhook(secret, bad, headers),
]));`,
    );
    const run = promisify(execFile);
    const fromNode = await run(process.execPath, [join(dir, 'check.mjs'), fixture]);
    expect(JSON.parse(fromNode.stdout)).toEqual([true, true, false, false]);

    const python = (await page.locator('pre[data-snippet="python"] code').textContent()) ?? '';
    writeFileSync(join(dir, 'verify.py'), python);
    writeFileSync(
      join(dir, 'check.py'),
      `import json, sys
sys.path.insert(0, ${JSON.stringify(dir)})
from verify import verify_service_signature, verify_standard_webhook
d = json.load(open(sys.argv[1]))
raw = d["body"].encode()
bad = d["body"].replace("Tea", "Tee").encode()
h = d["headers"]
print(json.dumps([
    verify_service_signature(d["secret"], raw, h["x-service-signature"]),
    verify_standard_webhook(d["secret"], raw, h),
    verify_service_signature(d["secret"], bad, h["x-service-signature"]),
    verify_standard_webhook(d["secret"], bad, h),
]))`,
    );
    const fromPython = await run('python3', [join(dir, 'check.py'), fixture]);
    expect(JSON.parse(fromPython.stdout)).toEqual([true, true, false, false]);
  }, 60_000);
});
