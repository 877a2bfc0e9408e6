// The gateway's handler with a scripted service behind it: which keyed requests reach the service
// and which the gateway answers itself (idempotency.ts: keys in flight, the replays it gave lately).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { create, type Message } from '@bufbuild/protobuf';
import type { CallOptions } from '@connectrpc/connect';
import { CALLER_HEADERS } from '@mcs/kit/caller';
import { createLogger } from '@mcs/kit/log';
import { commerce } from '@mcs/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHandler, type UnaryCall } from './http.ts';
import { buildRoutes, createMatcher } from './routes.ts';

/** Stands for commerce's CreateOrder: stores the first answer per key and replays it, as kit/idempotency does. */
function scriptedCommerce() {
  const stored = new Map<string, { fingerprint: string; order: Message; expires: number | undefined }>();
  const calls: Array<{ key: string | undefined }> = [];
  /** When the keys stored from now on expire (ms since the epoch; undefined: no header, as before). */
  let keyLife: (() => number | undefined) | undefined = () => Date.now() + 24 * 3600_000;
  let next = 1;
  let hold: Promise<void> | undefined;
  const createOrder: UnaryCall = async (_request, options: CallOptions) => {
    const h = new Headers(options.headers as Record<string, string>);
    const key = h.get(CALLER_HEADERS.idempotencyKey) ?? undefined;
    const fingerprint = h.get(CALLER_HEADERS.idempotencyFingerprint) ?? '';
    calls.push({ key });
    if (hold) await hold;
    const known = key === undefined ? undefined : stored.get(key);
    if (known) {
      if (known.fingerprint !== fingerprint) throw new Error('the scripted service got another request');
      const h = new Headers({ [CALLER_HEADERS.idempotentReplayed]: 'true' });
      if (known.expires !== undefined) h.set(CALLER_HEADERS.idempotencyExpires, String(known.expires));
      options.onHeader?.(h);
      return known.order;
    }
    const order = create(commerce.OrderSchema, { id: `ord_${next++}`, currency: 'EUR' });
    if (key !== undefined) stored.set(key, { fingerprint, order, expires: keyLife?.() });
    options.onHeader?.(new Headers());
    return order;
  };
  return {
    calls,
    client: { createOrder } as Record<string, UnaryCall>,
    /** Sets when keys stored from now on expire; `undefined` answers replays without the header. */
    keysExpire(at: (() => number | undefined) | undefined) {
      keyLife = at;
    },
    /** Until the returned function is called, every call waits. */
    holdCalls(): () => void {
      let release!: () => void;
      hold = new Promise((r) => {
        release = r;
      });
      return () => {
        hold = undefined;
        release();
      };
    },
  };
}

const service = scriptedCommerce();
let server: Server;
let base: string;

beforeAll(async () => {
  const handler = createHandler({
    match: createMatcher(buildRoutes()),
    clientFor: () => service.client,
    auth: {
      authenticate: async () => ({
        accountId: 'acct_1',
        livemode: false,
        secret: true,
        rateLimit: 1_000,
        keyId: 'key_1',
      }),
      forget: () => {},
    },
    limiter: { take: () => ({ ok: true, retryAfter: 0 }) },
    docsUrl: 'http://docs.test/docs',
    log: createLogger('gateway-test', 'silent'),
  });
  server = createServer((req, res) => void handler(req, res));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => new Promise<void>((r) => server.close(() => r())));

const ITEMS = [{ name: 'Tea', unit_amount: 450, quantity: 2 }];
const BODY = { customer: { name: 'Ada', phone: '+4915112345678' }, currency: 'EUR', items: ITEMS };

const order = (key: string | undefined, body: unknown = BODY) =>
  fetch(`${base}/v1/orders`, {
    method: 'POST',
    headers: {
      authorization: 'Bearer sk_test_0123456789abcdef',
      'content-type': 'application/json',
      ...(key === undefined ? {} : { 'idempotency-key': key }),
    },
    body: JSON.stringify(body),
  });

const callsWith = (key: string) => service.calls.filter((c) => c.key === key).length;

describe('keyed requests at the gateway', () => {
  it('answers the replays after the service’s first replay from memory, byte for byte', async () => {
    const first = await order('k-1');
    expect(first.status).toBe(200);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const firstBody = await first.text();
    expect(callsWith('k-1')).toBe(1);

    // A fresh answer is not kept: the first retry goes to the service, which replays it.
    const second = await order('k-1');
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(await second.text()).toBe(firstBody);
    expect(callsWith('k-1')).toBe(2);

    // Key order and formatting of the body do not make it another request.
    for (const body of [
      BODY,
      { items: ITEMS, currency: 'EUR', customer: { phone: '+4915112345678', name: 'Ada' } },
    ]) {
      const again = await order('k-1', body);
      expect(again.status).toBe(200);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(await again.text()).toBe(firstBody);
    }
    expect(callsWith('k-1')).toBe(2);
  });

  it('keeps a replayed answer no longer than the service keeps its key', async () => {
    try {
      service.keysExpire(() => Date.now() + 300);
      await order('k-exp');
      expect((await order('k-exp')).headers.get('idempotent-replayed')).toBe('true');
      await order('k-exp');
      expect(callsWith('k-exp')).toBe(2); // kept while the key lives
      await new Promise((r) => setTimeout(r, 350));
      await order('k-exp');
      expect(callsWith('k-exp')).toBe(3); // the key expired: the service decides again

      // A service that does not say when its key expires: nothing is kept.
      service.keysExpire(undefined);
      await order('k-noexp');
      await order('k-noexp');
      await order('k-noexp');
      expect(callsWith('k-noexp')).toBe(3);
    } finally {
      service.keysExpire(() => Date.now() + 24 * 3600_000);
    }
  });

  it('refuses another request under a key it keeps with 422, without the service', async () => {
    await order('k-2');
    await order('k-2');
    expect(callsWith('k-2')).toBe(2);
    const other = await order('k-2', { ...BODY, currency: 'USD' });
    expect(other.status).toBe(422);
    expect(((await other.json()) as { error: { code: string } }).error.code).toBe('idempotency_key_reused');
    expect(callsWith('k-2')).toBe(2);
  });

  it('answers 409 to a request whose key is still being answered here, and nothing is kept of it', async () => {
    const release = service.holdCalls();
    const first = order('k-3');
    await expect.poll(() => callsWith('k-3')).toBe(1);
    const second = await order('k-3');
    expect(second.status).toBe(409);
    expect(((await second.json()) as { error: { code: string } }).error.code).toBe('idempotency_key_in_use');
    release();
    expect((await first).status).toBe(200);
    // Released with the answer: the next one reaches the service and is its replay.
    const third = await order('k-3');
    expect(third.headers.get('idempotent-replayed')).toBe('true');
    expect(callsWith('k-3')).toBe(2);
  });

  it('sends requests without a key to the service every time', async () => {
    const before = service.calls.filter((c) => c.key === undefined).length;
    for (let i = 0; i < 3; i++) expect((await order(undefined)).status).toBe(200);
    expect(service.calls.filter((c) => c.key === undefined).length).toBe(before + 3);
  });
});
