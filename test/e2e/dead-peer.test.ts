// PostgreSQL and NATS connections whose server vanishes without a word: no FIN, no RST (a host
// that died, a failover behind a stable address, a NAT or conntrack entry dropped). The pool's
// TCP keep-alive (kit/db DB_KEEPALIVE_MS) and the NATS client's PINGs (kit/nats
// NATS_PING_INTERVAL_MS) must notice; without them a query waiting for its answer, or the NATS
// connection the relay and the webhooks consumer use, waits forever.
import { setTimeout as sleep } from 'node:timers/promises';
import { DEFAULT_DATABASE_URL, DEFAULT_NATS_URL } from '@mcs/kit/config';
import { createDatabase } from '@mcs/kit/db';
import { connectNats } from '@mcs/kit/nats';
import { canSilenceLinks, type SilentLink, silentLink } from '@mcs/testkit';
import type { NatsConnection } from 'nats';
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

let link: SilentLink;
beforeEach(async () => {
  if (canSilenceLinks) link = await silentLink();
});
afterEach(() => link?.close());

describe.skipIf(!canSilenceLinks)('a server that goes silent', () => {
  it('fails the query waiting for its answer within seconds, and the pool goes on with a new connection', async () => {
    const direct = new URL(process.env.DATABASE_URL ?? DEFAULT_DATABASE_URL);
    const route = await link.route(direct.hostname, Number(direct.port || 5432));
    const url = new URL(direct);
    url.hostname = route.host;
    url.port = String(route.port);
    const name = `dead-peer-${process.pid}`;
    const database = createDatabase(url.toString(), { name, max: 2, keepAliveMs: 1_000 });
    const admin = new pg.Client({ connectionString: direct.toString() });
    await admin.connect();
    try {
      expect((await database.pool.query('select 1 as one')).rows).toEqual([{ one: 1 }]);
      // The server answers this one in two minutes; its connection is silent until then.
      const waiting = database.pool.query('select pg_sleep(120)').then(
        () => 'answered',
        (err: Error) => err,
      );
      await sleep(300);
      link.silence();
      const silencedAt = Date.now();
      const outcome = await waiting;
      expect(outcome).toBeInstanceOf(Error);
      // 1 s of silence, then ten probes a second apart (libuv), and some slack.
      expect(Date.now() - silencedAt).toBeLessThan(20_000);
      link.restore();
      // The broken connection left the pool; the next query gets a new one (once the link's
      // neighbour entry, failed while it was down, is found again: a moment).
      let rows: unknown[] | undefined;
      for (let tries = 0; !rows; tries++) {
        rows = await database.pool.query('select 2 as two').then(
          (r) => r.rows,
          async (err: Error) => {
            if (tries >= 20) throw err;
            await sleep(250);
            return undefined;
          },
        );
      }
      expect(rows).toEqual([{ two: 2 }]);
    } finally {
      await database.close().catch(() => {});
      await admin.query(
        'select pg_terminate_backend(pid) from pg_stat_activity where application_name = $1',
        [`mcs-${name}`],
      );
      await admin.end();
    }
  });

  it('makes the NATS connection drop and reconnect instead of waiting for the server forever', async () => {
    const direct = new URL(process.env.NATS_URL ?? DEFAULT_NATS_URL);
    const route = await link.route(direct.hostname, Number(direct.port || 4222));
    let nc: NatsConnection | undefined;
    try {
      nc = await connectNats(`nats://${route.host}:${route.port}`, `dead-peer-${process.pid}`, undefined, {
        pingIntervalMs: 1_000,
      });
      const seen: string[] = [];
      const statusSeen = (type: string) =>
        new Promise<void>((resolve) => {
          const poll = setInterval(() => {
            if (seen.includes(type)) {
              clearInterval(poll);
              resolve();
            }
          }, 50);
        });
      void (async () => {
        for await (const s of nc!.status()) seen.push(s.type);
      })();
      await nc.flush();
      link.silence();
      const silencedAt = Date.now();
      await statusSeen('disconnect');
      // Two PINGs unanswered a second apart, and the third interval: about 3 s.
      expect(Date.now() - silencedAt).toBeLessThan(10_000);
      link.restore();
      await statusSeen('reconnect');
      await nc.flush();
    } finally {
      await nc?.close().catch(() => {});
    }
  });
});
