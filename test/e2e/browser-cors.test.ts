// A storefront's page in Chromium, on another origin than the API: with a publishable key it reads
// the product catalog (answers and errors alike, Request-Id included), while every route that takes
// a secret key stays closed to cross-origin pages, as the browser itself enforces.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type AccountKeys, type Stack, startStack } from '@mcs/testkit';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium } from './browser.ts';

let stack: Stack;
let keys: AccountKeys;
let shop: Server;
let shopUrl: string;
let browser: Browser;
let page: Page;
let productId: string;

beforeAll(async () => {
  stack = await startStack();
  keys = await stack.createAccount();
  const res = await fetch(`${stack.baseUrl}/v1/products`, {
    method: 'POST',
    headers: { authorization: `Bearer ${keys.secret_key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'Green tea', price: 450, currency: 'EUR' }),
  });
  productId = ((await res.json()) as { id: string }).id;
  // The storefront: its own origin (another port), a blank page the test's scripts run in.
  shop = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<p>shop</p>'));
  await new Promise<void>((resolve) => shop.listen(0, '127.0.0.1', resolve));
  shopUrl = `http://127.0.0.1:${(shop.address() as AddressInfo).port}/`;
  browser = await launchChromium();
  page = await browser.newPage();
  await page.goto(shopUrl);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  shop?.close();
  await stack?.stop();
});

interface Seen {
  ok: boolean;
  status?: number;
  requestId?: string | null;
  body?: any;
  error?: string;
}

/** A fetch from the storefront's page; a request the browser's CORS check refuses is `ok: false`. */
function fetchFromShop(path: string, init: { method?: string; key?: string; body?: unknown }): Promise<Seen> {
  return page.evaluate(
    async ({ url, method, key, body }) => {
      const headers: Record<string, string> = {};
      if (key) headers.Authorization = `Bearer ${key}`;
      if (body !== undefined) headers['Content-Type'] = 'application/json';
      try {
        const res = await fetch(url, {
          method,
          headers,
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        return {
          ok: true,
          status: res.status,
          requestId: res.headers.get('request-id'),
          body: await res.json(),
        };
      } catch (err) {
        return { ok: false, error: String(err) };
      }
    },
    { url: `${stack.baseUrl}${path}`, method: init.method ?? 'GET', key: init.key, body: init.body },
  );
}

describe('the API from a page on another origin', () => {
  it('reads the catalog with a publishable key, Request-Id included', async () => {
    const list = await fetchFromShop('/v1/products', { key: keys.publishable_key });
    expect(list).toMatchObject({ ok: true, status: 200, body: { object: 'list' } });
    expect(list.requestId).toMatch(/^req_/);
    expect(list.body.data.map((p: { id: string }) => p.id)).toEqual([productId]);
    const one = await fetchFromShop(`/v1/products/${productId}`, { key: keys.publishable_key });
    expect(one).toMatchObject({ ok: true, status: 200, body: { id: productId, name: 'Green tea' } });
  });

  it('shows the page the API error of a catalog read', async () => {
    const bad = await fetchFromShop('/v1/products', { key: 'pk_test_nothing' });
    expect(bad).toMatchObject({ ok: true, status: 401, body: { error: { type: 'authentication_error' } } });
    expect(bad.requestId).toMatch(/^req_/);
    const missing = await fetchFromShop('/v1/products/prod_missing', { key: keys.publishable_key });
    expect(missing).toMatchObject({ ok: true, status: 404, body: { error: { type: 'not_found_error' } } });
  });

  it('keeps every secret-key route closed to the page, whatever key it holds', async () => {
    for (const [path, method, body] of [
      ['/v1/orders', 'GET', undefined],
      ['/v1/products', 'POST', { name: 'Stolen', price: 1, currency: 'EUR' }],
      [`/v1/products/${productId}`, 'DELETE', undefined],
      ['/v1/webhooks', 'GET', undefined],
    ] as const) {
      const seen = await fetchFromShop(path, { method, key: keys.secret_key, body });
      expect(seen.ok, `${method} ${path}: ${JSON.stringify(seen)}`).toBe(false);
    }
    // Nothing was written or deleted on the way.
    const list = await fetchFromShop('/v1/products', { key: keys.publishable_key });
    expect(list.body.data.map((p: { name: string }) => p.name)).toEqual(['Green tea']);
  });

  it('answers the preflight of a catalog path with what a page may send, and no other', async () => {
    const preflight = await fetch(`${stack.baseUrl}/v1/products/${productId}`, {
      method: 'OPTIONS',
      headers: {
        origin: shopUrl.slice(0, -1),
        'access-control-request-method': 'GET',
        'access-control-request-headers': 'authorization',
      },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe('*');
    expect(preflight.headers.get('access-control-allow-methods')).toBe('GET, HEAD');
    expect(preflight.headers.get('access-control-allow-headers')).toMatch(/Authorization/);
    expect(preflight.headers.get('access-control-allow-credentials')).toBeNull();
    expect(preflight.headers.get('allow')).toBe('GET, HEAD, OPTIONS');
    // A POST needs no Access-Control-Allow-Methods to pass a preflight (it is CORS-safelisted),
    // so only the catalog's own methods get an answer at all.
    for (const [path, wants] of [
      ['/v1/orders', 'GET'],
      ['/v1/products', 'POST'],
      [`/v1/products/${productId}`, 'DELETE'],
    ] as const) {
      const refused = await fetch(`${stack.baseUrl}${path}`, {
        method: 'OPTIONS',
        headers: { origin: shopUrl.slice(0, -1), 'access-control-request-method': wants },
      });
      expect(refused.status, `${wants} ${path}`).toBe(405);
      expect(refused.headers.get('access-control-allow-origin')).toBeNull();
    }
    // The catalog's answers carry it whatever the Origin (a cache between serves them to pages
    // too); other routes' never do.
    const server = await fetch(`${stack.baseUrl}/v1/products`, {
      headers: { authorization: `Bearer ${keys.publishable_key}` },
    });
    expect(server.headers.get('access-control-allow-origin')).toBe('*');
    const orders = await fetch(`${stack.baseUrl}/v1/orders`, {
      headers: { authorization: `Bearer ${keys.secret_key}`, origin: shopUrl.slice(0, -1) },
    });
    expect(orders.status).toBe(200);
    expect(orders.headers.get('access-control-allow-origin')).toBeNull();
  });
});
