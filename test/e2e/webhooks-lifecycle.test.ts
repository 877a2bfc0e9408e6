// Webhook endpoints through the public API, against real HTTPS receivers and a real SMTP server:
// the retry schedule and endpoint health (spec 3.1, 6.2–6.4, docs/api.md, "Events and deliveries"), the one
// e-mail per unhealthy transition, re-enabling, resending, rotation, test events, updates and
// deletion, and GET /v1/events returning exactly what deliveries carried.
import {
  createTestCerts,
  type SmtpServer,
  type Stack,
  startSmtpServer,
  startStack,
  type TestCerts,
  until,
} from '@mcs/testkit';
import { verifyServiceSignature, verifyWebhook } from '@mcs/webhook-verify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accountApi, receiverPool, webhookTestEnv } from './account-api.ts';

const GAP_MS = 200;
let stack: Stack;
let smtp: SmtpServer;
let certs: TestCerts;
const { receiver, closeAll } = receiverPool(() => certs);
const { api, ok, newOrder, endpointAt, deliveriesOf } = accountApi(() => stack);

beforeAll(async () => {
  certs = createTestCerts();
  smtp = await startSmtpServer();
  stack = await startStack({
    env: { ...webhookTestEnv(certs, GAP_MS), SMTP_URL: smtp.url, MAIL_FROM: 'alerts@mcs.test' },
  });
});

afterAll(async () => {
  await stack?.stop();
  await closeAll();
  await smtp?.close();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('retries and endpoint health', () => {
  it('makes exactly 6 attempts on the schedule, turns unhealthy, e-mails once, then sends nothing', async () => {
    const email = `owner-${Date.now()}@example.com`;
    const keys = await stack.createAccount(email);
    const r = await receiver();
    r.reply = () => ({ status: 500, body: 'down for maintenance' });
    const ep = await endpointAt(keys, r.url);

    const first = await newOrder(keys.secret_key);
    const got = await r.waitFor(6, 15_000);
    const gaps = got.slice(1).map((g, i) => g.at - got[i]!.at);
    for (const gap of gaps) {
      expect(gap).toBeGreaterThanOrEqual(GAP_MS - 5);
      expect(gap).toBeLessThan(GAP_MS + 600);
    }
    console.info(`attempt gaps (ms, schedule ${GAP_MS} ms each): ${gaps.join(', ')}`);
    for (const g of got) {
      expect(JSON.parse(g.body).data.id).toBe(first.id);
      expect(verifyWebhook(ep.secret, g.body, g.headers).id).toBe(got[0]!.headers['webhook-id']);
    }

    // One e-mail, to the account's address, naming the endpoint and its URL (besides the one
    // early warning, sent when half the retries were spent: webhooks-controls.test.ts).
    const toOwner = () => smtp.messages.filter((m) => m.to.includes(email));
    const mails = () => toOwner().filter((m) => m.subject.includes('is unhealthy'));
    await until('the unhealthy e-mail', async () => mails().length === 1);
    expect(toOwner().filter((m) => m.subject.includes('is failing'))).toHaveLength(1);
    const m = mails()[0]!;
    expect(m.to).toEqual([email]);
    expect(m.from).toBe('alerts@mcs.test');
    expect(m.subject).toContain(ep.id);
    expect(m.subject).toContain(r.url);
    expect(m.messageId).toMatch(/^<ntf_[0-9a-z]+@mcs\.webhooks>$/);
    for (const s of [ep.id, r.url, 'HTTP 500', `POST /v1/webhooks/${ep.id}/enable`, 'Settings → API']) {
      expect(m.text).toContain(s);
    }

    const unhealthy = ok(await api(keys.secret_key, 'GET', `/v1/webhooks/${ep.id}`));
    expect(unhealthy).toMatchObject({ status: 'unhealthy', last_error: 'HTTP 500', secret: null });
    // failing_since is when the first failed attempt started.
    expect(Math.abs(new Date(unhealthy.failing_since).getTime() - got[0]!.at)).toBeLessThan(2_000);

    // Nothing more goes out: a new event is recorded as a skipped delivery.
    await newOrder(keys.secret_key);
    await sleep(4 * GAP_MS);
    expect(r.received).toHaveLength(6);
    const list = ok(await api(keys.secret_key, 'GET', `/v1/webhooks/${ep.id}/deliveries`));
    expect(list).toMatchObject({
      object: 'list',
      has_more: false,
      url: `/v1/webhooks/${ep.id}/deliveries`,
    });
    const [skipped, failed] = list.data as Array<Record<string, any>>;
    expect(skipped).toMatchObject({
      object: 'webhook_delivery',
      status: 'skipped',
      attempt_count: 0,
      attempts: [],
    });
    expect(failed).toMatchObject({
      object: 'webhook_delivery',
      webhook_endpoint: ep.id,
      event: got[0]!.headers['webhook-id'],
      event_type: 'order.created',
      status: 'failed',
      attempt_count: 6,
      next_attempt_at: null,
      livemode: false,
    });
    expect(failed!.id).toMatch(/^dlv_/);
    expect(failed!.attempts.map((a: any) => a.number)).toEqual([1, 2, 3, 4, 5, 6]);
    for (const a of failed!.attempts) {
      expect(a).toMatchObject({
        status_code: 500,
        error: 'HTTP 500',
        response_excerpt: 'down for maintenance',
      });
      expect(a.latency_ms).toBeGreaterThanOrEqual(0);
      expect(new Date(a.at).toISOString()).toBe(a.at);
    }

    // Resending is refused while unhealthy, with a clear error.
    const refused = await api(
      keys.secret_key,
      'POST',
      `/v1/webhooks/${ep.id}/deliveries/${failed!.id}/retry`,
    );
    expect(refused.status).toBe(400);
    expect(refused.json.error).toMatchObject({
      type: 'invalid_request_error',
      code: 'invalid_state_transition',
    });
    expect(refused.json.error.message).toContain(`/v1/webhooks/${ep.id}/enable`);

    // Re-enabled through the API: health detail cleared, new events flow again.
    r.reply = () => ({ status: 200, body: 'thanks' });
    const enabled = ok(await api(keys.secret_key, 'POST', `/v1/webhooks/${ep.id}/enable`));
    expect(enabled).toMatchObject({ id: ep.id, status: 'enabled', failing_since: null, last_error: null });
    const third = await newOrder(keys.secret_key);
    const [, , , , , , seventh] = await r.waitFor(7);
    expect(JSON.parse(seventh!.body).data.id).toBe(third.id);

    // The failed delivery and the skipped one can be resent now.
    const resent = ok(
      await api(keys.secret_key, 'POST', `/v1/webhooks/${ep.id}/deliveries/${failed!.id}/retry`),
    );
    expect(resent).toMatchObject({ id: failed!.id, object: 'webhook_delivery', status: 'pending' });
    ok(await api(keys.secret_key, 'POST', `/v1/webhooks/${ep.id}/deliveries/${skipped!.id}/retry`));
    await r.waitFor(9);
    const after = await until('every delivery to succeed', async () => {
      const data = await deliveriesOf(keys, ep.id);
      return data.every((d) => d.status === 'succeeded') && data;
    });
    const again = after.find((d) => d.id === failed!.id)!;
    expect(again.attempt_count).toBe(7);
    expect(again.attempts[6]).toMatchObject({
      number: 7,
      status_code: 200,
      error: null,
      response_excerpt: 'thanks',
    });
    expect(after.find((d) => d.id === skipped!.id)!.attempt_count).toBe(1);
    expect(mails()).toHaveLength(1);

    // A later transition is a new one, with its own e-mail.
    r.reply = () => ({ status: 503 });
    await newOrder(keys.secret_key);
    await until('a second unhealthy e-mail', async () => mails().length === 2);
    expect(mails()[1]!.messageId).not.toBe(m.messageId);
    await sleep(500);
    expect(mails()).toHaveLength(2);
    expect(toOwner()).toHaveLength(4); // and a warning before each
  });

  it('counts a time-out as a failed attempt and records it', async () => {
    const keys = await stack.createAccount();
    const r = await receiver();
    r.reply = (_req, i) => (i === 0 ? { hang: true } : { status: 204, body: '' });
    const ep = await endpointAt(keys, r.url);
    await newOrder(keys.secret_key);
    await r.waitFor(2, 10_000);
    const [d] = await until('the delivery to succeed', async () => {
      const data = await deliveriesOf(keys, ep.id);
      return data[0]?.status === 'succeeded' && data;
    });
    expect(d!.attempts[0]).toMatchObject({
      number: 1,
      status_code: null,
      error: 'timed out after 1000 ms',
    });
    expect(d!.attempts[0].latency_ms).toBeGreaterThanOrEqual(990);
    expect(d!.attempts[1]).toMatchObject({ number: 2, status_code: 204, error: null });
  });
});

describe('endpoint management', () => {
  it('rotates the secret: new deliveries verify with the new one only', async () => {
    const keys = await stack.createAccount();
    const r = await receiver();
    const ep = await endpointAt(keys, r.url);
    await newOrder(keys.secret_key);
    const [before] = await r.waitFor(1);
    expect(
      verifyServiceSignature(ep.secret, before!.body, before!.headers['x-service-signature'] as string),
    ).toBe(true);

    const rotated = ok(await api(keys.secret_key, 'POST', `/v1/webhooks/${ep.id}/rotate_secret`));
    expect(rotated).toMatchObject({ id: ep.id, object: 'webhook_endpoint', status: 'enabled' });
    expect(rotated.secret).toMatch(/^whsec_[A-Za-z0-9+/]{32,}={0,2}$/);
    expect(rotated.secret).not.toBe(ep.secret);
    expect(ok(await api(keys.secret_key, 'GET', `/v1/webhooks/${ep.id}`)).secret).toBeNull();

    await newOrder(keys.secret_key);
    const [, next] = await r.waitFor(2);
    expect(verifyWebhook(rotated.secret, next!.body, next!.headers).type).toBe('order.created');
    expect(
      verifyServiceSignature(ep.secret, next!.body, next!.headers['x-service-signature'] as string),
    ).toBe(false);
    expect(() => verifyWebhook(ep.secret, next!.body, next!.headers)).toThrow();
  });

  it('sends a test event to that endpoint only, outside the event log', async () => {
    const keys = await stack.createAccount();
    const r = await receiver();
    const other = await receiver();
    const ep = await endpointAt(keys, r.url, { events: ['order.updated', 'order.created'] });
    await endpointAt(keys, other.url, { events: ['*'] });

    const sent = ok(await api(keys.secret_key, 'POST', `/v1/webhooks/${ep.id}/test`));
    expect(sent).toMatchObject({
      object: 'webhook_delivery',
      webhook_endpoint: ep.id,
      event_type: 'order.updated',
      status: 'pending',
    });
    const [got] = await r.waitFor(1);
    const event = verifyWebhook(ep.secret, got!.body, got!.headers) as Record<string, any>;
    expect(event).toMatchObject({
      id: sent.event,
      object: 'event',
      type: 'order.updated',
      livemode: false,
    });
    expect(event.data).toMatchObject({ object: 'order', status: 'paid', currency: 'EUR', livemode: false });
    expect(event.data.id).toMatch(/^ord_/);

    const typed = ok(
      await api(keys.secret_key, 'POST', `/v1/webhooks/${ep.id}/test`, { type: 'conversation.created' }),
    );
    const [, second] = await r.waitFor(2);
    expect(JSON.parse(second!.body)).toMatchObject({
      id: typed.event,
      type: 'conversation.created',
      data: { object: 'conversation' },
    });
    const bad = await api(keys.secret_key, 'POST', `/v1/webhooks/${ep.id}/test`, {
      type: 'order.exploded',
    });
    expect(bad.status).toBe(400);
    expect(bad.json.error).toMatchObject({ code: 'invalid_value', param: 'type' });

    await until('every delivery to succeed', async () =>
      (await deliveriesOf(keys, ep.id)).every((d) => d.status === 'succeeded'),
    );
    expect((await api(keys.secret_key, 'GET', `/v1/events/${sent.event}`)).status).toBe(404);
    expect(ok(await api(keys.secret_key, 'GET', '/v1/events')).data).toEqual([]);
    await sleep(300);
    expect(other.received).toHaveLength(0);
  });

  it('updates, disables, re-enables and deletes an endpoint', async () => {
    const keys = await stack.createAccount();
    const a = await receiver();
    const b = await receiver();
    const ep = await endpointAt(keys, a.url);

    const updated = ok(
      await api(keys.secret_key, 'POST', `/v1/webhooks/${ep.id}`, {
        url: b.url,
        events: ['order.created', 'order.updated'],
        description: 'moved',
      }),
    );
    expect(updated).toMatchObject({
      url: b.url,
      events: ['order.created', 'order.updated'],
      description: 'moved',
      status: 'enabled',
    });
    const http = await api(keys.secret_key, 'POST', `/v1/webhooks/${ep.id}`, {
      url: 'http://example.com/hook',
    });
    expect(http.status).toBe(400);
    expect(http.json.error).toMatchObject({ code: 'invalid_url', param: 'url' });
    const creds = await api(keys.secret_key, 'POST', `/v1/webhooks/${ep.id}`, {
      url: 'https://u:p@example.com/',
    });
    expect(creds.json.error).toMatchObject({ code: 'invalid_url', param: 'url' });
    const badEvents = await api(keys.secret_key, 'POST', `/v1/webhooks/${ep.id}`, { events: ['nope'] });
    expect(badEvents.json.error).toMatchObject({ code: 'invalid_event_type', param: 'events' });

    const disabled = ok(await api(keys.secret_key, 'POST', `/v1/webhooks/${ep.id}`, { disabled: true }));
    expect(disabled.status).toBe('disabled');
    await newOrder(keys.secret_key);
    await sleep(500);
    expect(a.received).toHaveLength(0);
    expect(b.received).toHaveLength(0);
    const test = await api(keys.secret_key, 'POST', `/v1/webhooks/${ep.id}/test`);
    expect(test.json.error).toMatchObject({ code: 'invalid_state_transition' });

    const back = ok(
      await api(keys.secret_key, 'POST', `/v1/webhooks/${ep.id}`, { disabled: false, description: '' }),
    );
    expect(back).toMatchObject({ status: 'enabled', description: null });
    const order = await newOrder(keys.secret_key);
    const [got] = await b.waitFor(1);
    expect(JSON.parse(got!.body).data.id).toBe(order.id);

    const deleted = ok(await api(keys.secret_key, 'DELETE', `/v1/webhooks/${ep.id}`));
    expect(deleted).toEqual({ id: ep.id, object: 'webhook_endpoint', deleted: true });
    expect((await api(keys.secret_key, 'GET', `/v1/webhooks/${ep.id}`)).status).toBe(404);
    expect((await api(keys.secret_key, 'DELETE', `/v1/webhooks/${ep.id}`)).status).toBe(404);
    expect(ok(await api(keys.secret_key, 'GET', '/v1/webhooks')).data).toEqual([]);
    await newOrder(keys.secret_key);
    await sleep(300);
    expect(b.received).toHaveLength(1);
  });

  it('keeps accounts and modes apart', async () => {
    const owner = await stack.createAccount();
    const stranger = await stack.createAccount();
    const ep = await endpointAt(owner, 'https://localhost:9/none');
    for (const [method, path] of [
      ['GET', `/v1/webhooks/${ep.id}`],
      ['POST', `/v1/webhooks/${ep.id}`],
      ['DELETE', `/v1/webhooks/${ep.id}`],
      ['POST', `/v1/webhooks/${ep.id}/enable`],
      ['POST', `/v1/webhooks/${ep.id}/rotate_secret`],
      ['POST', `/v1/webhooks/${ep.id}/test`],
      ['GET', `/v1/webhooks/${ep.id}/deliveries`],
    ] as const) {
      for (const key of [stranger.secret_key, owner.live_secret_key]) {
        const res = await api(key, method, path, method === 'POST' ? {} : undefined);
        expect(res.status, `${method} ${path}`).toBe(404);
        expect(res.json.error).toMatchObject({ type: 'not_found_error', code: 'resource_missing' });
      }
    }
    const pk = await api(owner.publishable_key, 'POST', `/v1/webhooks/${ep.id}/enable`);
    expect(pk.status).toBe(403);
  });
});

describe('GET /v1/events', () => {
  it('returns each event exactly as it was delivered', async () => {
    const keys = await stack.createAccount();
    const r = await receiver();
    await endpointAt(keys, r.url, { events: ['*'] });
    const o1 = await newOrder(keys.secret_key);
    const o2 = await newOrder(keys.secret_key);
    const got = await r.waitFor(2);
    for (const delivery of got) {
      const id = JSON.parse(delivery.body).id as string;
      const res = await api(keys.secret_key, 'GET', `/v1/events/${id}`);
      expect(res.status).toBe(200);
      expect(res.text).toBe(delivery.body); // byte for byte
    }

    const list = ok(await api(keys.secret_key, 'GET', '/v1/events'));
    expect(list).toMatchObject({ object: 'list', has_more: false, url: '/v1/events' });
    // Newest first.
    expect(list.data.map((e: any) => e.data.id)).toEqual([o2.id, o1.id]);
    const byId = new Map(got.map((d) => [JSON.parse(d.body).id, d.body]));
    for (const e of list.data) expect(JSON.stringify(e)).toBe(byId.get(e.id));

    const page = ok(await api(keys.secret_key, 'GET', '/v1/events?limit=1'));
    expect(page.has_more).toBe(true);
    const rest = ok(
      await api(keys.secret_key, 'GET', `/v1/events?limit=1&starting_after=${page.data[0].id}`),
    );
    expect(rest).toMatchObject({ has_more: false });
    expect(rest.data[0].data.id).toBe(o1.id);

    expect(ok(await api(keys.secret_key, 'GET', '/v1/events?type=order.created')).data).toHaveLength(2);
    expect(ok(await api(keys.secret_key, 'GET', '/v1/events?type=message.sent')).data).toEqual([]);
    const bad = await api(keys.secret_key, 'GET', '/v1/events?type=order.exploded');
    expect(bad.status).toBe(400);
    expect(bad.json.error).toMatchObject({ code: 'invalid_value', param: 'type' });

    // Publishable keys may not read events (they live in client-side code); other accounts and
    // the other mode see nothing.
    expect((await api(keys.publishable_key, 'GET', `/v1/events/${list.data[0].id}`)).status).toBe(403);
    const stranger = await stack.createAccount();
    expect((await api(stranger.secret_key, 'GET', `/v1/events/${list.data[0].id}`)).status).toBe(404);
    expect((await api(keys.live_secret_key, 'GET', `/v1/events/${list.data[0].id}`)).status).toBe(404);
    expect(ok(await api(stranger.secret_key, 'GET', '/v1/events')).data).toEqual([]);
    expect(ok(await api(keys.live_secret_key, 'GET', '/v1/events')).data).toEqual([]);
  });
});
