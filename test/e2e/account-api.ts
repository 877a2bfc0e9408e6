// What the cross-service suites do through the public API in test after test: a call and its
// must-succeed form, an order, a webhook endpoint and its deliveries; and the receivers a file
// starts, closed at its end. Each suite starts its own stack in beforeAll, so these take it lazily.
import {
  type AccountKeys,
  type ApiResponse,
  type Receiver,
  type Stack,
  startReceiver,
  type TestCerts,
} from '@mcs/testkit';
import { expect } from 'vitest';

type Json = Record<string, any>;

/** The /v1 calls of the suites, against the stack `stack()` returns once it runs. */
export function accountApi(stack: () => Stack) {
  /** One request as a client makes it; the answer, whatever it is. */
  const api = (key: string, method: string, path: string, body?: unknown): Promise<ApiResponse> =>
    stack().api(key, method, path, body);

  /** Asserts a 200 (showing the body otherwise); its JSON. */
  function ok(res: ApiResponse): Json {
    expect(res.status, res.text).toBe(200);
    return res.json;
  }

  /** A request that must succeed; its JSON. */
  const must = async (key: string, method: string, path: string, body?: unknown): Promise<Json> =>
    ok(await api(key, method, path, body));

  /** One order of two teas: one `order.created` event. */
  const newOrder = (key: string): Promise<Json> =>
    must(key, 'POST', '/v1/orders', {
      customer: { name: 'Ada Lovelace', phone: '+4915112345678' },
      currency: 'EUR',
      items: [{ name: 'Tea', unit_amount: 450, quantity: 2 }],
    });

  /** A webhook endpoint at `url` for `order.created`, unless `fields` say otherwise. */
  async function endpointAt(keys: AccountKeys, url: string, fields: Record<string, unknown> = {}) {
    const json = await must(keys.secret_key, 'POST', '/v1/webhooks', {
      url,
      events: ['order.created'],
      ...fields,
    });
    return { id: json.id as string, secret: json.secret as string, json };
  }

  const getEndpoint = (keys: AccountKeys, id: string): Promise<Json> =>
    must(keys.secret_key, 'GET', `/v1/webhooks/${id}`);

  /** An endpoint's deliveries, newest first (up to 100). */
  const deliveriesOf = async (keys: AccountKeys, id: string): Promise<Json[]> =>
    (await must(keys.secret_key, 'GET', `/v1/webhooks/${id}/deliveries?limit=100`)).data;

  return { api, ok, must, newOrder, endpointAt, getEndpoint, deliveriesOf };
}

/** Receivers (HTTPS with `certs()`, when given) that `closeAll` closes, in afterAll. */
export function receiverPool(certs?: () => TestCerts) {
  const open: Receiver[] = [];
  return {
    async receiver(): Promise<Receiver> {
      const r = await startReceiver({ certs: certs?.() });
      open.push(r);
      return r;
    },
    closeAll: () => Promise.all(open.splice(0).map((r) => r.close())),
  };
}

/**
 * The stack environment of the webhook suites: HTTPS receivers on loopback signed by the test CA,
 * a retry schedule of 5 × `gapMs`, and 1 s time-outs so a dead attempt is taken over quickly.
 */
export function webhookTestEnv(certs: TestCerts, gapMs: number): Record<string, string> {
  return {
    NODE_EXTRA_CA_CERTS: certs.caFile,
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
    WEBHOOK_RETRY_SCHEDULE: Array(5).fill(`${gapMs}ms`).join(','),
    WEBHOOK_TIMEOUT: '1s',
    WEBHOOK_LEASE_MARGIN: '1s',
  };
}
