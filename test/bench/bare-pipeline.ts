// The "bare" delivery baseline (issue 9, target 4): JetStream → sign (HMAC-SHA256) → undici
// POST → ack, nothing else. No database, no fan-out table, no retries beyond a nak. Forked by
// delivery-throughput.ts with the same receivers the project delivers to; it publishes the same
// number of events (the project's own envelope, from a delivery of the warm-up) to a private
// stream, and only then starts draining it, so it drains a standing backlog as the project does.
//
// Each event goes to every receiver; the message is acked when all of them answered 2xx. Up to
// `inflight` messages are handled at once (the project's consumer handles 32) and each receiver
// gets at most `perEndpoint` connections (the project's WEBHOOK_ENDPOINT_CONCURRENCY default, 8).
//
// Messages: parent → child one Config; child → parent {kind:'published'|'consuming'|'done'|'error'}.
import { createHmac } from 'node:crypto';
import { AckPolicy, connect, DeliverPolicy, type JsMsg, headers as natsHeaders, StorageType } from 'nats';
import { Pool } from 'undici';

export interface BarePipelineConfig {
  natsUrl: string;
  /** Stream name (the parent deletes it too if this process dies). */
  stream: string;
  receivers: string[];
  count: number;
  /** A delivered envelope (JSON) to copy; id and data.customer.name are replaced per event. */
  template: string;
  marker: string;
  /** Event ids are `${idPrefix}${i}`. */
  idPrefix: string;
  inflight: number;
  perEndpoint: number;
  secret: string;
}

export type BarePipelineMessage =
  | { kind: 'published'; ms: number }
  | { kind: 'consuming'; at: number }
  | { kind: 'done'; acked: number; posts: number; failedPosts: number }
  | { kind: 'error'; message: string };

const send = (m: BarePipelineMessage) => process.send?.(m);

async function run(cfg: BarePipelineConfig): Promise<void> {
  const nc = await connect({ servers: cfg.natsUrl });
  const jsm = await nc.jetstreamManager();
  const subject = `${cfg.stream}.events`;
  await jsm.streams.add({ name: cfg.stream, subjects: [subject], storage: StorageType.File });
  const js = nc.jetstream();

  // Publish the backlog first: 256 publishes in flight.
  const env = JSON.parse(cfg.template) as { id: string; data: { customer?: { name?: string } } };
  const t0 = performance.now();
  let next = 0;
  const publisher = async () => {
    while (next < cfg.count) {
      const i = next++;
      env.id = `${cfg.idPrefix}${i}`;
      env.data.customer = { ...(env.data.customer ?? {}), name: cfg.marker };
      const h = natsHeaders();
      h.set('event-id', env.id);
      await js.publish(subject, new TextEncoder().encode(JSON.stringify(env)), { headers: h });
    }
  };
  await Promise.all(Array.from({ length: 256 }, publisher));
  send({ kind: 'published', ms: performance.now() - t0 });

  await jsm.consumers.add(cfg.stream, {
    durable_name: 'bare',
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    ack_wait: 30_000_000_000,
    max_ack_pending: 10_000,
  });
  const consumer = await js.consumers.get(cfg.stream, 'bare');
  const pools = cfg.receivers.map((r) => {
    const u = new URL(r);
    return {
      pool: new Pool(u.origin, { connections: cfg.perEndpoint, pipelining: 1, keepAliveTimeout: 60_000 }),
      path: u.pathname,
    };
  });
  let acked = 0;
  let posts = 0;
  let failedPosts = 0;
  const inflight = new Set<Promise<void>>();
  let allAcked: () => void = () => {};
  const done = new Promise<void>((r) => {
    allAcked = r;
  });
  send({ kind: 'consuming', at: performance.timeOrigin + performance.now() });
  const messages = await consumer.consume({ max_messages: cfg.inflight * 4 });
  const handle = async (m: JsMsg) => {
    const body = new TextDecoder().decode(m.data);
    const id = m.headers?.get('event-id') ?? '';
    const ts = String(Math.floor(Date.now() / 1000));
    const signature = `v1,${createHmac('sha256', cfg.secret).update(`${id}.${ts}.${body}`).digest('base64')}`;
    const results = await Promise.all(
      pools.map(async ({ pool, path }) => {
        try {
          const res = await pool.request({
            path,
            method: 'POST',
            headers: {
              'content-type': 'application/json',
              'webhook-id': id,
              'webhook-timestamp': ts,
              'webhook-signature': signature,
            },
            body,
          });
          await res.body.dump();
          return res.statusCode >= 200 && res.statusCode < 300;
        } catch {
          return false;
        }
      }),
    );
    posts += results.length;
    const failed = results.filter((ok) => !ok).length;
    failedPosts += failed;
    if (failed === 0) {
      m.ack();
      if (++acked >= cfg.count) allAcked();
    } else m.nak(500);
  };
  const loop = (async () => {
    for await (const m of messages) {
      const p = handle(m).finally(() => inflight.delete(p));
      inflight.add(p);
      if (inflight.size >= cfg.inflight) await Promise.race(inflight);
    }
  })();
  await done;
  await Promise.all(inflight);
  messages.stop();
  await loop.catch(() => {});
  send({ kind: 'done', acked, posts, failedPosts });
  await Promise.all(pools.map((p) => p.pool.close()));
  await jsm.streams.delete(cfg.stream).catch(() => {});
  await nc.close();
}

process.once('message', (cfg: BarePipelineConfig) => {
  run(cfg).then(
    () => setTimeout(() => process.exit(0), 2_000).unref(),
    (err: unknown) => {
      send({ kind: 'error', message: err instanceof Error ? err.message : String(err) });
      setTimeout(() => process.exit(1), 500).unref();
    },
  );
});
