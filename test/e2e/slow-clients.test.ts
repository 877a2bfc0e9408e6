// A client that sends its request slowly (a byte now and then, or headers and then nothing) gets
// 408 request_timeout in the error envelope once REQUEST_TIMEOUT (here 2 s) has passed, and its
// connection is closed: it cannot hold a connection of the gateway for minutes (Node's defaults
// were 60 s for the head and 5 minutes for the body). A request that arrives in time is not cut,
// however long its answer takes, and a kept-alive connection may sit idle between requests.
import net from 'node:net';
import { type Stack, startStack } from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ env: { REQUEST_TIMEOUT: '2s', LISTEN_PING_INTERVAL: '1s' } });
}, 120_000);
afterAll(async () => {
  await stack?.stop();
});

/** Opens a connection, writes `parts` with `gapMs` between them; resolves what came back and when the server closed. */
function trickle(parts: string[], gapMs: number): Promise<{ text: string; closedAfterMs: number }> {
  const { port } = new URL(stack.baseUrl);
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const socket = net.connect(Number(port), '127.0.0.1');
    let text = '';
    let timer: NodeJS.Timeout | undefined;
    socket.on('data', (b) => (text += b));
    socket.on('error', reject);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ text, closedAfterMs: Date.now() - started });
    });
    let i = 0;
    const next = () => {
      if (i < parts.length && !socket.destroyed) socket.write(parts[i++]!);
      if (i < parts.length) timer = setTimeout(next, gapMs);
    };
    socket.once('connect', next);
    setTimeout(() => socket.destroy(), 15_000).unref(); // a server that never closes fails below
  });
}

function expect408(got: { text: string; closedAfterMs: number }) {
  expect(got.text).toMatch(/^HTTP\/1\.1 408 /);
  expect(got.text.toLowerCase()).toContain('connection: close');
  expect(got.text).toMatch(/request-id: req_/i);
  const body = JSON.parse(got.text.slice(got.text.indexOf('\r\n\r\n') + 4));
  expect(body.error).toMatchObject({ type: 'invalid_request_error', code: 'request_timeout' });
  expect(got.closedAfterMs).toBeGreaterThanOrEqual(1_900);
  expect(got.closedAfterMs).toBeLessThan(6_000);
}

describe('slow clients', () => {
  it('answers 408 and closes a connection whose head never ends', async () => {
    expect408(await trickle(['GET /v1/products HTTP/1.1\r\nHost: x\r\n', 'X-Slow: 1\r\n'], 500));
  }, 20_000);

  it('answers 408 and closes a connection whose body comes a byte at a time', async () => {
    const keys = await stack.createAccount();
    const head = `POST /v1/products HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${keys.secret_key}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n`;
    expect408(await trickle([head, ...'{"name":"Tea","price":450,'.split('')], 300));
    // Nothing was created from the half body.
    const list = await stack.api(keys.secret_key, 'GET', '/v1/products');
    expect(list.json.data).toEqual([]);
  }, 20_000);

  it('keeps an idle kept-alive connection and serves its next request whole', async () => {
    const keys = await stack.createAccount();
    const get = `GET /v1/products HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${keys.secret_key}\r\n\r\n`;
    const close = `GET /v1/products HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${keys.secret_key}\r\nConnection: close\r\n\r\n`;
    // Idle for twice REQUEST_TIMEOUT between two requests on one connection.
    const got = await trickle([get, close], 4_000);
    expect(got.text.match(/HTTP\/1\.1 200 /g)).toHaveLength(2); // bodies end without a newline
  }, 20_000);

  it('does not cut an answer that lasts longer: an `mcs listen` stream stays open', async () => {
    const keys = await stack.createAccount();
    const ep = await stack.api(keys.secret_key, 'POST', '/v1/webhooks', {
      url: 'mcs-listen:',
      events: ['*'],
    });
    expect(ep.status, ep.text).toBe(200);
    const stream = await fetch(`${stack.baseUrl}/v1/webhooks/${ep.json.id}/listen`, {
      headers: { authorization: `Bearer ${keys.secret_key}` },
    });
    expect(stream.status).toBe(200);
    const reader = stream.body!.getReader();
    const started = Date.now();
    let text = '';
    while (Date.now() - started < 4_500) {
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    await reader.cancel();
    // The ready line, then a ping a second, well past REQUEST_TIMEOUT: the stream was never cut.
    const frames = text
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l).type);
    expect(frames[0]).toBe('ready');
    expect(frames.filter((t) => t === 'ping').length).toBeGreaterThanOrEqual(3);
    expect(Date.now() - started).toBeGreaterThanOrEqual(4_500);
  }, 20_000);
});
