// auto_recover's probes against real PostgreSQL and NATS: a listen endpoint (mcs listen) is
// probed through its session like any attempt to it.
import { randomBytes } from 'node:crypto';
import type { Caller } from '@mcs/kit/caller';
import { DEFAULT_NATS_URL } from '@mcs/kit/config';
import { LISTEN_URL, listenSubject } from '@mcs/kit/listen';
import { createLogger } from '@mcs/kit/log';
import { freshDatabase, type MigratedDatabase } from '@mcs/testkit';
import { connect, type NatsConnection } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateWebhooks } from '../db/migrate.ts';
import { createEndpoint } from '../domain/endpoints.ts';
import { createSecretBox } from '../domain/secrets.ts';
import { createListenSender } from './listen.ts';
import { createProber } from './prober.ts';
import { createSender } from './sender.ts';

let db: MigratedDatabase;
let nc: NatsConnection;
const box = createSecretBox(Buffer.alloc(32, 5));
const log = createLogger('prober-test', process.env.TEST_LOG ?? 'silent');

beforeAll(async () => {
  db = await freshDatabase(migrateWebhooks);
  nc = await connect({ servers: process.env.NATS_URL ?? DEFAULT_NATS_URL });
});
afterAll(async () => {
  await nc?.close();
  await db?.close();
});

describe('prober', () => {
  it('probes an unhealthy listen endpoint through its session: no session is a failed probe, a 2xx re-enables it', async () => {
    const caller: Caller = { accountId: `acct_${randomBytes(4).toString('hex')}`, livemode: false };
    const { endpoint } = await db.db.transaction((tx) =>
      createEndpoint(
        tx,
        caller,
        { url: LISTEN_URL, events: ['order.created'], autoRecover: true },
        { box, policy: { allowHttp: true, allowPrivate: true } },
      ),
    );
    const due = () =>
      db.pool.query(
        `update webhooks.endpoints set status = 'unhealthy', probe_at = now() - interval '1 second' where id = $1`,
        [endpoint.id],
      );
    await due();
    const prefix = `probertest${randomBytes(4).toString('hex')}`;
    const http = createSender({ timeoutMs: 2_000, allowPrivate: true, connectionsPerOrigin: 4 });
    const sender = createListenSender({ nc, prefix, timeoutMs: 2_000, http });
    const prober = createProber({
      db: db.db,
      box,
      sender,
      log,
      intervalMs: 60_000,
      leaseMs: 15_000,
      onRecovered: () => {},
      enqueue: () => {},
    });
    const row = async () =>
      (
        await db.pool.query(
          'select status, probes, last_error, probe_at from webhooks.endpoints where id = $1',
          [endpoint.id],
        )
      ).rows[0];
    try {
      // No session connected: a failed probe, the next one after the interval (not retried at
      // every lease for want of running at all).
      expect(await prober.runDue()).toBe(1);
      const failed = await row();
      expect(failed).toMatchObject({
        status: 'unhealthy',
        probes: 1,
        last_error: 'no mcs listen session is connected to this endpoint',
      });
      expect(new Date(failed.probe_at).getTime() - Date.now()).toBeGreaterThan(60_000);

      // A session answering 2xx: the probe re-enables the endpoint.
      const pings: string[] = [];
      const sub = nc.subscribe(listenSubject(prefix, endpoint.id), {
        callback: (_err, msg) => {
          pings.push(JSON.parse(msg.json<{ body: string }>().body).type);
          msg.respond(
            JSON.stringify({ status_code: 200, error: null, latency_ms: 1, response_excerpt: 'ok' }),
          );
        },
      });
      await nc.flush();
      await due();
      try {
        expect(await prober.runDue()).toBe(1);
        expect(pings).toEqual(['ping']);
        expect(await row()).toMatchObject({ status: 'enabled' });
      } finally {
        sub.unsubscribe();
      }
    } finally {
      await sender.close();
    }
  });
});
