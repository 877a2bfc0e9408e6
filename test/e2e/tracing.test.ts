// OpenTelemetry traces (issue 11): with OTEL_EXPORTER_OTLP_ENDPOINT set, one order written with a
// client's `traceparent` makes one trace — the gateway's request, its Connect call, the commerce
// handler, the outbox publish to NATS, the webhooks consumer and the delivery attempt — exported
// over OTLP/HTTP to a collector this test runs; and the log lines inside it carry its trace id.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { type Receiver, type Stack, startReceiver, startStack } from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

interface ExportedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
}

/** A minimal OTLP/HTTP trace collector: decodes the JSON encoding of ExportTraceServiceRequest. */
async function startCollector(): Promise<{ url: string; spans: ExportedSpan[]; close(): Promise<void> }> {
  const spans: ExportedSpan[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.url !== '/v1/traces' || !String(req.headers['content-type']).startsWith('application/json')) {
        res.writeHead(415).end();
        return;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        resourceSpans: Array<{
          resource: { attributes: Array<{ key: string; value: { stringValue?: string } }> };
          scopeSpans: Array<{
            spans: Array<{
              traceId: string;
              spanId: string;
              parentSpanId?: string;
              name: string;
              kind: number;
              attributes?: Array<{ key: string; value: Record<string, unknown> }>;
            }>;
          }>;
        }>;
      };
      for (const rs of body.resourceSpans) {
        const service = rs.resource.attributes.find((a) => a.key === 'service.name')?.value.stringValue ?? '';
        for (const ss of rs.scopeSpans) {
          for (const s of ss.spans) {
            spans.push({
              service,
              traceId: s.traceId,
              spanId: s.spanId,
              parentSpanId: s.parentSpanId ?? '',
              name: s.name,
              kind: s.kind,
              attributes: Object.fromEntries(
                (s.attributes ?? []).map((a) => [a.key, Object.values(a.value)[0]]),
              ),
            });
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
// OTLP span kinds.
const SERVER = 2;
const CLIENT = 3;
const PRODUCER = 4;
const CONSUMER = 5;

describe('OpenTelemetry traces', () => {
  let collector: Awaited<ReturnType<typeof startCollector>>;
  let receiver: Receiver;
  let stack: Stack;
  let key: string;

  beforeAll(async () => {
    [collector, receiver] = await Promise.all([startCollector(), startReceiver()]);
    stack = await startStack({
      env: {
        WEBHOOK_ALLOW_HTTP: 'true',
        WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
        OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
        OTEL_BSP_SCHEDULE_DELAY: '100',
        LOG_LEVEL: 'debug',
      },
    });
    key = (await stack.createAccount()).secret_key;
    const res = await stack.api(key, 'POST', '/v1/webhooks', {
      url: receiver.url,
      events: ['order.created'],
    });
    expect(res.status, res.text).toBe(200);
  }, 120_000);

  afterAll(async () => {
    await stack?.stop();
    await receiver?.close();
    await collector?.close();
  });

  it('one trace from the REST request to the delivery attempt, continuing the client’s traceparent', async () => {
    const traceId = randomBytes(16).toString('hex');
    const clientSpan = randomBytes(8).toString('hex');
    const res = await stack.api(
      key,
      'POST',
      '/v1/orders',
      {
        customer: { name: 'Ada', phone: '+4915112345678' },
        currency: 'EUR',
        items: [{ name: 'Tea', unit_amount: 450, quantity: 1 }],
      },
      { headers: { traceparent: `00-${traceId}-${clientSpan}-01` } },
    );
    expect(res.status, res.text).toBe(200);
    await receiver.waitFor(1);

    const ofTrace = () => collector.spans.filter((s) => s.traceId === traceId);
    const find = (service: string, kind: number) =>
      ofTrace().find((s) => s.service === service && s.kind === kind);
    // Each part exports its spans in its own batches: wait for all six, not just the last one.
    const wanted: Array<[string, number]> = [
      ['mcs-gateway', SERVER],
      ['mcs-gateway', CLIENT],
      ['mcs-commerce', SERVER],
      ['mcs-commerce', PRODUCER],
      ['mcs-webhooks', CONSUMER],
      ['mcs-webhooks', CLIENT],
    ];
    for (let i = 0; i < 150 && !wanted.every(([service, kind]) => find(service, kind)); i++) await sleep(100);
    const spans = ofTrace();
    const summary = spans.map((s) => `${s.service} ${s.kind} ${s.name}`);

    const request = find('mcs-gateway', SERVER);
    const call = find('mcs-gateway', CLIENT);
    const handler = find('mcs-commerce', SERVER);
    const publish = find('mcs-commerce', PRODUCER);
    const consume = find('mcs-webhooks', CONSUMER);
    const attempt = find('mcs-webhooks', CLIENT);
    expect(request, summary.join('\n')).toBeDefined();
    expect(call, summary.join('\n')).toBeDefined();
    expect(handler, summary.join('\n')).toBeDefined();
    expect(publish, summary.join('\n')).toBeDefined();
    expect(consume, summary.join('\n')).toBeDefined();
    expect(attempt, summary.join('\n')).toBeDefined();

    // Parent links: client → gateway request → Connect call → commerce handler → publish →
    // consumer → attempt.
    expect(request!.parentSpanId).toBe(clientSpan);
    expect(request!.name).toBe('POST /v1/orders');
    expect(request!.attributes['http.response.status_code']).toBe(200);
    expect(call!.parentSpanId).toBe(request!.spanId);
    expect(call!.name).toBe('mcs.commerce.v1.OrderService/CreateOrder');
    expect(handler!.parentSpanId).toBe(call!.spanId);
    expect(publish!.parentSpanId).toBe(handler!.spanId);
    expect(consume!.parentSpanId).toBe(publish!.spanId);
    expect(attempt!.parentSpanId).toBe(consume!.spanId);
    expect(attempt!.attributes['http.response.status_code']).toBe(200);
    expect(attempt!.attributes['mcs.event_id']).toBe(JSON.parse(receiver.received[0]!.body).id);

    // The gateway's log line of that request carries the trace id and the request id.
    const lines = stack.logs.gateway
      .join('')
      .split('\n')
      .filter((l) => l.includes(traceId));
    expect(lines.length, 'gateway log lines with the trace id').toBeGreaterThan(0);
    const line = JSON.parse(lines[0]!) as Record<string, unknown>;
    expect(line.trace_id).toBe(traceId);
    expect(line.requestId).toBe(res.headers.get('request-id'));
  }, 60_000);

  it('a request without traceparent starts a trace of its own', async () => {
    const res = await stack.api(key, 'GET', '/v1/orders?limit=1');
    expect(res.status).toBe(200);
    let root: ExportedSpan | undefined;
    for (let i = 0; i < 100 && !root; i++) {
      root = collector.spans.find(
        (s) =>
          s.service === 'mcs-gateway' &&
          s.kind === SERVER &&
          s.attributes['mcs.request_id'] === res.headers.get('request-id'),
      );
      if (!root) await sleep(100);
    }
    expect(root).toBeDefined();
    expect(root!.parentSpanId).toBe('');
    expect(root!.name).toBe('GET /v1/orders');
    let child: ExportedSpan | undefined;
    for (let i = 0; i < 100 && !child; i++) {
      child = collector.spans.find((s) => s.traceId === root!.traceId && s.service === 'mcs-commerce');
      if (!child) await sleep(100);
    }
    expect(child?.kind).toBe(SERVER);
    expect(child?.parentSpanId).not.toBe('');
  }, 30_000);
});
