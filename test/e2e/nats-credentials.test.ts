// NATS_URL as a production NATS wants it: a cluster's servers comma separated, one of them down,
// and the password the servers require written in the URL (percent-encoded). Every part connects
// with those credentials — events flow: an order's signed order.created reaches a receiver — and
// no log line of any part shows the password. Before, nats.js dropped the URL's credentials (the
// server refused every part) and read the comma list as one malformed address. Credentials NATS
// refuses stop a part at once with one line that does not repeat them.
import { spawn } from 'node:child_process';
import {
  type PrivateNats,
  privateNats,
  privatePort,
  REPO_ROOT,
  type Receiver,
  type Stack,
  startReceiver,
  startStack,
} from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const PASSWORD = 'p@ss:w/rd ünïcode';

describe('NATS_URL with credentials and a cluster list', () => {
  let nats: PrivateNats;
  let stack: Stack;
  let receiver: Receiver;

  beforeAll(async () => {
    nats = await privateNats({ args: ['--user', 'mcs', '--pass', PASSWORD] });
    await nats.start();
    const down = await privatePort(); // nothing listens there
    const url = `nats://127.0.0.1:${down},${nats.url.replace('//', `//mcs:${encodeURIComponent(PASSWORD)}@`)}`;
    [stack, receiver] = await Promise.all([
      startStack({
        natsUrl: url,
        env: { WEBHOOK_ALLOW_HTTP: 'true', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' },
      }),
      startReceiver(),
    ]);
  }, 120_000);

  afterAll(async () => {
    await stack?.stop();
    await receiver?.close();
    await nats?.remove();
  });

  it('connects every part with the URL’s credentials; events flow; the password is logged nowhere', async () => {
    const keys = await stack.createAccount();
    const ep = await stack.api(keys.secret_key, 'POST', '/v1/webhooks', {
      url: receiver.url,
      events: ['order.created'],
    });
    expect(ep.status, ep.text).toBe(200);
    const order = await stack.api(keys.secret_key, 'POST', '/v1/orders', {
      customer: { name: 'Ada Lovelace', phone: '+4915112345678' },
      currency: 'EUR',
      items: [{ name: 'Tea', unit_amount: 450, quantity: 2 }],
    });
    expect(order.status, order.text).toBe(200);
    const [delivery] = await receiver.waitFor(1, 30_000);
    expect(JSON.parse(delivery!.body)).toMatchObject({
      type: 'order.created',
      data: { object: 'order', id: order.json.id },
    });
    const logs = Object.values(stack.logs).flat().join('\n');
    expect(logs).not.toContain(PASSWORD);
    expect(logs).not.toContain(encodeURIComponent(PASSWORD));
  }, 60_000);

  it('stops a part at once, in one line, when NATS refuses the credentials', async () => {
    const wrong = nats.url.replace('//', '//mcs:not-it@');
    const child = spawn(process.execPath, ['services/accounts/src/main.ts'], {
      cwd: REPO_ROOT,
      env: { ...stack.env, NATS_URL: wrong, ACCOUNTS_URL: `http://127.0.0.1:${await privatePort()}` },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout!.on('data', (c: Buffer) => (out += c));
    child.stderr!.on('data', (c: Buffer) => (out += c));
    const code = await new Promise<number | null>((r) => child.once('exit', r));
    expect(code, out).not.toBe(0);
    expect(out).toContain('NATS refused the credentials of NATS_URL');
    expect(out).not.toContain('not-it');
    expect(out).not.toMatch(/\n\s+at /);
  }, 30_000);
});
