// Delivery controls beyond the spec (docs/api.md and the README), through the public API against real
// HTTPS receivers and a real SMTP server, with a short retry schedule: a 410 Gone answer disables
// the endpoint at once; 429/503 with Retry-After pause that endpoint (capped by the schedule's
// remaining span) and max_rate paces it, without slowing the others; the early-warning e-mail
// with failing_since and last_error; the operational events webhook_endpoint.* (signed, listed
// in GET /v1/events, only to endpoints naming them, never about the receiving endpoint); and the
// engine's invariants across a kill -9 of the webhooks service during a pause. Two webhooks
// replicas share the work throughout, so pauses and max_rate hold across processes.
import {
  type AccountKeys,
  createTestCerts,
  type SmtpServer,
  type Stack,
  startSmtpServer,
  startStack,
  type TestCerts,
  until,
} from '@mcs/testkit';
import { verifyWebhook } from '@mcs/webhook-verify';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accountApi, receiverPool, webhookTestEnv } from './account-api.ts';

/** Every retry waits GAP_MS: the schedule spans 5 × GAP_MS. */
const GAP_MS = 300;
const SPAN_MS = 5 * GAP_MS;
/** The early warning's time rule: 500 ms of failing (fires at attempt 3, before half the retries). */
const WARN_AFTER_MS = 500;
const OPERATIONAL = ['webhook_endpoint.unhealthy', 'webhook_endpoint.disabled', 'webhook_endpoint.enabled'];

let stack: Stack;
let smtp: SmtpServer;
let certs: TestCerts;
let db: pg.Client;
const { receiver, closeAll } = receiverPool(() => certs);
const { api, ok, newOrder, endpointAt, getEndpoint, deliveriesOf } = accountApi(() => stack);

beforeAll(async () => {
  certs = createTestCerts();
  smtp = await startSmtpServer();
  stack = await startStack({
    replicas: { webhooks: 2 },
    env: {
      ...webhookTestEnv(certs, GAP_MS),
      WEBHOOK_WARN_AFTER: `${WARN_AFTER_MS}ms`,
      SMTP_URL: smtp.url,
      MAIL_FROM: 'alerts@mcs.test',
    },
  });
  db = new pg.Client({ connectionString: stack.db.url });
  await db.connect();
});

afterAll(async () => {
  await db?.end();
  await stack?.stop();
  await closeAll();
  await smtp?.close();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** An account with an e-mail of its own, and its mails. */
async function account() {
  const email = `owner-${Date.now()}-${Math.random().toString(36).slice(2, 8)}@example.com`;
  const keys = await stack.createAccount(email);
  return { keys, mails: () => smtp.messages.filter((m) => m.to.includes(email)) };
}

/** A monitoring endpoint subscribed to the three operational types, and the events it got. */
async function monitor(keys: AccountKeys) {
  const r = await receiver();
  const ep = await endpointAt(keys, r.url, { events: OPERATIONAL });
  const events = () =>
    r.received.map((g) => {
      // Every operational delivery is signed like any other.
      expect(verifyWebhook(ep.secret, g.body, g.headers).id).toBe(g.headers['webhook-id']);
      return JSON.parse(g.body) as Record<string, any>;
    });
  return { r, ep, events };
}

describe('410 Gone', () => {
  it('disables the endpoint at once: one attempt, reason gone, one e-mail, an event; enable re-enables', async () => {
    const { keys, mails } = await account();
    const mon = await monitor(keys);
    const r = await receiver();
    r.reply = () => ({ status: 410, body: 'this receiver is gone' });
    const ep = await endpointAt(keys, r.url);
    expect(ep.json).toMatchObject({ disable_on_gone: true, disabled_reason: null, max_rate: null });

    const order = await newOrder(keys.secret_key);
    await r.waitFor(1);
    const disabled = await until('the endpoint to be disabled', async () => {
      const e = await getEndpoint(keys, ep.id);
      return e.status === 'disabled' && e;
    });
    expect(disabled).toMatchObject({ disabled_reason: 'gone', last_error: 'HTTP 410', secret: null });

    // No retries: the delivery failed with its one attempt, and new events are not recorded for it.
    await newOrder(keys.secret_key);
    await sleep(3 * GAP_MS);
    expect(r.received).toHaveLength(1);
    const list = await deliveriesOf(keys, ep.id);
    expect(list).toHaveLength(1);
    expect(list[0]).toMatchObject({ status: 'failed', attempt_count: 1, next_attempt_at: null });
    expect(list[0]!.attempts[0]).toMatchObject({
      status_code: 410,
      response_excerpt: 'this receiver is gone',
    });
    expect(JSON.parse(r.received[0]!.body).data.id).toBe(order.id);

    // One e-mail, saying why and how to re-enable.
    await until('the disabled e-mail', async () => mails().length === 1);
    const m = mails()[0]!;
    expect(m.subject).toContain(ep.id);
    expect(m.subject).toContain('410 Gone');
    for (const s of [r.url, `POST /v1/webhooks/${ep.id}/enable`, 'disable_on_gone'])
      expect(m.text).toContain(s);

    // The operational event: to the monitor, signed, the endpoint without its secret; listed.
    await mon.r.waitFor(1);
    const [event] = mon.events();
    expect(event).toMatchObject({
      object: 'event',
      type: 'webhook_endpoint.disabled',
      livemode: false,
      data: {
        id: ep.id,
        object: 'webhook_endpoint',
        status: 'disabled',
        disabled_reason: 'gone',
        secret: null,
      },
    });
    const listed = ok(await api(keys.secret_key, 'GET', '/v1/events?type=webhook_endpoint.disabled'));
    expect(listed.data.map((e: any) => e.id)).toEqual([event!.id]);
    const one = await api(keys.secret_key, 'GET', `/v1/events/${event!.id}`);
    expect(one.text).toBe(mon.r.received[0]!.body); // byte for byte

    // Re-enabled through the API: reason cleared, the enabled event, new events flow again.
    r.reply = () => ({ status: 200, body: 'back' });
    const enabled = ok(await api(keys.secret_key, 'POST', `/v1/webhooks/${ep.id}/enable`));
    expect(enabled).toMatchObject({
      status: 'enabled',
      disabled_reason: null,
      failing_since: null,
      last_error: null,
    });
    await mon.r.waitFor(2);
    expect(mon.events()[1]).toMatchObject({
      type: 'webhook_endpoint.enabled',
      data: { id: ep.id, status: 'enabled', disabled_reason: null },
    });
    const third = await newOrder(keys.secret_key);
    const got = await r.waitFor(2);
    expect(JSON.parse(got[1]!.body).data.id).toBe(third.id);
    await sleep(300);
    expect(mails()).toHaveLength(1);
  });

  it('with disable_on_gone: false, a 410 is retried like any other failure', async () => {
    const { keys } = await account();
    const r = await receiver();
    r.reply = () => ({ status: 410 });
    const ep = await endpointAt(keys, r.url, { disable_on_gone: false });
    expect(ep.json.disable_on_gone).toBe(false);
    await newOrder(keys.secret_key);
    await r.waitFor(6, 15_000);
    const e = await until('the endpoint to turn unhealthy', async () => {
      const got = await getEndpoint(keys, ep.id);
      return got.status === 'unhealthy' && got;
    });
    expect(e).toMatchObject({ disabled_reason: null, last_error: 'HTTP 410' });
    await sleep(2 * GAP_MS);
    expect(r.received).toHaveLength(6);
  });

  it('a manual disable has reason manual, sends the event but no e-mail', async () => {
    const { keys, mails } = await account();
    const mon = await monitor(keys);
    const r = await receiver();
    const ep = await endpointAt(keys, r.url);
    const off = ok(await api(keys.secret_key, 'POST', `/v1/webhooks/${ep.id}`, { disabled: true }));
    expect(off).toMatchObject({ status: 'disabled', disabled_reason: 'manual' });
    await mon.r.waitFor(1);
    expect(mon.events()[0]).toMatchObject({
      type: 'webhook_endpoint.disabled',
      data: { id: ep.id, disabled_reason: 'manual' },
    });
    // Disabling again changes nothing and records no second event.
    ok(await api(keys.secret_key, 'POST', `/v1/webhooks/${ep.id}`, { disabled: true }));
    const on = ok(await api(keys.secret_key, 'POST', `/v1/webhooks/${ep.id}`, { disabled: false }));
    expect(on).toMatchObject({ status: 'enabled', disabled_reason: null });
    await mon.r.waitFor(2);
    await sleep(300);
    expect(mon.events().map((e) => e.type)).toEqual([
      'webhook_endpoint.disabled',
      'webhook_endpoint.enabled',
    ]);
    expect(mails()).toHaveLength(0);
  });
});

describe('Retry-After and max_rate', () => {
  it('a 429 with Retry-After (seconds) pauses that endpoint, not others, without spending retries', async () => {
    const { keys } = await account();
    const slow = await receiver();
    slow.reply = (_req, i) => (i === 0 ? { status: 429, headers: { 'retry-after': '1' } } : { status: 200 });
    const fast = await receiver();
    const paused = await endpointAt(keys, slow.url);
    await endpointAt(keys, fast.url);

    const first = await newOrder(keys.secret_key);
    const [refused] = await slow.waitFor(1);
    await until(
      'a first attempt at the paused endpoint',
      async () => (await deliveriesOf(keys, paused.id))[0]?.attempt_count === 1,
    );
    // During the pause: a new event goes to the other endpoint at once, and waits for this one.
    const second = await newOrder(keys.secret_key);
    const created = Date.now();
    const fastGot = await fast.waitFor(2);
    expect(fastGot[1]!.at - created).toBeLessThan(900);
    const got = await slow.waitFor(3, 10_000);
    for (const g of got.slice(1)) expect(g.at - refused!.at).toBeGreaterThanOrEqual(1_000 - 20);
    expect(
      got
        .slice(1)
        .map((g) => JSON.parse(g.body).data.id)
        .sort(),
    ).toEqual([first.id, second.id].sort());

    const list = await until('every delivery to the paused endpoint to succeed', async () => {
      const l = await deliveriesOf(keys, paused.id);
      return l.every((d) => d.status === 'succeeded') && l;
    });
    const orderOf = new Map(got.map((g) => [JSON.parse(g.body).id, JSON.parse(g.body).data.id]));
    const byOrder = (id: string) => list.find((d) => orderOf.get(d.event) === id)!;
    // The refused one spent one retry; the held-back one spent none.
    expect(byOrder(first.id).attempt_count).toBe(2);
    expect(byOrder(first.id).attempts[0]).toMatchObject({ status_code: 429 });
    expect(byOrder(second.id).attempt_count).toBe(1);
  });

  it('a hostile Retry-After (HTTP date far ahead, or huge seconds) is capped by the schedule’s remaining span', async () => {
    const { keys } = await account();
    const r = await receiver();
    r.reply = (_req, i) =>
      i === 0
        ? { status: 503, headers: { 'retry-after': 'Fri, 31 Dec 2099 23:59:59 GMT' } }
        : i === 1
          ? { status: 429, headers: { 'retry-after': '86400' } }
          : { status: 200 };
    const ep = await endpointAt(keys, r.url);
    await newOrder(keys.secret_key);
    const got = await r.waitFor(3, 15_000);
    const gaps = got.slice(1).map((g, i) => g.at - got[i]!.at);
    console.info(
      `gaps after a capped Retry-After (ms; spans ${SPAN_MS} then ${SPAN_MS - GAP_MS}): ${gaps.join(', ')}`,
    );
    // Attempt 1 (run 1): at most the whole span; attempt 2 (run 2): the span less one delay.
    expect(gaps[0]).toBeGreaterThanOrEqual(SPAN_MS - 20);
    expect(gaps[0]).toBeLessThan(SPAN_MS + 2_500);
    expect(gaps[1]).toBeGreaterThanOrEqual(SPAN_MS - GAP_MS - 20);
    expect(gaps[1]).toBeLessThan(SPAN_MS - GAP_MS + 2_500);
    const [d] = await until('the delivery to succeed', async () => {
      const l = await deliveriesOf(keys, ep.id);
      return l[0]?.status === 'succeeded' && l;
    });
    expect(d!.attempts.map((a: any) => a.status_code)).toEqual([503, 429, 200]);
  });

  it('max_rate paces deliveries to that endpoint across replicas; an unlimited one is not slowed', async () => {
    const { keys } = await account();
    const limited = await receiver();
    const free = await receiver();
    const rate = 4;
    const ep = await endpointAt(keys, limited.url, { max_rate: rate });
    expect(ep.json.max_rate).toBe(rate);
    await endpointAt(keys, free.url);
    const n = 12;
    const started = Date.now();
    await Promise.all(Array.from({ length: n }, () => newOrder(keys.secret_key)));
    const freeGot = await free.waitFor(n);
    const got = await limited.waitFor(n, 20_000);
    const gaps = got.slice(1).map((g, i) => g.at - got[i]!.at);
    const span = got.at(-1)!.at - got[0]!.at;
    console.info(
      `max_rate ${rate}/s: ${n} deliveries over ${span} ms (gaps ${gaps.join(', ')}); unlimited: all in ${freeGot.at(-1)!.at - started} ms`,
    );
    // At most `rate` starts per second: start slots 1000/rate ms apart, shared by the two
    // replicas. Arrivals differ from starts by network and event-loop jitter (and the first
    // request pays the TLS handshake): on a loaded machine two arrivals came 22 ms apart from
    // slots 250 ms apart. So the rate is held over spans (the whole run, and every second of
    // it, one arrival of slack), not between two neighbours. The whole run is measured from one
    // of the second to fourth arrivals, whichever was nearest its slot: the first pays the TLS
    // handshake, which under load took longer than the slack and shortened a run from its first
    // arrival to 2,535 ms of the 2,750 its slots span; on a VM at half speed the second came
    // 108 ms late (2,392 of 2,500 ms from it). A late arrival only shortens what is measured from
    // it, so the best of three still shows at least 9 of the 11 gaps paced.
    const paced = [1, 2, 3].map((k) => got.at(-1)!.at - got[k]!.at - ((n - 1 - k) * 1000) / rate);
    expect(Math.max(...paced), `ms past each run's slots: ${paced.join(', ')}`).toBeGreaterThanOrEqual(-100);
    expect(freeGot.at(-1)!.at - started).toBeLessThan(span);
    // Every second from the second arrival on: the first, late by its TLS handshake, bunched with
    // the next ones on a loaded machine (arrivals 0, 51, 207, 489, 711, 974 ms from it).
    for (let i = 1; i < got.length; i++) {
      const inWindow = got.filter((g) => g.at >= got[i]!.at && g.at < got[i]!.at + 1000).length;
      expect(inWindow).toBeLessThanOrEqual(rate + 1);
    }
    // Each delivered once.
    expect(new Set(got.map((g) => g.headers['webhook-id'])).size).toBe(n);

    // 0 removes the limit.
    const unlimited = ok(await api(keys.secret_key, 'POST', `/v1/webhooks/${ep.id}`, { max_rate: 0 }));
    expect(unlimited.max_rate).toBeNull();
    const bad = await api(keys.secret_key, 'POST', `/v1/webhooks/${ep.id}`, { max_rate: -1 });
    expect(bad.status).toBe(400);
    expect(bad.json.error).toMatchObject({ type: 'invalid_request_error', param: 'max_rate' });
  });
});

describe('early warning and operational events', () => {
  it('warns once before unhealthy, shows failing_since and last_error; unhealthy goes to monitors only', async () => {
    const { keys, mails } = await account();
    const mon = await monitor(keys);
    const star = await receiver();
    await endpointAt(keys, star.url, { events: ['*'] });
    const r = await receiver();
    r.reply = () => ({ status: 500, body: 'broken' });
    // Subscribed to its own unhealthy event too: it never gets the event about itself.
    const ep = await endpointAt(keys, r.url, { events: ['order.created', 'webhook_endpoint.unhealthy'] });

    await newOrder(keys.secret_key);
    const [firstTry] = await r.waitFor(1);
    const failing = await until('failing_since to be set', async () => {
      const e = await getEndpoint(keys, ep.id);
      return e.failing_since !== null && e;
    });
    expect(failing).toMatchObject({ status: 'enabled', last_error: 'HTTP 500' });
    expect(Math.abs(new Date(failing.failing_since).getTime() - firstTry!.at)).toBeLessThan(2_000);

    const subjects = () => mails().map((m) => m.subject);
    await until('the unhealthy e-mail', async () => subjects().some((s) => s.includes('is unhealthy')));
    await sleep(500);
    // The warning first (WARN_AFTER_MS into the stretch: attempt 3), then unhealthy; one each.
    expect(subjects()).toEqual([
      `Webhook endpoint ${ep.id} is failing (${r.url})`,
      `Webhook endpoint ${ep.id} is unhealthy (${r.url})`,
    ]);
    const warning = mails()[0]!;
    expect(warning.text).toContain('HTTP 500');
    expect(warning.text).toMatch(/3 attempts/);

    // The unhealthy event reached the monitor, not the "*" endpoint, not the endpoint itself.
    await mon.r.waitFor(1);
    expect(mon.events()[0]).toMatchObject({
      type: 'webhook_endpoint.unhealthy',
      data: { id: ep.id, status: 'unhealthy', last_error: 'HTTP 500', secret: null },
    });
    expect(star.received.map((g) => JSON.parse(g.body).type)).toEqual(['order.created']);
    expect(r.received.every((g) => JSON.parse(g.body).type === 'order.created')).toBe(true);
    expect(r.received).toHaveLength(6);
    const types = ok(await api(keys.secret_key, 'GET', '/v1/events?limit=100')).data.map((e: any) => e.type);
    expect(types).toContain('webhook_endpoint.unhealthy');
    // The monitor's own deliveries are listed like any other.
    const [md] = await deliveriesOf(keys, mon.ep.id);
    expect(md).toMatchObject({ event_type: 'webhook_endpoint.unhealthy', status: 'succeeded' });

    // Operational types are subscribable by name only; unknown names are refused.
    const bad = await api(keys.secret_key, 'POST', '/v1/webhooks', {
      url: r.url,
      events: ['webhook_endpoint.nope'],
    });
    expect(bad.status).toBe(400);
    expect(bad.json.error).toMatchObject({ code: 'invalid_event_type', param: 'events' });
  });

  it('a success ends the failing stretch: a later stretch gets its own warning', async () => {
    const { keys, mails } = await account();
    const r = await receiver();
    // Fails 3 attempts (warned at the third), then succeeds; then the next event fails again.
    r.reply = (_req, i) => (i < 3 || i >= 4 ? { status: 500 } : { status: 200 });
    const ep = await endpointAt(keys, r.url);
    await newOrder(keys.secret_key);
    await r.waitFor(4);
    await until(
      'failing_since to be cleared',
      async () => (await getEndpoint(keys, ep.id)).failing_since === null,
    );
    await until('the failing e-mail', async () => mails().length === 1);
    expect(mails()[0]!.subject).toContain('is failing');
    await newOrder(keys.secret_key);
    await until('all three e-mails', async () => mails().length === 3, 20_000);
    expect(mails().map((m) => m.subject.split(' ').slice(-2, -1)[0])).toEqual([
      'failing',
      'failing',
      'unhealthy',
    ]);
  });
});

describe('invariants across a crash', () => {
  it('a pause survives kill -9 of the webhooks service: each delivery once, after the pause, no duplicate rows', async () => {
    const { keys } = await account();
    const r = await receiver();
    r.reply = (_req, i) => (i === 0 ? { status: 503, headers: { 'retry-after': '1' } } : { status: 200 });
    const ep = await endpointAt(keys, r.url);
    const first = await newOrder(keys.secret_key);
    const [refused] = await r.waitFor(1);
    await until('a first attempt', async () => (await deliveriesOf(keys, ep.id))[0]?.attempt_count === 1);
    await stack.kill('webhooks', 'SIGKILL');
    const second = await newOrder(keys.secret_key);
    await stack.restart('webhooks');
    const got = await r.waitFor(3, 20_000);
    for (const g of got.slice(1)) expect(g.at - refused!.at).toBeGreaterThanOrEqual(1_000 - 20);
    await sleep(1_500);
    expect(r.received).toHaveLength(3);
    expect(
      got
        .slice(1)
        .map((g) => JSON.parse(g.body).data.id)
        .sort(),
    ).toEqual([first.id, second.id].sort());
    const { rows } = await db.query(
      `select event_id, count(*)::int as n from webhooks.deliveries where endpoint_id = $1 group by event_id`,
      [ep.id],
    );
    expect(rows.map((x) => x.n)).toEqual([1, 1]);
    const attempts = await db.query(
      `select delivery_id, number, count(*)::int as n from webhooks.attempts
        where delivery_id in (select id from webhooks.deliveries where endpoint_id = $1)
        group by delivery_id, number having count(*) > 1`,
      [ep.id],
    );
    expect(attempts.rows).toEqual([]);
  });
});
