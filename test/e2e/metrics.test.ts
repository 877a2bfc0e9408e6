// Prometheus metrics (issue 11): every part serves /metrics, the numbers move with real traffic,
// labels carry no ids, and every metric the alert rules and the Grafana dashboard in
// deploy/observability name is one the parts really export.
import { readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { PART_NODE_FLAGS } from '@mcs/kit/config';
import {
  type AccountKeys,
  PARTS,
  type Part,
  REPO_ROOT,
  type Receiver,
  type Stack,
  startReceiver,
  startStack,
} from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The Prometheus text format, as far as these tests need it. */
function parseMetrics(text: string): { samples: Sample[]; families: Map<string, string> } {
  const samples: Sample[] = [];
  const families = new Map<string, string>();
  for (const line of text.split('\n')) {
    const type = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (type) families.set(type[1]!, type[2]!);
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      labels[l[1]!] = l[2]!;
    samples.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return { samples, families };
}

function value(samples: Sample[], name: string, labels: Record<string, string> = {}): number | undefined {
  const hit = samples.filter(
    (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  );
  if (hit.length === 0) return undefined;
  return hit.reduce((sum, s) => sum + s.value, 0);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('Prometheus metrics', () => {
  let stack: Stack;
  let good: Receiver;
  let bad: Receiver;
  let keys: AccountKeys;

  async function scrape(
    part: Part,
  ): Promise<{ samples: Sample[]; families: Map<string, string>; text: string }> {
    const res = await fetch(stack.metricsUrl(part));
    expect(res.status, `${part} /metrics`).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    return { ...parseMetrics(text), text };
  }

  beforeAll(async () => {
    [good, bad] = await Promise.all([startReceiver(), startReceiver()]);
    bad.reply = () => ({ status: 500, body: 'no' });
    stack = await startStack({
      env: {
        WEBHOOK_ALLOW_HTTP: 'true',
        WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
        WEBHOOK_RETRY_SCHEDULE: '100ms,100ms',
        WEBHOOK_NICE: '10', // pnpm start's default, which test stacks leave at 0 (testkit)
      },
    });
    keys = await stack.createAccount();
  }, 120_000);

  afterAll(async () => {
    await stack?.stop();
    await good?.close();
    await bad?.close();
  });

  it('every part runs with the Node flags of kit/config (a 16 MB semi-space young generation among them)', () => {
    for (const part of PARTS) {
      const argv = readFileSync(`/proc/${stack.pid(part)}/cmdline`, 'utf8').split('\0');
      for (const flag of PART_NODE_FLAGS) expect(argv, part).toContain(flag);
    }
  });

  it('the webhooks process runs every thread at niceness 10 (WEBHOOK_NICE), the request path at its own', () => {
    const nices = (pid: number) =>
      readdirSync(`/proc/${pid}/task`).map((t) => {
        const stat = readFileSync(`/proc/${pid}/task/${t}/stat`, 'utf8');
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
      });
    const own = os.getPriority();
    expect(new Set(nices(stack.pid('webhooks')!))).toEqual(new Set([Math.max(own, 10)]));
    for (const part of PARTS.filter((p) => p !== 'webhooks'))
      expect(new Set(nices(stack.pid(part)!)), part).toEqual(new Set([own]));
  });

  it('every part starts with a settled heap (kit/heap.ts), not the one loading its code grew', async () => {
    // Before any traffic but the account the set-up made. Unsettled, the young generation alone
    // stayed at up to 128 MB after start-up (drizzle's package.json copies made it ~250 MB).
    for (const part of PARTS) {
      const { samples } = await scrape(part);
      const heap = value(samples, 'nodejs_heap_size_total_bytes', { part });
      expect(heap, part).toBeGreaterThan(0);
      expect(heap! / 2 ** 20, part).toBeLessThan(64);
    }
  });

  it('every part exports its metrics, they move with traffic, and no label holds an id', async () => {
    const before = Object.fromEntries(
      await Promise.all(PARTS.map(async (p) => [p, await scrape(p)] as const)),
    );
    for (const part of PARTS) {
      const { samples } = before[part]!;
      // Process metrics, event-loop lag and the pool, on every part, labelled with the part.
      expect(value(samples, 'nodejs_eventloop_lag_p99_seconds', { part }), part).toBeGreaterThanOrEqual(0);
      expect(value(samples, 'process_resident_memory_bytes', { part }), part).toBeGreaterThan(0);
      expect(value(samples, 'mcs_db_pool_waiting_queries', { part }), part).toBe(0);
      expect(value(samples, 'mcs_db_pool_max_connections', { part }), part).toBeGreaterThan(0);
    }

    for (const [url, events] of [
      [good.url, ['order.created']],
      [bad.url, ['order.created']],
    ] as const) {
      const res = await stack.api(keys.secret_key, 'POST', '/v1/webhooks', { url, events });
      expect(res.status, res.text).toBe(200);
    }
    const orders = 3;
    for (let i = 0; i < orders; i++) {
      const res = await stack.api(keys.secret_key, 'POST', '/v1/orders', {
        customer: { name: `M ${i}`, phone: '+4915112345678' },
        currency: 'EUR',
        items: [{ name: 'Tea', unit_amount: 450, quantity: 1 }],
      });
      expect(res.status, res.text).toBe(200);
      expect((await stack.api(keys.secret_key, 'GET', `/v1/orders/${res.json.id}`)).status).toBe(200);
    }
    expect((await stack.api(keys.secret_key, 'GET', '/v1/nothing-here')).status).toBe(404);
    await good.waitFor(orders);
    // The failing endpoint: 3 attempts per order (first + 2 retries), then unhealthy.
    let after = before;
    for (let i = 0; i < 100; i++) {
      after = Object.fromEntries(await Promise.all(PARTS.map(async (p) => [p, await scrape(p)] as const)));
      const s = after.webhooks!.samples;
      if (
        value(s, 'mcs_webhook_endpoints', { status: 'unhealthy' }) === 1 &&
        (value(s, 'mcs_webhook_delivery_attempts_total', { outcome: 'failed' }) ?? 0) >= 1
      )
        break;
      await sleep(200);
    }

    const gw = after.gateway!.samples;
    const gw0 = before.gateway!.samples;
    const post = { route: '/v1/orders', method: 'POST', status: '200' };
    expect(value(gw, 'mcs_http_requests_total', post)).toBe(
      orders + (value(gw0, 'mcs_http_requests_total', post) ?? 0),
    );
    expect(value(gw, 'mcs_http_request_duration_seconds_count', post)).toBe(orders);
    expect(value(gw, 'mcs_http_request_duration_seconds_bucket', { ...post, le: '+Inf' })).toBe(orders);
    expect(
      value(gw, 'mcs_http_requests_total', { route: '/v1/orders/{id}', method: 'GET', status: '200' }),
    ).toBe(orders);
    expect(value(gw, 'mcs_http_requests_total', { route: 'unmatched', status: '404' })).toBe(1);

    const commerce = after.commerce!.samples;
    expect(
      value(commerce, 'mcs_rpc_requests_total', {
        rpc: 'mcs.commerce.v1.OrderService/CreateOrder',
        code: 'ok',
      }),
    ).toBe(orders);
    expect(
      value(commerce, 'mcs_rpc_request_duration_seconds_count', {
        rpc: 'mcs.commerce.v1.OrderService/CreateOrder',
      }),
    ).toBe(orders);
    expect(value(commerce, 'mcs_outbox_backlog_events', { schema: 'commerce' })).toBeGreaterThanOrEqual(0);
    expect(
      value(commerce, 'mcs_outbox_oldest_event_age_seconds', { schema: 'commerce' }),
    ).toBeGreaterThanOrEqual(0);
    expect(value(after.messaging!.samples, 'mcs_outbox_backlog_events', { schema: 'messaging' })).toBe(0);
    expect(
      value(after.accounts!.samples, 'mcs_rpc_requests_total', {
        rpc: 'mcs.accounts.v1.AccountService/AuthenticateKey',
        code: 'ok',
      }),
    ).toBeGreaterThanOrEqual(1);

    const wh = after.webhooks!.samples;
    expect(value(wh, 'mcs_webhook_delivery_attempts_total', { outcome: 'succeeded' })).toBe(orders);
    expect(value(wh, 'mcs_webhook_delivery_attempts_total', { outcome: 'retrying' })).toBeGreaterThanOrEqual(
      2,
    );
    expect(value(wh, 'mcs_webhook_delivery_attempts_total', { outcome: 'failed' })).toBeGreaterThanOrEqual(1);
    expect(value(wh, 'mcs_webhook_attempt_duration_seconds_count', { result: 'success' })).toBe(orders);
    expect(
      value(wh, 'mcs_webhook_attempt_duration_seconds_count', { result: 'failure' }),
    ).toBeGreaterThanOrEqual(3);
    expect(value(wh, 'mcs_webhook_endpoints', { status: 'enabled' })).toBe(1);
    expect(value(wh, 'mcs_webhook_endpoints', { status: 'unhealthy' })).toBe(1);
    expect(value(wh, 'mcs_webhook_pending_retries')).toBeGreaterThanOrEqual(0);
    expect(value(wh, 'mcs_webhook_delivery_lag_seconds')).toBeGreaterThanOrEqual(0);
    expect(value(wh, 'mcs_jetstream_consumer_pending_messages')).toBe(0);
    expect(value(wh, 'mcs_jetstream_consumer_ack_pending_messages')).toBeGreaterThanOrEqual(0);

    // Bounded labels: no resource, account, event or request id anywhere.
    for (const part of PARTS) {
      const ids = after[part]!.samples.flatMap((s) =>
        Object.values(s.labels).filter((v) =>
          /\b(?:acct|ord|evt|we|req|del|conv|msg|prod|pay|key)_[0-9A-Za-z]{6,}/.test(v),
        ),
      );
      expect(ids, `${part}: ids in labels`).toEqual([]);
    }
  }, 60_000);

  it('the alert rules and the dashboard name only metrics the parts export', async () => {
    const families = new Set<string>();
    for (const part of PARTS) for (const name of (await scrape(part)).families.keys()) families.add(name);
    const known = (name: string) =>
      families.has(name) || families.has(name.replace(/_(?:bucket|count|sum)$/, '')) || name === 'up'; // written by Prometheus itself for every scrape target

    const rules = parse(readFileSync(`${REPO_ROOT}deploy/observability/alerts.yaml`, 'utf8')) as {
      groups: Array<{
        name: string;
        rules: Array<{ alert: string; expr: string; for?: string; labels?: object }>;
      }>;
    };
    const exprs: string[] = [];
    expect(rules.groups.length).toBeGreaterThan(0);
    for (const group of rules.groups) {
      for (const rule of group.rules) {
        expect(rule.alert, JSON.stringify(rule)).toMatch(/^[A-Z][A-Za-z0-9]+$/);
        expect(typeof rule.expr).toBe('string');
        expect(rule.for ?? '1m').toMatch(/^\d+[smh]$/);
        exprs.push(rule.expr);
      }
    }
    const alerts = rules.groups.flatMap((g) => g.rules.map((r) => r.alert));
    for (const wanted of [
      'McsApiErrorRate',
      'McsWebhookDeliveryLag',
      'McsOutboxBacklog',
      'McsWebhookEndpointsUnhealthy',
    ])
      expect(alerts).toContain(wanted);

    const dashboard = JSON.parse(
      readFileSync(`${REPO_ROOT}deploy/observability/grafana-dashboard.json`, 'utf8'),
    ) as { panels: Array<{ title: string; targets: Array<{ expr: string }> }> };
    expect(dashboard.panels.length).toBeGreaterThan(10);
    for (const panel of dashboard.panels) for (const t of panel.targets) exprs.push(t.expr);

    const referenced = new Set<string>();
    for (const expr of exprs) {
      // Balanced brackets and quotes: the least a PromQL parser would refuse.
      for (const [open, close] of [
        ['(', ')'],
        ['{', '}'],
        ['[', ']'],
      ] as const)
        expect(expr.split(open).length, `${open}${close} in ${expr}`).toBe(expr.split(close).length);
      expect((expr.match(/"/g) ?? []).length % 2, expr).toBe(0);
      for (const m of expr.matchAll(/\b((?:mcs|nodejs|process)_[a-z0-9_]+|up)\b(?=\s*[{[)\s=<>!]|$)/g))
        referenced.add(m[1]!);
    }
    expect(referenced.size).toBeGreaterThan(10);
    const unknown = [...referenced].filter((name) => !known(name));
    expect(unknown, 'metrics named in deploy/observability that no part exports').toEqual([]);
  }, 30_000);
});
