// `mcs listen` end to end: the CLI as a process, the whole stack, and a real HTTP server on this
// machine as the developer's app. Events reach it without a public URL, re-signed with the
// session secret (checked with @mcs/webhook-verify), the app's answers are what the deliveries
// record, Ctrl-C removes the endpoint, and a session that died leaves an endpoint the next one reuses.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createInterface } from 'node:readline';
import {
  type AccountKeys,
  canSilenceLinks,
  REPO_ROOT,
  type Stack,
  silentLink,
  startStack,
  until,
} from '@mcs/testkit';
import { verifyServiceSignature, verifyStandardSignature } from '@mcs/webhook-verify';
import { connect } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliEnv, jsonOf, runCli, spawnCli } from './cli-helpers.ts';

interface Hit {
  headers: http.IncomingHttpHeaders;
  body: string;
  path: string;
}

let stack: Stack;
let keys: AccountKeys;
let app: http.Server;
let appUrl: string;
const hits: Hit[] = [];
let answer = 200;
const children: ChildProcess[] = [];

const ORDER = {
  customer: { name: 'Ada', phone: '+4915112345678' },
  currency: 'EUR',
  items: [{ name: 'Tea', unit_amount: 450, quantity: 2 }],
};

beforeAll(async () => {
  stack = await startStack({
    // A ping a second, so a connection that died without a word is given up within seconds.
    env: { WEBHOOK_TIMEOUT: '3s', WEBHOOK_RETRY_SCHEDULE: '1s,1s,1s,1s,1s', LISTEN_PING_INTERVAL: '1s' },
  });
  keys = await stack.createAccount();
  app = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c));
    req.on('end', () => {
      hits.push({ headers: req.headers, body, path: req.url ?? '' });
      res.writeHead(answer, { 'content-type': 'text/plain' }).end(answer === 200 ? 'thanks' : 'boom');
    });
  });
  await new Promise<void>((r) => app.listen(0, '127.0.0.1', r));
  appUrl = `http://127.0.0.1:${(app.address() as AddressInfo).port}/hooks`;
});

afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  await new Promise((r) => app?.close(r));
  await stack?.stop();
});

/**
 * A running `mcs listen --json`: its lines as they come. With `launcher` (`pnpm mcs`, …) it starts
 * as a user starts it, in a process group of its own, so a signal reaches the launcher only.
 */
function startListen(args: string[], launcher?: string[], baseUrl?: string) {
  const argv = ['listen', '--forward-to', appUrl, '--json', ...args];
  const env = cliEnv(stack, { MCS_API_KEY: keys.secret_key, ...(baseUrl ? { MCS_BASE_URL: baseUrl } : {}) });
  const child = launcher
    ? spawn(launcher[0]!, [...launcher.slice(1), ...argv], { cwd: REPO_ROOT, env, detached: true })
    : spawnCli(argv, env);
  child.stdin!.end();
  children.push(child);
  const lines: Array<Record<string, unknown>> = [];
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr += c));
  createInterface({ input: child.stdout! }).on('line', (l) => {
    if (l.startsWith('{')) lines.push(JSON.parse(l)); // a launcher may print lines of its own
  });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  async function next(type: string, from = 0, timeoutMs = 20_000) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const hit = lines.slice(from).find((l) => l.type === type);
      if (hit) return hit;
      if (child.exitCode !== null) throw new Error(`mcs listen exited ${child.exitCode}: ${stderr}`);
      if (Date.now() > deadline)
        throw new Error(`no ${type} line in ${timeoutMs} ms: ${JSON.stringify(lines)} ${stderr}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  return { child, lines, next, exited, stderr: () => stderr };
}

/** The processes whose command line holds `marker` (a session's --secret): launchers and node. */
function processesWith(marker: string): number[] {
  const pids: number[] = [];
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(marker)) pids.push(Number(pid));
    } catch {} // gone meanwhile
  }
  return pids;
}

const newSecret = () => `whsec_${randomBytes(24).toString('base64')}`;

describe('mcs listen', () => {
  it('forwards subscribed events re-signed, records the answers, and removes its endpoint on Ctrl-C', async () => {
    const session = startListen(['--events', 'order.created,payment.*']);
    const ready = await session.next('ready');
    expect(ready).toMatchObject({
      reused: false,
      forward_to: appUrl,
      events: ['order.created', 'payment.completed', 'payment.failed'],
    });
    const secret = ready.secret as string;
    expect(secret).toMatch(/^whsec_/);
    const id = ready.endpoint as string;
    const ep = await stack.api(keys.secret_key, 'GET', `/v1/webhooks/${id}`);
    expect(ep.json).toMatchObject({ url: 'mcs-listen:', status: 'enabled', livemode: false });

    // An order: its order.created reaches the app, signed with the session's secret.
    answer = 200;
    const order = await stack.api(keys.secret_key, 'POST', '/v1/orders', ORDER);
    expect(order.status).toBe(200);
    const forwarded = await session.next('forwarded');
    expect(forwarded).toMatchObject({
      event_type: 'order.created',
      status_code: 200,
      error: null,
      response_excerpt: 'thanks',
    });
    expect(hits).toHaveLength(1);
    const hit = hits[0]!;
    expect(hit.path).toBe('/hooks');
    expect(JSON.parse(hit.body)).toMatchObject({
      object: 'event',
      type: 'order.created',
      data: { id: order.json.id },
    });
    expect(verifyServiceSignature(secret, hit.body, hit.headers['x-service-signature'] as string)).toBe(true);
    expect(() =>
      verifyStandardSignature(secret, hit.body, hit.headers as Record<string, string>),
    ).not.toThrow();
    expect(hit.headers['webhook-id']).toBe(forwarded.event);
    const deliveries = await until(
      'the success to be recorded',
      async () => {
        const r = await stack.api(keys.secret_key, 'GET', `/v1/webhooks/${id}/deliveries`);
        return r.json.data[0]?.status === 'succeeded' ? r.json.data : undefined;
      },
      20_000,
    );
    expect(deliveries[0]).toMatchObject({ event: forwarded.event, attempt_count: 1 });
    expect(deliveries[0].attempts[0]).toMatchObject({
      status_code: 200,
      error: null,
      response_excerpt: 'thanks',
    });

    // The app fails: the delivery records its 500 and is retried on the schedule.
    answer = 500;
    const second = await stack.api(keys.secret_key, 'POST', '/v1/orders', ORDER);
    const failed = await session.next('forwarded', session.lines.indexOf(forwarded) + 1);
    expect(failed).toMatchObject({ status_code: 500, response_excerpt: 'boom' });
    const retried = await until(
      'a retry of the failed delivery',
      async () => {
        const r = await stack.api(keys.secret_key, 'GET', `/v1/webhooks/${id}/deliveries`);
        const d = r.json.data.find((x: { event: string }) => x.event === failed.event);
        return d && d.attempt_count >= 2 ? d : undefined;
      },
      20_000,
    );
    expect(retried.attempts[0]).toMatchObject({
      status_code: 500,
      error: 'HTTP 500',
      response_excerpt: 'boom',
    });
    answer = 200;
    await until(
      'the retry to succeed',
      async () => {
        const r = await stack.api(keys.secret_key, 'GET', `/v1/webhooks/${id}/deliveries`);
        const d = r.json.data.find((x: { event: string }) => x.event === failed.event);
        return d?.status === 'succeeded' ? d : undefined;
      },
      20_000,
    );
    expect(JSON.parse(hits.at(-1)!.body).data.id).toBe(second.json.id);

    // A product is not subscribed: nothing arrives for it.
    const before = hits.length;
    await stack.api(keys.secret_key, 'POST', '/v1/products', { name: 'Tea', price: 450, currency: 'EUR' });
    await new Promise((r) => setTimeout(r, 1_500));
    expect(hits.slice(before).map((h) => JSON.parse(h.body).type)).not.toContain('product.created');

    // Ctrl-C: the endpoint goes, the process ends cleanly.
    session.child.kill('SIGINT');
    expect(await session.exited).toBe(0);
    expect(session.lines.at(-1)).toEqual({ type: 'stopped', endpoint: id, removed: true });
    expect((await stack.api(keys.secret_key, 'GET', `/v1/webhooks/${id}`)).status).toBe(404);
  });

  // The npm `node` package's shim (node_modules/.bin/node), which `pnpm mcs` and the .bin/mcs
  // script run, starts the real node as a child and passes no signal on: a signal to the
  // launcher ends the launcher only. The session sees its parent go and stops as on Ctrl-C.
  for (const launcher of [['pnpm', 'mcs'], ['node_modules/.bin/mcs']]) {
    it(`stops and removes its endpoint when \`${launcher.join(' ')}\`, its launcher, is sent SIGTERM`, async () => {
      const secret = newSecret();
      const session = startListen(['--events', 'message.sent', '--secret', secret], launcher);
      const ready = await session.next('ready', 0, 30_000);
      const id = ready.endpoint as string;
      try {
        process.kill(session.child.pid!, 'SIGTERM'); // the launcher's pid only, not its group
        await session.exited;
        await until(
          'the endpoint to be deleted',
          async () =>
            (await stack.api(keys.secret_key, 'GET', `/v1/webhooks/${id}`)).status === 404 || undefined,
          10_000,
        );
        await until(
          'no mcs listen process left',
          async () => processesWith(secret).length === 0 || undefined,
          10_000,
        );
        const stopped = await until('the stopped line', async () =>
          session.lines.find((l) => l.type === 'stopped'),
        );
        expect(stopped).toEqual({ type: 'stopped', endpoint: id, removed: true });
      } finally {
        for (const pid of processesWith(secret)) process.kill(pid, 'SIGKILL');
      }
    });
  }

  it('stops on SIGHUP (its terminal closed) as on Ctrl-C, and a further signal does not cut the clean-up short', async () => {
    const session = startListen(['--events', 'message.received']);
    const ready = await session.next('ready');
    session.child.kill('SIGHUP');
    await new Promise((r) => setTimeout(r, 20));
    session.child.kill('SIGINT');
    const code = await session.exited;
    // The clean-up ran to its end. (When it took under 20 ms, the SIGINT can land while Node is
    // already tearing down, after it put the default signal actions back: the process then ends
    // by it, with its work done. Any other end fails.)
    expect(session.lines.at(-1)).toEqual({ type: 'stopped', endpoint: ready.endpoint, removed: true });
    if (code !== 0) expect(session.child.signalCode, session.stderr()).toBe('SIGINT');
    expect((await stack.api(keys.secret_key, 'GET', `/v1/webhooks/${ready.endpoint}`)).status).toBe(404);
  });

  it('keeps its endpoint enabled through a failing local server: a 410 is a failure, and unhealthy is re-enabled', async () => {
    const session = startListen(['--events', 'product.created']);
    const ready = await session.next('ready');
    const id = ready.endpoint as string;
    expect((await stack.api(keys.secret_key, 'GET', `/v1/webhooks/${id}`)).json.disable_on_gone).toBe(false);
    answer = 410;
    try {
      const product = { name: 'Tea', price: 450, currency: 'EUR' };
      expect((await stack.api(keys.secret_key, 'POST', '/v1/products', product)).status).toBe(200);
      // Six attempts a second apart, all 410: the last retry fails, the endpoint turns unhealthy,
      // and the session turns it back on rather than fall silent.
      const again = await session.next('re-enabled', 0, 30_000);
      expect(again).toMatchObject({ endpoint: id, was: 'unhealthy' });
      expect((await stack.api(keys.secret_key, 'GET', `/v1/webhooks/${id}`)).json.status).toBe('enabled');
      answer = 200;
      const from = session.lines.length;
      const next = await stack.api(keys.secret_key, 'POST', '/v1/products', { ...product, name: 'Coffee' });
      await until('the next event forwarded', () =>
        session.lines
          .slice(from)
          .some((l) => l.type === 'forwarded' && l.status_code === 200 && l.event_type === 'product.created'),
      );
      expect(next.status).toBe(200);
    } finally {
      answer = 200;
      session.child.kill('SIGINT');
      expect(await session.exited).toBe(0);
    }
  });

  it("never takes a live session's endpoint: a second session with the same events gets its own", async () => {
    const first = startListen(['--events', 'conversation.created']);
    const a = await first.next('ready');
    const second = startListen(['--events', 'conversation.created']);
    const b = await second.next('ready');
    expect(b.endpoint).not.toBe(a.endpoint);
    expect(b.reused).toBe(false);
    // The gateway refuses a second stream of one endpoint, whoever asks.
    const again = await stack.api(keys.secret_key, 'GET', `/v1/webhooks/${a.endpoint}/listen`);
    expect(again.status).toBe(409);
    expect(again.json.error).toMatchObject({ code: 'listen_endpoint_in_use', param: 'id' });
    // The first stops (and removes its endpoint); the second goes on with its own.
    first.child.kill('SIGINT');
    expect(await first.exited).toBe(0);
    const from = second.lines.length;
    const made = await stack.api(keys.secret_key, 'POST', '/v1/conversations', {
      customer: { name: 'Ada', phone: '+4915100000077' },
    });
    expect(made.status).toBe(200);
    await until('the second session forwarding', () =>
      second.lines.slice(from).some((l) => l.type === 'forwarded' && l.event_type === 'conversation.created'),
    );
    second.child.kill('SIGINT');
    expect(await second.exited).toBe(0);
  });

  it('reuses the endpoint a killed session left, and such an endpoint fails honestly meanwhile', async () => {
    const first = startListen(['--events', 'conversation.created']);
    const ready = await first.next('ready');
    first.child.kill('SIGKILL');
    await first.exited;
    const id = ready.endpoint as string;

    // No session: the attempt fails at once with the reason, and waits for its retry.
    await stack.api(keys.secret_key, 'POST', '/v1/conversations', {
      customer: { name: 'Ada', phone: '+4915112345678' },
    });
    const orphan = await until(
      'the attempt without a session',
      async () => {
        const r = await stack.api(keys.secret_key, 'GET', `/v1/webhooks/${id}/deliveries`);
        return r.json.data[0]?.attempts?.[0] ? r.json.data[0] : undefined;
      },
      20_000,
    );
    expect(orphan.attempts[0]).toMatchObject({
      status_code: null,
      error: 'no mcs listen session is connected to this endpoint',
    });

    const second = startListen(['--events', 'conversation.created']);
    const again = await second.next('ready');
    expect(again).toMatchObject({ endpoint: id, reused: true });
    // The pending delivery's next retry reaches the new session.
    const forwarded = await second.next('forwarded');
    expect(forwarded).toMatchObject({ event_type: 'conversation.created', status_code: 200 });
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
    expect((await stack.api(keys.secret_key, 'GET', `/v1/webhooks/${id}`)).status).toBe(404);
  });

  it('reconnects when the gateway restarts, and forwards what comes after', async () => {
    const session = startListen(['--events', 'order.updated']);
    const ready = await session.next('ready');
    await stack.kill('gateway', 'SIGTERM'); // ends the open stream on the way down
    await new Promise((r) => setTimeout(r, 1_000));
    expect(session.child.exitCode).toBeNull();
    await stack.restart('gateway');
    await until(
      'the CLI to reconnect',
      async () => (session.stderr().includes('reconnected') ? true : undefined),
      20_000,
    );
    expect(session.stderr()).toContain('reconnecting');
    answer = 200;
    const order = await stack.api(keys.secret_key, 'POST', '/v1/orders', ORDER);
    await stack.api(keys.secret_key, 'POST', `/v1/orders/${order.json.id}/cancel`, {});
    const forwarded = await session.next('forwarded');
    expect(forwarded).toMatchObject({ event_type: 'order.updated', status_code: 200 });
    session.child.kill('SIGINT');
    expect(await session.exited).toBe(0);
    expect((await stack.api(keys.secret_key, 'GET', `/v1/webhooks/${ready.endpoint}`)).status).toBe(404);
  });

  it.skipIf(!canSilenceLinks)(
    'takes a connection that died without a word for dead, and its reconnection takes the endpoint over from the stream the API still holds',
    async () => {
      // The CLI reaches the gateway at an address routed through one link; the link goes silent
      // and the address moves to another, as a laptop's new network or a NAT's new mapping does.
      // The gateway still holds the first stream, writing pings into a connection that TCP takes
      // minutes to give up.
      const [first, second] = [await silentLink(), await silentLink()];
      const vip = `10.199.${process.pid % 250}.9`;
      const ip = (...args: string[]) => execFileSync('ip', args, { stdio: 'pipe' });
      try {
        const gateway = Number(new URL(stack.baseUrl).port);
        for (const link of [first, second]) {
          link.addAddress(vip);
          await link.route('127.0.0.1', gateway, { ip: vip, port: 18_080 });
        }
        ip('route', 'replace', `${vip}/32`, 'via', first.address);
        const session = startListen(['--events', 'order.created'], undefined, `http://${vip}:18080`);
        const ready = await session.next('ready');
        first.silence();
        ip('route', 'replace', `${vip}/32`, 'via', second.address);
        // Three pings' silence (LISTEN_PING_INTERVAL 1s), then a new connection by the new route.
        await until(
          'the CLI to give the connection up',
          async () =>
            /lost \(no word from the API for 3 s\); reconnecting/.test(session.stderr()) ? true : undefined,
          10_000,
        );
        await until(
          'the CLI to reconnect',
          async () => (session.stderr().includes('reconnected') ? true : undefined),
          20_000,
        );
        expect(session.stderr()).not.toContain('listen_endpoint_in_use');
        answer = 200;
        const order = await stack.api(keys.secret_key, 'POST', '/v1/orders', ORDER);
        expect(order.status).toBe(200);
        const forwarded = await session.next('forwarded');
        expect(forwarded).toMatchObject({ event_type: 'order.created', status_code: 200 });
        session.child.kill('SIGINT');
        expect(await session.exited).toBe(0);
        expect((await stack.api(keys.secret_key, 'GET', `/v1/webhooks/${ready.endpoint}`)).status).toBe(404);
      } finally {
        try {
          ip('route', 'del', `${vip}/32`);
        } catch {}
        first.close();
        second.close();
      }
    },
  );

  it('prints readable lines without --json', async () => {
    const child = spawnCli(
      ['listen', '--forward-to', appUrl, '--events', 'product.updated'],
      cliEnv(stack, { MCS_API_KEY: keys.secret_key }),
    );
    child.stdin!.end();
    children.push(child);
    let out = '';
    child.stdout!.on('data', (c: Buffer) => (out += c));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    await until(
      'the ready lines',
      async () => (out.includes('Session signing secret') ? true : undefined),
      20_000,
    );
    expect(out).toMatch(/^Ready: forwarding product\.updated to http:\/\/127\.0\.0\.1:\d+\/hooks\n/);
    expect(out).toMatch(/Session signing secret: whsec_[A-Za-z0-9+/=]+\n/);
    answer = 200;
    const product = await stack.api(keys.secret_key, 'POST', '/v1/products', {
      name: 'Tea',
      price: 450,
      currency: 'EUR',
    });
    await stack.api(keys.secret_key, 'POST', `/v1/products/${product.json.id}`, { price: 500 });
    await until(
      'the forwarded line',
      async () => (out.includes('product.updated  evt_') ? true : undefined),
      20_000,
    );
    expect(out).toMatch(
      /\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ {2}product\.updated {2}evt_\w+ {2}→ \[200\] POST http:\/\/127\.0\.0\.1:\d+\/hooks \(\d+ ms\)\n/,
    );
    child.kill('SIGINT');
    expect(await exited).toBe(0);
    expect(out).toMatch(/Stopped; removed endpoint we_\w+\.\n$/);
  });

  it('refuses live mode, other endpoints and stray acks with the error envelope', async () => {
    const live = await stack.api(keys.live_secret_key, 'POST', '/v1/webhooks', {
      url: 'mcs-listen:',
      events: ['*'],
    });
    expect(live.status).toBe(403);
    expect(live.json.error).toMatchObject({ code: 'test_mode_only', param: 'url' });

    const plain = await stack.api(keys.secret_key, 'POST', '/v1/webhooks', {
      url: 'https://example.com/hooks',
      events: ['*'],
    });
    const notListen = await stack.api(keys.secret_key, 'GET', `/v1/webhooks/${plain.json.id}/listen`);
    expect(notListen.status).toBe(400);
    expect(notListen.json.error).toMatchObject({
      type: 'invalid_request_error',
      code: 'not_a_listen_endpoint',
    });
    expect(notListen.headers.get('request-id')).toMatch(/^req_/);

    // A query parameter would be silently ignored (neither route takes one): refused, as on
    // every other route.
    const query = await stack.api(keys.secret_key, 'GET', `/v1/webhooks/${plain.json.id}/listen?events=*`);
    expect(query.status).toBe(400);
    expect(query.json.error).toMatchObject({ code: 'unknown_parameter', param: 'events' });
    const ackQuery = await stack.api(
      keys.secret_key,
      'POST',
      `/v1/webhooks/${plain.json.id}/listen/ack?status_code=200`,
      { ack: 'nope' },
    );
    expect(ackQuery.status).toBe(400);
    expect(ackQuery.json.error).toMatchObject({ code: 'unknown_parameter', param: 'status_code' });

    const missing = await stack.api(keys.secret_key, 'GET', '/v1/webhooks/we_missing/listen');
    expect(missing.status).toBe(404);
    const wrongMethod = await stack.api(keys.secret_key, 'POST', `/v1/webhooks/${plain.json.id}/listen`);
    expect(wrongMethod.status).toBe(405);
    const stray = await stack.api(keys.secret_key, 'POST', `/v1/webhooks/${plain.json.id}/listen/ack`, {
      ack: 'nope',
      status_code: 200,
    });
    expect(stray.status).toBe(404);
    expect(stray.json.error).toMatchObject({ code: 'resource_missing', param: 'ack' });
    const noAck = await stack.api(keys.secret_key, 'POST', `/v1/webhooks/${plain.json.id}/listen/ack`, {});
    expect(noAck.json.error).toMatchObject({ code: 'missing_required_field', param: 'ack' });
    const text = await fetch(`${stack.baseUrl}/v1/webhooks/${plain.json.id}/listen/ack`, {
      method: 'POST',
      headers: { authorization: `Bearer ${keys.secret_key}`, 'content-type': 'text/plain' },
      body: 'ack=nope',
    });
    expect(text.status).toBe(415);
    expect(((await text.json()) as { error: { code: string } }).error.code).toBe('unsupported_media_type');
    const noKey = await fetch(`${stack.baseUrl}/v1/webhooks/${plain.json.id}/listen`);
    expect(noKey.status).toBe(401);
  });

  it('never lets an ack path reach NATS as protocol text', async () => {
    // An id with CR LF once went into the subject of the ack's forward: NATS has no escaping,
    // so it was a PUB of the caller's choosing on the gateway's connection.
    const nc = await connect({ servers: stack.nats.url });
    try {
      const got: string[] = [];
      const sub = nc.subscribe(`${stack.nats.prefix}.pwned`, { callback: (_e, m) => got.push(m.string()) });
      await nc.flush();
      const id = `x _INBOX.a 0\r\n\r\nPUB ${stack.nats.prefix}.pwned 11\r\nhello-pwned\r\nPUB ${stack.nats.prefix}.listen_ack.y`;
      for (const path of [
        `/v1/webhooks/${encodeURIComponent(id)}/listen/ack`,
        `/v1/webhooks/we_*/listen/ack`,
      ]) {
        const res = await stack.api(keys.secret_key, 'POST', path, { ack: 'z' });
        expect(res.status).toBe(404);
        expect(res.json.error).toMatchObject({ code: 'resource_missing', param: 'id' });
      }
      await new Promise((r) => setTimeout(r, 300));
      await nc.flush();
      expect(got).toEqual([]);
      sub.unsubscribe();
    } finally {
      await nc.close();
    }
  });

  it("never rate-limits an ack: it answers a request mcs sent, and the app's answer must not be lost", async () => {
    const slow: AccountKeys = jsonOf(
      await runCli(['accounts', 'create', '--email', 'slow@example.com', '--rate-limit', '2'], cliEnv(stack)),
    );
    const ep = await stack.api(slow.secret_key, 'POST', '/v1/webhooks', {
      url: 'mcs-listen:',
      events: ['*'],
    });
    const burst = async (call: () => Promise<{ status: number }>) =>
      (await Promise.all(Array.from({ length: 12 }, call))).map((r) => r.status);
    // Other routes of that account are limited at 2 a second...
    expect(await burst(() => stack.api(slow.secret_key, 'GET', '/v1/products'))).toContain(429);
    // ...its acks are not (a stray one is refused as such).
    const acks = await burst(() =>
      stack.api(slow.secret_key, 'POST', `/v1/webhooks/${ep.json.id}/listen/ack`, {
        ack: 'nope',
        status_code: 200,
      }),
    );
    expect(new Set(acks)).toEqual(new Set([404]));
  });
});
