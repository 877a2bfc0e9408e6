// Attempts to listen endpoints over real NATS: what the session answers is recorded as it can be.
import { randomBytes } from 'node:crypto';
import { DEFAULT_NATS_URL } from '@mcs/kit/config';
import { listenSubject } from '@mcs/kit/listen';
import { connect, type NatsConnection } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createListenSender } from './listen.ts';
import { createSender } from './sender.ts';

let nc: NatsConnection;
beforeAll(async () => {
  nc = await connect({ servers: process.env.NATS_URL ?? DEFAULT_NATS_URL });
});
afterAll(() => nc?.close());

describe('listen sender', () => {
  it("keeps the session's latency within the hop: a number past what the attempt log holds is not taken", async () => {
    const prefix = `listentest${randomBytes(4).toString('hex')}`;
    const http = createSender({ timeoutMs: 2_000, allowPrivate: true, connectionsPerOrigin: 4 });
    const sender = createListenSender({ nc, prefix, timeoutMs: 2_000, http });
    const sub = nc.subscribe(listenSubject(prefix, 'we_1'), {
      callback: (_err, msg) =>
        msg.respond(
          JSON.stringify({ status_code: 200, error: null, latency_ms: 1e12, response_excerpt: 'ok' }),
        ),
    });
    await nc.flush();
    try {
      const result = await sender.send(
        'mcs-listen:',
        '{}',
        { 'webhook-id': 'evt_1' },
        {
          endpointId: 'we_1',
          deliveryId: 'dlv_1',
          attempt: 1,
        },
      );
      expect(result).toMatchObject({ ok: true, statusCode: 200, excerpt: 'ok' });
      // attempts.latency_ms is an integer column: at most 2^31 - 1.
      expect(result.latencyMs).toBeLessThan(2_000);
    } finally {
      sub.unsubscribe();
      await sender.close();
    }
  });
});
