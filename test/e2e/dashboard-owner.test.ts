// The owner's dashboard in Debian's Chromium, against the whole stack: sign-in with e-mail and
// password (set with `mcs accounts create --password`, typed with the keyboard only), the
// test/live switch, API keys (created and shown once with a copy button, revoked after a
// confirmation: the API refuses the key at once), events with their payload and every delivery
// attempt, resending a failed delivery (none to a deleted endpoint), and an endpoint's chart,
// test event and editing — on a desktop and at phone width. Screenshots go to .data/screenshots.
import { spawn } from 'node:child_process';
import { REPO_ROOT, type Receiver, type Stack, startStack, until } from '@mcs/testkit';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accountApi, receiverPool } from './account-api.ts';
import { DASHBOARD_STACK_ENV, launchChromium, screenshotPath, submit } from './browser.ts';

let stack: Stack;
let browser: Browser;
const shot = screenshotPath('owner');
const { receiver, closeAll } = receiverPool();
const { must, newOrder } = accountApi(() => stack);
const PASSWORD = 'a long owner pass phrase';

beforeAll(async () => {
  stack = await startStack({ env: DASHBOARD_STACK_ENV });
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await stack?.stop();
  await closeAll();
});

/** `mcs ARGS…` with `stdin` piped in as an operator would; answers its stdout. */
async function mcs(args: string[], stdin: string): Promise<string> {
  const child = spawn(process.execPath, ['packages/cli/src/main.ts', ...args], {
    cwd: REPO_ROOT,
    env: stack.env,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (c: Buffer) => (out += c));
  child.stderr.on('data', (c: Buffer) => (err += c));
  child.stdin.end(stdin);
  const code = await new Promise<number | null>((r) => child.once('exit', r));
  expect(code, err).toBe(0);
  return out;
}

/** `mcs accounts create --email E --password`, the password piped in. */
async function createOwner(
  email: string,
): Promise<{ id: string; secret_key: string; live_secret_key: string }> {
  const made = JSON.parse(await mcs(['accounts', 'create', '--email', email, '--password'], `${PASSWORD}\n`));
  return { id: made.account.id, secret_key: made.secret_key, live_secret_key: made.live_secret_key };
}

/** Signs in with the keyboard only: Tab to the fields, type, Enter. */
async function keyboardSignIn(context: BrowserContext, email: string): Promise<Page> {
  const page = await context.newPage();
  await page.goto(`${stack.baseUrl}/dashboard`);
  expect(new URL(page.url()).pathname).toBe('/dashboard/login');
  await page.keyboard.press('Tab'); // the skip link
  for (
    let i = 0;
    i < 5 && (await page.evaluate('document.activeElement && document.activeElement.id')) !== 'email';
    i++
  ) {
    await page.keyboard.press('Tab');
  }
  expect(await page.evaluate('document.activeElement && document.activeElement.id')).toBe('email');
  await page.keyboard.type(email);
  await page.keyboard.press('Tab');
  expect(await page.evaluate('document.activeElement && document.activeElement.id')).toBe('password');
  await page.keyboard.type(PASSWORD);
  await Promise.all([page.waitForURL(/\/dashboard\/settings\/api$/), page.keyboard.press('Enter')]);
  return page;
}

describe('the owner dashboard in a browser', () => {
  let owner: Awaited<ReturnType<typeof createOwner>>;
  let failing: Receiver;
  let endpointId: string;
  let orderId: string;

  beforeAll(async () => {
    owner = await createOwner('owner@example.com');
    failing = await receiver();
    failing.reply = () => ({ status: 500, body: 'receiver down' });
    const ep = await must(owner.secret_key, 'POST', '/v1/webhooks', {
      url: failing.url,
      events: ['order.created'],
      description: 'shop',
    });
    endpointId = ep.id;
    orderId = (await newOrder(owner.secret_key)).id;
    await until('the endpoint to turn unhealthy', async () => {
      const got = await must(owner.secret_key, 'GET', `/v1/webhooks/${endpointId}`);
      return got.status === 'unhealthy' && got;
    });
  });

  it('signs in with e-mail and password by keyboard; a wrong password is refused; the cookie is HttpOnly/Lax', async () => {
    const context = await browser.newContext();
    const bad = await context.newPage();
    await bad.goto(`${stack.baseUrl}/dashboard/login`);
    await bad.fill('#email', 'owner@example.com');
    await bad.fill('#password', 'not the password');
    await submit(bad, '#password-login button[type=submit]');
    await expect(bad.locator('.flash.error').textContent()).resolves.toContain(
      'The e-mail address or the password is not right.',
    );
    await expect(bad.inputValue('#email')).resolves.toBe('owner@example.com');
    await bad.screenshot({ path: shot('sign-in-refused') });

    const page = await keyboardSignIn(context, 'owner@example.com');
    const [cookie] = (await context.cookies()).filter((c) => c.name === 'mcs_session');
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/dashboard' });
    await expect(page.locator('#mode').getAttribute('data-mode')).resolves.toBe('test');
    await expect(page.locator(`article#${endpointId}`).getAttribute('data-status')).resolves.toBe(
      'unhealthy',
    );
    await page.screenshot({ path: shot('endpoints'), fullPage: true });
    await context.close();
  });

  it('switches to live mode and back from any page', async () => {
    const context = await browser.newContext();
    const page = await keyboardSignIn(context, 'owner@example.com');
    await page.goto(`${stack.baseUrl}/dashboard/events`);
    await submit(page, '#switch-mode');
    expect(new URL(page.url()).pathname).toBe('/dashboard/events');
    await expect(page.locator('#mode').getAttribute('data-mode')).resolves.toBe('live');
    await expect(page.locator('tr.event').count()).resolves.toBe(0); // the order was a test-mode one
    await page.goto(`${stack.baseUrl}/dashboard/settings/api`);
    await expect(page.locator(`article#${endpointId}`).count()).resolves.toBe(0);
    await submit(page, '#switch-mode');
    await expect(page.locator('#mode').getAttribute('data-mode')).resolves.toBe('test');
    await expect(page.locator(`article#${endpointId}`).count()).resolves.toBe(1);
    await context.close();
  });

  it('creates an API key shown once with a copy button, and revokes it after confirming', async () => {
    const context = await browser.newContext();
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: stack.baseUrl });
    const page = await keyboardSignIn(context, 'owner@example.com');
    await page.click('nav a:has-text("API keys")');
    await page.waitForURL(/\/keys$/);
    // The account's two test-mode keys, masked; the secret one has been used (by this test's API calls).
    const rows = page.locator('tr.key');
    await expect(rows.count()).resolves.toBe(2);
    const secretRow = page.locator('tr.key', { hasText: `sk_test_…${owner.secret_key.slice(-4)}` });
    await expect(secretRow.locator('time').count()).resolves.toBe(2); // created + last used
    expect(await page.content()).not.toContain(owner.secret_key);

    await submit(page, '#create-key button[type=submit]');
    const value = (await page.locator('#new-key').textContent())!;
    expect(value).toMatch(/^sk_test_[0-9A-Za-z]{40}$/);
    await page.click('button[data-copy="new-key"]');
    // The clipboard answers asynchronously: wait for the button to say so.
    await page.locator('button[data-copy="new-key"]', { hasText: 'Copied' }).waitFor({ timeout: 10_000 });
    expect(await page.evaluate('navigator.clipboard.readText()')).toBe(value);
    await page.screenshot({ path: shot('key-created'), fullPage: true });
    expect((await stack.api(value, 'GET', '/v1/webhooks')).status).toBe(200);
    await page.reload();
    expect(await page.content()).not.toContain(value);

    await expect(page.locator('#new-key').count()).resolves.toBe(0);
    const row = page.locator('tr.key', { hasText: `…${value.slice(-4)}` });
    await Promise.all([page.waitForURL(/\/revoke$/), row.locator('a.revoke').click()]);
    await expect(page.locator('h1').textContent()).resolves.toContain(`…${value.slice(-4)}`);
    await submit(page, '#confirm-revoke');
    await expect(page.locator('.flash.ok').textContent()).resolves.toContain('revoked');
    await expect(row.getAttribute('data-state')).resolves.toBe('revoked');
    const refused = await stack.api(value, 'GET', '/v1/webhooks');
    expect(refused.status).toBe(401);
    await context.close();
  });

  it('shows events with their payload and every delivery attempt, and resends a failed delivery', async () => {
    const context = await browser.newContext();
    const page = await keyboardSignIn(context, 'owner@example.com');
    await page.click('nav a:has-text("Events")');
    await page.waitForURL(/\/dashboard\/events$/);
    await page.selectOption('#type', 'order.created');
    await submit(page, '#filter button[type=submit]');
    expect(new URL(page.url()).searchParams.get('type')).toBe('order.created');
    const rows = page.locator('tr.event');
    expect(await rows.count()).toBeGreaterThanOrEqual(1);
    expect(await page.locator('tr.event[data-type]:not([data-type="order.created"])').count()).toBe(0);
    await page.screenshot({ path: shot('events'), fullPage: true });

    await Promise.all([page.waitForURL(/\/dashboard\/events\/evt_/), rows.first().locator('a').click()]);
    const payload = JSON.parse((await page.locator('#payload').textContent())!);
    expect(payload).toMatchObject({ type: 'order.created', data: { id: orderId } });
    const delivery = page.locator('article.delivery').first();
    await expect(delivery.getAttribute('data-status')).resolves.toBe('failed');
    await expect(delivery.locator('tr.attempt').count()).resolves.toBe(6);
    const firstAttempt = (await delivery.locator('tr.attempt').first().textContent())!;
    expect(firstAttempt).toContain('HTTP 500');
    expect(firstAttempt).toMatch(/\d+ ms/);
    expect(firstAttempt).toContain('receiver down');
    await page.screenshot({ path: shot('event'), fullPage: true });

    // The receiver recovers (and the endpoint is re-enabled); one click resends.
    failing.reply = () => ({ status: 200, body: 'thanks' });
    await must(owner.secret_key, 'POST', `/v1/webhooks/${endpointId}/enable`);
    const before = failing.received.length;
    await submit(page, 'article.delivery button:has-text("Resend now")');
    await expect(page.locator('.flash.ok').textContent()).resolves.toContain('is being sent again');
    const got = await failing.waitFor(before + 1);
    expect(JSON.parse(got.at(-1)!.body).data.id).toBe(orderId);
    await until('the resent delivery to show succeeded', async () => {
      await page.reload();
      return (await delivery.getAttribute('data-status')) === 'succeeded';
    });
    await expect(delivery.locator('tr.attempt').count()).resolves.toBe(7);
    expect(await delivery.locator('tr.attempt').last().textContent()).toContain('thanks');

    // The whole event again: a new delivery to each subscribed endpoint.
    const eventId = payload.id as string;
    const count = failing.received.length;
    await submit(page, '#resend-event button[type=submit]');
    await expect(page.locator('.flash.ok').textContent()).resolves.toContain('1 new delivery');
    const again = await failing.waitFor(count + 1);
    expect(JSON.parse(again.at(-1)!.body).id).toBe(eventId);
    await context.close();
  });

  it("charts an endpoint's last 24 hours, sends a test event, and edits its events and description", async () => {
    const context = await browser.newContext();
    const page = await keyboardSignIn(context, 'owner@example.com');
    await page.goto(`${stack.baseUrl}/dashboard/settings/api/webhooks/${endpointId}`);
    const bars = page.locator('svg.chart g.bar');
    await expect(bars.count()).resolves.toBe(24);
    const last = bars.last();
    const failed = Number(await last.getAttribute('data-failed'));
    const succeeded = Number(await last.getAttribute('data-succeeded'));
    // At least the six failed attempts of the first delivery and the resend's success (an hour
    // boundary may split them, so the last two hours are summed).
    const prev = bars.nth(22);
    expect(failed + Number(await prev.getAttribute('data-failed'))).toBeGreaterThanOrEqual(6);
    expect(succeeded + Number(await prev.getAttribute('data-succeeded'))).toBeGreaterThanOrEqual(1);
    await expect(page.locator('#success-rate').textContent()).resolves.toMatch(/^\d+(\.\d)?%$/);
    await expect(page.locator('#latency [data-p="50"]').textContent()).resolves.toMatch(/^\d+ ms$/);
    await page.screenshot({ path: shot('endpoint'), fullPage: true });

    const before = failing.received.length;
    await page.selectOption('#test-type', 'order.created');
    await submit(page, '#send-test button[type=submit]');
    await expect(page.locator('.flash.ok').textContent()).resolves.toContain('Test event');
    const got = await failing.waitFor(before + 1);
    expect(JSON.parse(got.at(-1)!.body).type).toBe('order.created');

    await page.goto(`${stack.baseUrl}/dashboard/settings/api/webhooks/${endpointId}`);
    await page.check('#edit-endpoint input[value="payment.completed"]');
    await page.fill('#edit-description', 'shop backend, edited');
    await submit(page, '#edit-endpoint button[type=submit]');
    await expect(page.locator('.flash.ok').textContent()).resolves.toContain('saved');
    const ep = await must(owner.secret_key, 'GET', `/v1/webhooks/${endpointId}`);
    expect(ep.events).toEqual(['order.created', 'payment.completed']);
    expect(ep.description).toBe('shop backend, edited');
    await context.close();
  });

  it('shortens the test-mode retry schedule and resets it', async () => {
    const context = await browser.newContext();
    const page = await keyboardSignIn(context, 'owner@example.com');
    await page.fill('#retry_schedule', '1s, 2s');
    await submit(page, '#retry-form button[type=submit].primary');
    await expect(page.locator('.flash.ok').textContent()).resolves.toContain('1s, 2s');
    await expect(page.locator('#retry-schedule').textContent()).resolves.toContain(
      "this account's test-mode schedule",
    );
    expect(await must(owner.secret_key, 'GET', '/v1/webhook_settings')).toMatchObject({
      retry_schedule: ['1s', '2s'],
      custom: true,
    });
    await page.fill('#retry_schedule', 'soon');
    await submit(page, '#retry-form button[type=submit].primary');
    await expect(page.locator('.flash.error').textContent()).resolves.toContain(
      'The retry schedule was not saved',
    );
    await submit(page, '#retry-form button[name=reset]');
    expect((await must(owner.secret_key, 'GET', '/v1/webhook_settings')).custom).toBe(false);
    await context.close();
  });

  it('fits a phone screen: no sideways scrolling, the mode switch and navigation in reach', async () => {
    const context = await browser.newContext({
      viewport: { width: 375, height: 740 },
      isMobile: true,
      hasTouch: true,
    });
    const page = await keyboardSignIn(context, 'owner@example.com');
    for (const path of [
      '/dashboard/settings/api',
      '/dashboard/settings/api/keys',
      '/dashboard/events',
      `/dashboard/settings/api/webhooks/${endpointId}`,
    ]) {
      await page.goto(`${stack.baseUrl}${path}`);
      const width = await page.evaluate<number>('document.documentElement.scrollWidth');
      expect(width, path).toBeLessThanOrEqual(375);
      await expect(page.locator('#switch-mode').isVisible()).resolves.toBe(true);
      await page.screenshot({
        path: shot(`phone-${path.split('/').filter(Boolean).at(-1)}`),
        fullPage: true,
      });
    }
    await context.close();
  });

  it('shows a delivery to a deleted endpoint as such, with nothing to resend', async () => {
    // As an ended `mcs listen` session leaves it: a delivery made, then its endpoint deleted.
    const brief = await receiver();
    const gone = await must(owner.secret_key, 'POST', '/v1/webhooks', {
      url: brief.url,
      events: ['order.created'],
    });
    await newOrder(owner.secret_key);
    const eventId = JSON.parse((await brief.waitFor(1))[0]!.body).id as string;
    await must(owner.secret_key, 'DELETE', `/v1/webhooks/${gone.id}`);

    const context = await browser.newContext();
    const page = await keyboardSignIn(context, 'owner@example.com');
    await page.goto(`${stack.baseUrl}/dashboard/events/${eventId}`);
    const deleted = page.locator('article.delivery', { hasText: gone.id });
    await expect(deleted.textContent()).resolves.toContain('(endpoint deleted)');
    await expect(deleted.locator('button').count()).resolves.toBe(0);
    await expect(deleted.locator('a').count()).resolves.toBe(0);
    // The endpoint that still exists keeps its link.
    const kept = page.locator('article.delivery', { hasText: endpointId });
    await expect(kept.locator(`a[href$="/webhooks/${endpointId}"]`).count()).resolves.toBe(1);
    await expect(kept.textContent()).resolves.not.toContain('(endpoint deleted)');
    await page.screenshot({ path: shot('event-deleted-endpoint'), fullPage: true });
    await context.close();
  });
});

describe("an owner's password replaced", () => {
  it('ends the sessions the old password signed in, on every gateway at once', async () => {
    const owner = await createOwner('replaced@example.com');
    const signIn = async (password: string) => {
      const res = await fetch(`${stack.baseUrl}/dashboard/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ email: 'replaced@example.com', password }),
        redirect: 'manual',
      });
      expect(res.status).toBe(303);
      return /mcs_session=([^;]+)/.exec(res.headers.get('set-cookie') ?? '')![1]!;
    };
    const settings = (token: string) =>
      fetch(`${stack.baseUrl}/dashboard/settings/api`, {
        headers: { cookie: `mcs_session=${token}` },
        redirect: 'manual',
      }).then((r) => r.status);
    const before = await signIn(PASSWORD);
    expect(await settings(before)).toBe(200);
    await mcs(['accounts', 'set-password', '--account', owner.id], 'another long pass phrase\n');
    await until('the old session ended', async () => (await settings(before)) === 303);
    expect(await settings(await signIn('another long pass phrase'))).toBe(200);
  });
});
