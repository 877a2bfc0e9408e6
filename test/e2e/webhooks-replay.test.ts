// Sending again what an endpoint missed, through the public API against real HTTPS receivers:
// recovery with replay (POST /v1/webhooks/{id}/recover, its progress, auto_recover's probe),
// event resends (one event, and a bulk resend by time range and type, rate-limited), and
// ordered delivery per resource. Every re-send is checked at the receiver (signature, event id)
// and in the delivery list (no duplicate rows).
import {
  type AccountKeys,
  createTestCerts,
  type Receiver,
  type Stack,
  startStack,
  type TestCerts,
  until,
} from '@mcs/testkit';
import { verifyWebhook } from '@mcs/webhook-verify';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accountApi, receiverPool, webhookTestEnv } from './account-api.ts';

const GAP_MS = 200;
let stack: Stack;
let certs: TestCerts;
const { receiver, closeAll } = receiverPool(() => certs);
const { api, ok, newOrder, endpointAt, deliveriesOf } = accountApi(() => stack);

beforeAll(async () => {
  certs = createTestCerts();
  stack = await startStack({
    env: {
      ...webhookTestEnv(certs, GAP_MS),
      // Slow enough that a replay of a few deliveries is seen running.
      WEBHOOK_REPLAY_RATE: '2',
      WEBHOOK_PROBE_INTERVAL: '300ms',
    },
  });
});

afterAll(async () => {
  await stack?.stop();
  await closeAll();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const eventIds = (got: { body: string }[]) => got.map((g) => JSON.parse(g.body).id as string);

/** Makes `r` fail until the endpoint turns unhealthy; returns the failed order's event id. */
async function makeUnhealthy(
  keys: AccountKeys,
  r: Receiver,
  epId: string,
  reply: Receiver['reply'] = () => ({ status: 500, body: 'down' }),
) {
  const before = r.received.length;
  r.reply = reply;
  await newOrder(keys.secret_key);
  await r.waitFor(before + 6, 15_000);
  await until(
    'the endpoint to turn unhealthy',
    async () => ok(await api(keys.secret_key, 'GET', `/v1/webhooks/${epId}`)).status === 'unhealthy',
  );
}

describe('recovery with replay', () => {
  it('re-enables the endpoint and re-sends what failed or was skipped since a time, with progress', async () => {
    const keys = await stack.createAccount();
    const r = await receiver();
    const ep = await endpointAt(keys, r.url);
    expect(ep.json).toMatchObject({ ordering: 'none', auto_recover: false });

    // One success first: it is not sent again.
    await newOrder(keys.secret_key);
    await r.waitFor(1);
    await makeUnhealthy(keys, r, ep.id);
    const failedEvent = JSON.parse(r.received.at(-1)!.body).id as string;
    await sleep(20);
    const cut = new Date().toISOString();
    await sleep(20);
    // Three events while unhealthy: recorded as skipped, nothing sent.
    for (let i = 0; i < 3; i++) await newOrder(keys.secret_key);
    await until(
      '3 skipped deliveries',
      async () => (await deliveriesOf(keys, ep.id)).filter((d) => d.status === 'skipped').length === 3,
    );
    const sent = r.received.length;
    expect(sent).toBe(7);

    // Bad input is refused clearly.
    const missing = await api(keys.secret_key, 'POST', `/v1/webhooks/${ep.id}/recover`, {});
    expect(missing.status).toBe(400);
    expect(missing.json.error).toMatchObject({ code: 'missing_required_field', param: 'since' });
    const garbled = await api(keys.secret_key, 'POST', `/v1/webhooks/${ep.id}/recover`, {
      since: 'yesterday',
    });
    expect(garbled.status).toBe(400);
    expect(garbled.json.error).toMatchObject({ code: 'invalid_type', param: 'since' });
    // Out of PostgreSQL's range or before 1970 (ids count from it): a clear 400, not a 500 or an empty replay.
    for (const [since, code] of [
      ['0000-01-01T00:00:00Z', 'invalid_value'],
      ['1969-12-31T00:00:00Z', 'invalid_value'],
      ['+010000-01-01T00:00:00Z', 'invalid_type'],
    ]) {
      const out = await api(keys.secret_key, 'POST', `/v1/webhooks/${ep.id}/recover`, { since });
      expect({ since, status: out.status, ...out.json.error }).toMatchObject({
        since,
        status: 400,
        code,
        param: 'since',
      });
    }
    const future = await api(keys.secret_key, 'POST', `/v1/webhooks/${ep.id}/recover`, {
      since: new Date(Date.now() + 60_000).toISOString(),
    });
    expect(future.status).toBe(400);
    expect(future.json.error).toMatchObject({ code: 'invalid_value', param: 'since' });
    expect((await api(keys.secret_key, 'POST', '/v1/webhooks/we_nope/recover', { since: cut })).status).toBe(
      404,
    );
    expect(await deliveriesOf(keys, ep.id).then((l) => l.filter((d) => d.status === 'skipped').length)).toBe(
      3,
    );

    // Since `cut`: the three skipped ones, not the failed one before it.
    r.reply = () => ({ status: 200, body: 'back' });
    const rec = ok(await api(keys.secret_key, 'POST', `/v1/webhooks/${ep.id}/recover`, { since: cut }));
    expect(rec).toMatchObject({
      object: 'recovery',
      webhook_endpoint: ep.id,
      since: cut,
      status: 'running',
      total: 3,
      livemode: false,
      completed_at: null,
    });
    expect(rec.id).toMatch(/^rcv_/);
    expect(ok(await api(keys.secret_key, 'GET', `/v1/webhooks/${ep.id}`))).toMatchObject({
      status: 'enabled',
      failing_since: null,
    });

    // Progress is visible while it runs (2 a second here), and it ends completed.
    const seen = new Set<number>();
    const done = await until('the recovery to complete', async () => {
      const now = ok(await api(keys.secret_key, 'GET', `/v1/webhooks/${ep.id}/recoveries/${rec.id}`));
      seen.add(now.queued);
      return now.status === 'completed' && now.deliveries.succeeded === 3 && now;
    });
    expect(done).toMatchObject({ object: 'recovery', id: rec.id, total: 3, queued: 3 });
    expect(done.deliveries).toEqual({ pending: 0, succeeded: 3, failed: 0, skipped: 0 });
    expect(new Date(done.completed_at).getTime()).toBeGreaterThanOrEqual(new Date(rec.created_at).getTime());
    expect(seen.size).toBeGreaterThan(1);

    const got = r.received.slice(sent);
    expect(got).toHaveLength(3);
    for (const g of got) expect(verifyWebhook(ep.secret, g.body, g.headers).type).toBe('order.created');
    const list = await deliveriesOf(keys, ep.id);
    // No new rows: 1 succeeded + 1 failed + 3 recovered.
    expect(list).toHaveLength(5);
    expect(new Set(list.map((d) => d.event)).size).toBe(5);
    expect(list.filter((d) => d.status === 'succeeded')).toHaveLength(4);
    expect(list.find((d) => d.event === failedEvent)).toMatchObject({ status: 'failed', attempt_count: 6 });
    expect(new Set(eventIds(got))).toEqual(
      new Set(
        list.filter((d) => d.attempt_count === 1 && d.event !== eventIds(r.received)[0]).map((d) => d.event),
      ),
    );
    expect((await api(keys.secret_key, 'GET', `/v1/webhooks/${ep.id}/recoveries/rcv_nope`)).status).toBe(404);

    // Again from before the failure: only the failed one is left to send.
    const again = ok(
      await api(keys.secret_key, 'POST', `/v1/webhooks/${ep.id}/recover`, {
        since: new Date(Date.now() - 60_000).toISOString(),
      }),
    );
    expect(again.total).toBe(1);
    const [last] = (await r.waitFor(sent + 4)).slice(sent + 3);
    expect(JSON.parse(last!.body).id).toBe(failedEvent);
    await until('every delivery to succeed', async () =>
      (await deliveriesOf(keys, ep.id)).every((d) => d.status === 'succeeded'),
    );
    expect(await deliveriesOf(keys, ep.id)).toHaveLength(5);
  });

  it('replays what arrived while the endpoint was disabled: what it subscribes to, once, never its own event', async () => {
    const keys = await stack.createAccount();
    const other = await stack.createAccount();
    const r = await receiver();
    const t0 = new Date(Date.now() - 1_000).toISOString();
    // Before the endpoint existed: never part of its backlog, whatever `since` says.
    const early = await newOrder(keys.secret_key);
    await sleep(20);
    const ep = await endpointAt(keys, r.url, { events: ['*', 'webhook_endpoint.disabled'] });
    const first = await newOrder(keys.secret_key);
    await r.waitFor(1);
    // Its success is recorded with the next group (WEBHOOK_RECORD_WINDOW): disabled before that,
    // the delivery would be skipped meanwhile (the straggler rule records it once the success
    // lands) and a recovery started in between would count it too, an at-least-once duplicate.
    // What this test is about is what arrived while the endpoint was disabled.
    await until('the first delivery recorded', async () => {
      const list = await deliveriesOf(keys, ep.id);
      return list.length === 1 && list[0]!.status === 'succeeded';
    });

    // Disabled by hand: fan-out records no delivery to it while it is.
    ok(await api(keys.secret_key, 'POST', `/v1/webhooks/${ep.id}`, { disabled: true }));
    const missed = [await newOrder(keys.secret_key), await newOrder(keys.secret_key)];
    // Another endpoint of the account goes disabled (an event E names) and enabled (one "*" does
    // not cover); other accounts and live mode have events of their own meanwhile.
    const peer = await endpointAt(keys, `${r.url}peer`, { events: ['order.updated'] });
    ok(await api(keys.secret_key, 'POST', `/v1/webhooks/${peer.id}`, { disabled: true }));
    ok(await api(keys.secret_key, 'POST', `/v1/webhooks/${peer.id}/enable`));
    await newOrder(other.secret_key);
    await newOrder(keys.live_secret_key);
    const log = await until('all 7 events in the log', async () => {
      const all = ok(await api(keys.secret_key, 'GET', '/v1/events?limit=100')).data as Array<
        Record<string, any>
      >;
      return all.length === 7 && all;
    });
    const typeOf = (type: string, about?: string) =>
      log.filter((e) => e.type === type && (about === undefined || e.data.id === about)).map((e) => e.id);
    const [peerDisabled] = typeOf('webhook_endpoint.disabled', peer.id);
    expect(typeOf('webhook_endpoint.disabled', ep.id)).toHaveLength(1);
    expect(typeOf('webhook_endpoint.enabled', peer.id)).toHaveLength(1);
    expect(await deliveriesOf(keys, ep.id)).toHaveLength(1);
    expect(r.received).toHaveLength(1);

    // Since before all of it: the two orders and the peer's disabled event, nothing else.
    const rec = ok(await api(keys.secret_key, 'POST', `/v1/webhooks/${ep.id}/recover`, { since: t0 }));
    expect(rec).toMatchObject({ status: 'running', total: 3, queued: 0 });
    const done = await until('the recovery to complete', async () => {
      const now = ok(await api(keys.secret_key, 'GET', `/v1/webhooks/${ep.id}/recoveries/${rec.id}`));
      return now.status === 'completed' && now.deliveries.succeeded === 3 && now;
    });
    expect(done).toMatchObject({ total: 3, queued: 3 });
    expect(done.deliveries).toEqual({ pending: 0, succeeded: 3, failed: 0, skipped: 0 });
    const got = r.received.slice(1);
    expect(got).toHaveLength(3);
    for (const g of got) verifyWebhook(ep.secret, g.body, g.headers);
    const missedEvents = log.filter((e) => missed.some((o) => o.id === e.data.id)).map((e) => e.id);
    expect(missedEvents).toHaveLength(2);
    expect(new Set(eventIds(got))).toEqual(new Set([...missedEvents, peerDisabled]));
    const ids = got.map((g) => JSON.parse(g.body).data.id);
    expect(ids).not.toContain(early.id);
    expect(ids).not.toContain(first.id);

    // One delivery per event, and a second recovery finds nothing left to send.
    const list = await deliveriesOf(keys, ep.id);
    expect(list).toHaveLength(4);
    expect(new Set(list.map((d) => d.event)).size).toBe(4);
    expect(list.every((d) => d.status === 'succeeded' && d.attempt_count === 1)).toBe(true);
    const again = ok(await api(keys.secret_key, 'POST', `/v1/webhooks/${ep.id}/recover`, { since: t0 }));
    expect(again.total).toBe(0);
    await until(
      'the empty recovery to complete',
      async () =>
        ok(await api(keys.secret_key, 'GET', `/v1/webhooks/${ep.id}/recoveries/${again.id}`)).status ===
        'completed',
    );
    await sleep(300);
    expect(r.received).toHaveLength(4);
    expect(await deliveriesOf(keys, ep.id)).toHaveLength(4);
  });

  it('auto_recover: probes an unhealthy endpoint with a signed ping, re-enables it on 2xx and replays its backlog', async () => {
    const keys = await stack.createAccount();
    const r = await receiver();
    const ep = await endpointAt(keys, r.url, { auto_recover: true });
    expect(ep.json.auto_recover).toBe(true);
    // Every probe is counted from the moment the endpoint turns unhealthy (300 ms later the
    // first is due, which a slow machine reaches while the test still waits): they fail until
    // the receiver is back and two have failed, then one succeeds.
    let probes = 0;
    let back = false;
    const isPing = (body: string) => JSON.parse(body).type === 'ping';
    await makeUnhealthy(keys, r, ep.id, (req) => {
      if (!isPing(req.body)) return back ? { status: 200 } : { status: 500, body: 'down' };
      probes++;
      return back && probes >= 3 ? { status: 200 } : { status: 503 };
    });
    const failedEvent = JSON.parse(r.received.filter((g) => !isPing(g.body)).at(-1)!.body).id as string;
    await newOrder(keys.secret_key);
    await until('a skipped delivery', async () =>
      (await deliveriesOf(keys, ep.id)).some((d) => d.status === 'skipped'),
    );
    expect(await api(keys.secret_key, 'GET', `/v1/webhooks/${ep.id}`)).toMatchObject({
      json: { status: 'unhealthy' },
    });

    back = true;
    await until(
      'the probe to re-enable the endpoint',
      async () => ok(await api(keys.secret_key, 'GET', `/v1/webhooks/${ep.id}`)).status === 'enabled',
    );
    const pings = r.received.filter((g) => isPing(g.body));
    expect(pings).toHaveLength(probes);
    expect(probes).toBeGreaterThanOrEqual(3);
    // Each as the document's PingEvent says (webhooks.ping in /v1/openapi.json).
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    addFormats.default(ajv);
    const doc = (await (await fetch(`${stack.baseUrl}/v1/openapi.json`)).json()) as Record<string, unknown>;
    ajv.addSchema({ ...doc, $id: 'openapi.json' });
    const asPing = ajv.getSchema('openapi.json#/components/schemas/PingEvent')!;
    for (const p of pings) {
      const ping = verifyWebhook(ep.secret, p.body, p.headers) as Record<string, any>;
      expect(ping).toMatchObject({
        object: 'event',
        type: 'ping',
        data: { object: 'webhook_endpoint', id: ep.id },
      });
      expect(asPing(ping), ajv.errorsText(asPing.errors)).toBe(true);
    }
    const gaps = pings.slice(1).map((p, i) => p.at - pings[i]!.at);
    expect(gaps[1]!).toBeGreaterThan(gaps[0]! * 1.5);

    // The backlog (the failed delivery and the skipped one) is replayed.
    await until('every delivery to succeed', async () =>
      (await deliveriesOf(keys, ep.id)).every((d) => d.status === 'succeeded'),
    );
    const list = await deliveriesOf(keys, ep.id);
    expect(list).toHaveLength(2);
    expect(list.map((d) => d.event)).toContain(failedEvent);
  });
});

describe('event resend', () => {
  it('re-delivers one event: a new delivery per endpoint, or to the one named', async () => {
    const keys = await stack.createAccount();
    const a = await receiver();
    const b = await receiver();
    const c = await receiver();
    const epA = await endpointAt(keys, a.url, { events: ['*'] });
    const epB = await endpointAt(keys, b.url, { events: ['order.created'] });
    const epC = await endpointAt(keys, c.url, { events: ['product.created'] });
    await newOrder(keys.secret_key);
    const [first] = await a.waitFor(1);
    await b.waitFor(1);
    const eventId = JSON.parse(first!.body).id as string;

    const all = ok(await api(keys.secret_key, 'POST', `/v1/events/${eventId}/resend`));
    expect(all.object).toBe('list');
    expect(all.data).toHaveLength(2);
    expect(new Set(all.data.map((d: any) => d.webhook_endpoint))).toEqual(new Set([epA.id, epB.id]));
    for (const d of all.data) {
      expect(d).toMatchObject({
        object: 'webhook_delivery',
        event: eventId,
        event_type: 'order.created',
        status: 'pending',
      });
    }
    const [, againA] = await a.waitFor(2);
    const [, againB] = await b.waitFor(2);
    expect(againA!.body).toBe(first!.body);
    expect(verifyWebhook(epA.secret, againA!.body, againA!.headers).id).toBe(eventId);
    expect(verifyWebhook(epB.secret, againB!.body, againB!.headers).id).toBe(eventId);

    const one = ok(await api(keys.secret_key, 'POST', `/v1/events/${eventId}/resend`, { endpoint: epB.id }));
    expect(one.data).toHaveLength(1);
    expect(one.data[0]).toMatchObject({ webhook_endpoint: epB.id });
    await b.waitFor(3);
    await sleep(300);
    expect(a.received).toHaveLength(2);
    expect(c.received).toHaveLength(0);

    const notSubscribed = await api(keys.secret_key, 'POST', `/v1/events/${eventId}/resend`, {
      endpoint: epC.id,
    });
    expect(notSubscribed.status).toBe(400);
    expect(notSubscribed.json.error).toMatchObject({ code: 'invalid_value', param: 'endpoint' });
    const noEndpoint = await api(keys.secret_key, 'POST', `/v1/events/${eventId}/resend`, {
      endpoint: 'we_nope',
    });
    // A missing endpoint named in the body is a bad value (as a missing order in a payment is);
    // 404 is for the route's own resource.
    expect(noEndpoint.status).toBe(400);
    expect(noEndpoint.json.error).toMatchObject({ code: 'invalid_value', param: 'endpoint' });
    expect((await api(keys.secret_key, 'POST', '/v1/events/evt_nope/resend')).status).toBe(404);

    // Each resend is a delivery of its own; the first one is untouched.
    const listB = await until('3 succeeded deliveries at endpoint B', async () => {
      const l = await deliveriesOf(keys, epB.id);
      return l.length === 3 && l.every((d) => d.status === 'succeeded') && l;
    });
    expect(new Set(listB.map((d) => d.id)).size).toBe(3);
    for (const d of listB) expect(d).toMatchObject({ event: eventId, attempt_count: 1 });
  });

  it('bulk resend by time range and type: one at a time per account (429 + Retry-After), progress visible', async () => {
    const keys = await stack.createAccount();
    const r = await receiver();
    await endpointAt(keys, r.url, { events: ['*'] });
    const since = new Date().toISOString();
    await sleep(5);
    for (let i = 0; i < 4; i++) await newOrder(keys.secret_key);
    ok(await api(keys.secret_key, 'POST', '/v1/products', { name: 'Tea', price: 450, currency: 'EUR' }));
    await r.waitFor(5);
    const firstIds = eventIds(r.received);

    const bad = await api(keys.secret_key, 'POST', '/v1/event_resends', { type: 'order.created' });
    expect(bad.status).toBe(400);
    expect(bad.json.error).toMatchObject({ code: 'missing_required_field', param: 'since' });
    const backwards = await api(keys.secret_key, 'POST', '/v1/event_resends', { since, until: since });
    expect(backwards.status).toBe(400);
    expect(backwards.json.error).toMatchObject({ code: 'invalid_value', param: 'until' });
    // Without until (now), a since in the future is the parameter at fault: the one sent.
    const future = await api(keys.secret_key, 'POST', '/v1/event_resends', { since: '2099-01-01' });
    expect(future.status).toBe(400);
    expect(future.json.error).toMatchObject({ code: 'invalid_value', param: 'since' });

    const job = ok(await api(keys.secret_key, 'POST', '/v1/event_resends', { since, type: 'order.created' }));
    expect(job).toMatchObject({
      object: 'event_resend',
      status: 'running',
      total: 4,
      type: 'order.created',
      since,
    });
    expect(job.id).toMatch(/^ers_/);
    const busy = await api(keys.secret_key, 'POST', '/v1/event_resends', { since });
    expect(busy.status).toBe(429);
    expect(busy.json.error).toMatchObject({ type: 'rate_limit_error', code: 'rate_limited' });
    expect(busy.json.error.message).toContain(job.id);
    expect(Number(busy.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);

    const done = await until('the resend to complete', async () => {
      const now = ok(await api(keys.secret_key, 'GET', `/v1/event_resends/${job.id}`));
      return now.status === 'completed' && now.deliveries.succeeded === 4 && now;
    });
    expect(done).toMatchObject({
      queued: 4,
      deliveries: { pending: 0, succeeded: 4, failed: 0, skipped: 0 },
    });
    const again = r.received.slice(5);
    expect(again).toHaveLength(4);
    // The order events again, each once (an unordered endpoint: in any order); the product event not.
    expect(eventIds(again).sort()).toEqual(
      firstIds.filter((_, i) => JSON.parse(r.received[i]!.body).type === 'order.created').sort(),
    );
    expect((await api(keys.secret_key, 'GET', '/v1/event_resends/ers_nope')).status).toBe(404);

    // Finished: the next one may start.
    ok(await api(keys.secret_key, 'POST', '/v1/event_resends', { since, type: 'product.created' }));
    await r.waitFor(10);
  });
});

describe('ordered delivery (ordering: "per_resource")', () => {
  it('delivers the events of one resource one at a time and in order; other resources go on meanwhile', async () => {
    const keys = await stack.createAccount();
    const ordered = await receiver();
    const unordered = await receiver();
    const events = ['order.created', 'order.updated'];
    const epO = await endpointAt(keys, ordered.url, { events, ordering: 'per_resource' });
    expect(epO.json.ordering).toBe('per_resource');
    await endpointAt(keys, unordered.url, { events });
    const bad = await api(keys.secret_key, 'POST', '/v1/webhooks', {
      url: ordered.url,
      events,
      ordering: 'sorted',
    });
    expect(bad.status).toBe(400);
    expect(bad.json.error).toMatchObject({ code: 'invalid_value', param: 'ordering' });

    // Both receivers refuse order A's order.created twice (two retries, 2 × 200 ms), and take
    // 50 ms to answer anything.
    let orderA = '';
    const refusals = new Map<Receiver, number>();
    for (const r of [ordered, unordered]) {
      r.reply = (req) => {
        const body = JSON.parse(req.body);
        if (body.type === 'order.created' && body.data.id === orderA && (refusals.get(r) ?? 0) < 2) {
          refusals.set(r, (refusals.get(r) ?? 0) + 1);
          return { status: 500, delayMs: 50 };
        }
        return { status: 200, delayMs: 50 };
      };
    }
    const a = await newOrder(keys.secret_key);
    orderA = a.id;
    const pay = ok(await api(keys.secret_key, 'POST', '/v1/payments', { order: a.id }));
    ok(await api(keys.secret_key, 'POST', `/v1/test_helpers/payments/${pay.id}/complete`, {}));
    ok(await api(keys.secret_key, 'POST', `/v1/orders/${a.id}/fulfill`, {}));
    const b = await newOrder(keys.secret_key);
    ok(await api(keys.secret_key, 'POST', `/v1/orders/${b.id}/cancel`, {}));

    // A: created (3 attempts) + 2 updates; B: created + 1 update.
    await ordered.waitFor(7, 15_000);
    await unordered.waitFor(7, 15_000);
    const seen = (r: Receiver) =>
      r.received.map((g) => {
        const e = JSON.parse(g.body);
        return {
          at: g.at,
          type: e.type as string,
          order: e.data.id as string,
          status: e.data.status as string,
        };
      });
    const o = seen(ordered);
    const ofA = o.filter((e) => e.order === a.id);
    expect(ofA.map((e) => `${e.type}/${e.status}`)).toEqual([
      'order.created/pending',
      'order.created/pending',
      'order.created/pending',
      'order.updated/paid',
      'order.updated/fulfilled',
    ]);
    // One at a time per resource: each request of A came after the previous one was answered.
    for (let i = 1; i < ofA.length; i++) expect(ofA[i]!.at - ofA[i - 1]!.at).toBeGreaterThanOrEqual(45);
    // B was not held back behind A's failing event: it was through before A's last retry.
    const ofB = o.filter((e) => e.order === b.id);
    expect(ofB.map((e) => `${e.type}/${e.status}`)).toEqual([
      'order.created/pending',
      'order.updated/cancelled',
    ]);
    expect(ofB[0]!.at).toBeLessThan(ofA[2]!.at);

    // Unordered, the same events overtake A's failing order.created.
    const u = seen(unordered).filter((e) => e.order === a.id);
    const createdOk = u.filter((e) => e.type === 'order.created')[2]!;
    expect(u.some((e) => e.type === 'order.updated' && e.at < createdOk.at)).toBe(true);

    // Every delivery once, all succeeded.
    const list = await until('5 succeeded deliveries in order', async () => {
      const l = await deliveriesOf(keys, epO.id);
      return l.length === 5 && l.every((d) => d.status === 'succeeded') && l;
    });
    expect(new Set(list.map((d) => d.event)).size).toBe(5);
    await sleep(300);
    expect(ordered.received).toHaveLength(7);
  });
});

describe('restarts', () => {
  it('a recovery killed mid-way (kill -9 of the webhooks process) goes on from its cursor after a restart', async () => {
    const keys = await stack.createAccount();
    const r = await receiver();
    const ep = await endpointAt(keys, r.url);
    await makeUnhealthy(keys, r, ep.id);
    const since = new Date().toISOString();
    const orders: string[] = [];
    for (let i = 0; i < 6; i++) orders.push((await newOrder(keys.secret_key)).id);
    await until(
      '6 skipped deliveries',
      async () => (await deliveriesOf(keys, ep.id)).filter((d) => d.status === 'skipped').length === 6,
    );
    r.reply = () => ({ status: 200 });
    const before = r.received.length;
    const rec = ok(await api(keys.secret_key, 'POST', `/v1/webhooks/${ep.id}/recover`, { since }));
    expect(rec.total).toBe(6);
    // 2 a second: kill it once the first chunk is queued, before the last.
    const mid = await until('the recovery to have queued 2', async () => {
      const now = ok(await api(keys.secret_key, 'GET', `/v1/webhooks/${ep.id}/recoveries/${rec.id}`));
      return now.queued >= 2 && now;
    });
    await stack.kill('webhooks', 'SIGKILL');
    expect(mid.status).toBe('running');
    await stack.restart('webhooks');

    const done = await until(
      'the recovery to complete',
      async () => {
        const now = await api(keys.secret_key, 'GET', `/v1/webhooks/${ep.id}/recoveries/${rec.id}`);
        return (
          now.status === 200 &&
          now.json.status === 'completed' &&
          now.json.deliveries.succeeded === 6 &&
          now.json
        );
      },
      30_000,
    );
    expect(done).toMatchObject({ total: 6, queued: 6 });
    // Every skipped order arrived (at least once: an attempt cut by the kill may be repeated),
    // and no delivery row was added.
    const got = new Set(r.received.slice(before).map((g) => JSON.parse(g.body).data.id as string));
    for (const id of orders) expect(got.has(id)).toBe(true);
    const list = await deliveriesOf(keys, ep.id);
    expect(list).toHaveLength(7);
    expect(list.filter((d) => d.status === 'succeeded')).toHaveLength(6);
  });
});
