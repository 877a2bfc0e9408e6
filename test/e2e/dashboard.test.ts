// The dashboard (Settings → API, spec 1 and 3.1) in Debian's Chromium, against the whole stack:
// an endpoint made unhealthy by a failing receiver is seen and re-enabled by the account holder,
// after which new events flow again; endpoints are added and secrets rotated from the page;
// publishable keys, forged POSTs, signed-out and revoked sessions are refused.
import { type AccountKeys, type Receiver, type Stack, startStack, until } from '@mcs/testkit';
import { verifyServiceSignature } from '@mcs/webhook-verify';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accountApi, receiverPool } from './account-api.ts';
import { DASHBOARD_STACK_ENV, launchChromium, screenshotPath, submit } from './browser.ts';

let stack: Stack;
let browser: Browser;
const shot = screenshotPath('dashboard');
const { receiver, closeAll } = receiverPool();
const { must, newOrder } = accountApi(() => stack);

beforeAll(async () => {
  stack = await startStack({ env: DASHBOARD_STACK_ENV });
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await stack?.stop();
  await closeAll();
});

const settingsUrl = () => `${stack.baseUrl}/dashboard/settings/api`;

async function signIn(context: BrowserContext, key: string): Promise<Page> {
  const page = await context.newPage();
  await page.goto(`${stack.baseUrl}/dashboard`);
  expect(new URL(page.url()).pathname).toBe('/dashboard/login');
  await page.click('#key-login-box summary');
  await page.fill('#key', key);
  await submit(page, '#key-login button[type=submit]');
  return page;
}

/** The session cookie header of a browser context, for forged requests from outside it. */
async function sessionCookie(context: BrowserContext): Promise<string> {
  const c = (await context.cookies()).find((x) => x.name === 'mcs_session');
  expect(c).toBeDefined();
  return `mcs_session=${c!.value}`;
}

describe('Settings → API in a browser', () => {
  let keys: AccountKeys;
  let failing: Receiver;
  let endpointId: string;

  beforeAll(async () => {
    keys = await stack.createAccount();
    failing = await receiver();
    failing.reply = () => ({ status: 500, body: 'receiver down' });
    const ep = await must(keys.secret_key, 'POST', '/v1/webhooks', {
      url: failing.url,
      events: ['order.created'],
      description: 'Shop backend <b>&</b>',
    });
    endpointId = ep.id;
    await newOrder(keys.secret_key);
    // First attempt + 5 retries 100 ms apart, then unhealthy.
    await until('the endpoint to turn unhealthy', async () => {
      const got = await must(keys.secret_key, 'GET', `/v1/webhooks/${endpointId}`);
      return got.status === 'unhealthy' && got;
    });
  });

  it('refuses a publishable key with a clear message', async () => {
    const context = await browser.newContext();
    const page = await signIn(context, keys.publishable_key);
    expect(new URL(page.url()).pathname).toBe('/dashboard/login');
    await expect(page.locator('.flash.error').textContent()).resolves.toContain(
      'Publishable keys (pk_…) are read-only and cannot sign in',
    );
    expect((await context.cookies()).filter((c) => c.name === 'mcs_session')).toEqual([]);
    await context.close();
  });

  it('shows the unhealthy endpoint, re-enables it, and new events flow again', async () => {
    const context = await browser.newContext();
    const page = await signIn(context, keys.secret_key);
    expect(page.url()).toBe(settingsUrl());

    const response = await page.goto(settingsUrl());
    const headers = response!.headers();
    expect(headers['content-security-policy']).toMatch(
      /^default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-[A-Za-z0-9+/]{43}='; form-action 'self'; frame-ancestors 'none'; base-uri 'none'$/,
    );
    expect(headers['x-frame-options']).toBe('DENY');
    const [cookie] = (await context.cookies()).filter((c) => c.name === 'mcs_session');
    expect(cookie).toMatchObject({ path: '/dashboard', httpOnly: true, sameSite: 'Lax', secure: false });

    const card = page.locator(`article#${endpointId}`);
    await expect(card.getAttribute('data-status')).resolves.toBe('unhealthy');
    await expect(card.locator('.badge').textContent()).resolves.toBe('Unhealthy');
    const cardText = (await card.textContent())!;
    expect(cardText).toContain(failing.url);
    expect(cardText).toContain('Last error: HTTP 500');
    expect(cardText).toContain('Failing since');
    // Escaped, shown as text.
    await expect(card.locator('.description').textContent()).resolves.toBe('Shop backend <b>&</b>');
    await page.screenshot({ path: shot('endpoints-unhealthy'), fullPage: true });

    // The deliveries view: the failed delivery with its six attempts.
    await Promise.all([
      page.waitForURL(/\/deliveries$/),
      card.locator('a', { hasText: 'Deliveries' }).click(),
    ]);
    const delivery = page.locator('article.delivery').first();
    await expect(delivery.getAttribute('data-status')).resolves.toBe('failed');
    await expect(delivery.locator('tr.attempt').count()).resolves.toBe(6);
    expect(await delivery.textContent()).toContain('receiver down');
    await page.goto(settingsUrl());

    await submit(page, card.getByRole('button', { name: 'Re-enable', exact: true }));
    await expect(page.locator('.flash.ok').textContent()).resolves.toContain('re-enabled');
    await expect(card.getAttribute('data-status')).resolves.toBe('enabled');
    await expect(card.getByRole('button', { name: 'Re-enable', exact: true }).count()).resolves.toBe(0);
    // The flash is shown once.
    await page.reload();
    await expect(page.locator('.flash').count()).resolves.toBe(0);
    expect((await must(keys.secret_key, 'GET', `/v1/webhooks/${endpointId}`)).status).toBe('enabled');

    failing.reply = () => ({ status: 200, body: 'ok' });
    const before = failing.received.length;
    const order = await newOrder(keys.secret_key);
    const got = await failing.waitFor(before + 1);
    expect(JSON.parse(got.at(-1)!.body).data.id).toBe(order.id);
    await context.close();
  });

  it('re-enables an unhealthy endpoint and replays what failed or was skipped since it began failing', async () => {
    const own = await stack.createAccount();
    const r = await receiver();
    r.reply = () => ({ status: 503, body: 'down' });
    const ep = await must(own.secret_key, 'POST', '/v1/webhooks', { url: r.url, events: ['order.created'] });
    const failed = await newOrder(own.secret_key);
    await until('the endpoint to turn unhealthy', async () => {
      const got = await must(own.secret_key, 'GET', `/v1/webhooks/${ep.id}`);
      return got.status === 'unhealthy' && got;
    });
    const skipped = await newOrder(own.secret_key);
    await until('a skipped delivery', async () => {
      const l = await must(own.secret_key, 'GET', `/v1/webhooks/${ep.id}/deliveries`);
      return l.data.some((d: { status: string }) => d.status === 'skipped') && l;
    });
    const before = r.received.length;

    const context = await browser.newContext();
    const page = await signIn(context, own.secret_key);
    const card = page.locator(`article#${ep.id}`);
    await expect(card.locator('select[name=since]').inputValue()).resolves.toBe('failing');
    r.reply = () => ({ status: 200, body: 'ok' });
    await submit(page, card.locator('button', { hasText: 'Re-enable and replay' }));
    const flash = (await page.locator('.flash.ok').textContent())!;
    expect(flash).toContain('2 missed events are being sent (failed, skipped or while disabled');
    const recovery = /recovery (rcv_[0-9a-z]+)/.exec(flash)![1]!;
    await expect(card.getAttribute('data-status')).resolves.toBe('enabled');
    await page.screenshot({ path: shot('endpoint-recovered'), fullPage: true });
    await context.close();

    const got = await r.waitFor(before + 2);
    expect(new Set(got.slice(before).map((g) => JSON.parse(g.body).data.id))).toEqual(
      new Set([failed.id, skipped.id]),
    );
    const done = await until('the recovery to complete', async () => {
      const now = await must(own.secret_key, 'GET', `/v1/webhooks/${ep.id}/recoveries/${recovery}`);
      return now.status === 'completed' && now.deliveries.succeeded === 2 && now;
    });
    expect(done).toMatchObject({ object: 'recovery', total: 2, queued: 2 });
  });

  it('adds an endpoint with its secret shown once, shows service errors, rotates the secret', async () => {
    const context = await browser.newContext();
    const page = await signIn(context, keys.secret_key);
    const target = await receiver();

    // An invalid URL: the service's message on the page, the form kept.
    await page.fill('#url', 'ftp://example.com/hook');
    await page.check('input[name=events][value="order.created"]');
    await submit(page, '#add-endpoint button[type=submit]');
    await expect(page.locator('.flash.error').textContent()).resolves.toContain(
      'The endpoint was not added: url',
    );
    await expect(page.inputValue('#url')).resolves.toBe('ftp://example.com/hook');

    await page.fill('#url', target.url);
    await page.fill('#description', 'added in the browser');
    await submit(page, '#add-endpoint button[type=submit]');
    const secret = (await page.locator('.flash.ok code.secret').textContent())!;
    expect(secret).toMatch(/^whsec_/);
    const id = (await page.locator('.flash.ok code.secret').getAttribute('data-endpoint'))!;
    await expect(page.locator(`article#${id}`).getAttribute('data-status')).resolves.toBe('enabled');
    await page.reload();
    expect(await page.content()).not.toContain(secret);

    const order = await newOrder(keys.secret_key);
    const [got] = await target.waitFor(1);
    expect(JSON.parse(got!.body).data.id).toBe(order.id);
    expect(verifyServiceSignature(secret, got!.body, got!.headers['x-service-signature'] as string)).toBe(
      true,
    );

    await submit(page, page.locator(`article#${id} button`, { hasText: 'Rotate secret' }));
    const rotated = (await page.locator('.flash.ok code.secret').textContent())!;
    expect(rotated).toMatch(/^whsec_/);
    expect(rotated).not.toBe(secret);
    await newOrder(keys.secret_key);
    const [, next] = await target.waitFor(2);
    expect(verifyServiceSignature(rotated, next!.body, next!.headers['x-service-signature'] as string)).toBe(
      true,
    );
    await context.close();
  });

  it('refuses a POST without the session’s CSRF token', async () => {
    const context = await browser.newContext();
    const page = await signIn(context, keys.secret_key);
    const cookie = await sessionCookie(context);
    const action = `${stack.baseUrl}/dashboard/settings/api/webhooks/${endpointId}/disable`;
    const forge = (body: string, headers: Record<string, string> = {}) =>
      fetch(action, {
        method: 'POST',
        redirect: 'manual',
        headers: { cookie, 'content-type': 'application/x-www-form-urlencoded', ...headers },
        body,
      });
    expect((await forge('')).status).toBe(403);
    expect((await forge('csrf=not-the-token')).status).toBe(403);
    const csrf = (await page.locator('input[name=csrf]').first().inputValue())!;
    expect((await forge(`csrf=${csrf}`, { origin: 'https://evil.example' })).status).toBe(403);
    expect((await must(keys.secret_key, 'GET', `/v1/webhooks/${endpointId}`)).status).toBe('enabled');
    await context.close();
  });

  it('after sign-out the settings page asks to sign in again', async () => {
    const context = await browser.newContext();
    const page = await signIn(context, keys.secret_key);
    const cookie = await sessionCookie(context);
    await submit(page, '#sign-out');
    await expect(page.locator('.flash.ok').textContent()).resolves.toBe('You have signed out.');
    await page.goto(settingsUrl());
    expect(new URL(page.url()).pathname).toBe('/dashboard/login');
    // The old cookie is dead on the server too.
    const replay = await fetch(settingsUrl(), { redirect: 'manual', headers: { cookie } });
    expect(replay.status).toBe(303);
    expect(replay.headers.get('location')).toBe('/dashboard/login');
    await context.close();
  });

  it('ends the session when its key is revoked', async () => {
    const own = await stack.createAccount();
    const context = await browser.newContext();
    const page = await signIn(context, own.secret_key);
    expect(page.url()).toBe(settingsUrl());
    const list = JSON.parse(await stack.cli(['keys', 'list', '--account', own.account.id]));
    const key = list.data.find(
      (k: any) => k.kind === 'secret' && !k.livemode && own.secret_key.endsWith(k.last4),
    );
    expect(key).toBeDefined();
    await stack.cli(['keys', 'revoke', '--account', own.account.id, '--key', key.id]);
    await until(
      'the revoked session to land on the sign-in page',
      async () => {
        await page.goto(settingsUrl());
        return new URL(page.url()).pathname === '/dashboard/login';
      },
      5_000,
    );
    // And the key cannot sign in again.
    await page.click('#key-login-box summary');
    await page.fill('#key', own.secret_key);
    await submit(page, '#key-login button[type=submit]');
    await expect(page.locator('.flash.error').textContent()).resolves.toContain('This key is not valid');
    await context.close();
  });
});
