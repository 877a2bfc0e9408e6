// A recovery's backlog rule (domain/replays.ts backlogSql) on a real database: which events of the
// log an endpoint gets again, case by case — failed, skipped, arrived while it was disabled (no
// delivery), and what it must not get: events it received or is receiving (a resend's included),
// types its subscription does not take ("*" is the resource types; operational types only when
// named), the event about itself, events from before it existed, other accounts and modes, test
// events, events after the recovery began. A second recovery finds nothing left.
import type { Caller } from '@mcs/kit/caller';
import { newId } from '@mcs/kit/ids';
import { createLogger } from '@mcs/kit/log';
import { freshDatabase, type MigratedDatabase } from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateWebhooks } from '../db/migrate.ts';
import { createEndpoint } from '../domain/endpoints.ts';
import { fanoutDeliveryId, type QueuedDelivery } from '../domain/fanout.ts';
import { startBulkResend, startRecovery } from '../domain/replays.ts';
import { createSecretBox } from '../domain/secrets.ts';
import { createReplayer } from './replayer.ts';

let db: MigratedDatabase;
const box = createSecretBox(Buffer.alloc(32, 7));
const log = createLogger('replayer-test', process.env.TEST_LOG ?? 'silent');

beforeAll(async () => {
  db = await freshDatabase(migrateWebhooks);
});
afterAll(() => db?.close());

const caller: Caller = { accountId: 'acct_rcv1', livemode: false };
let clock = Date.now() - 60_000;
const tick = () => (clock += 10);

/** An event of the log at the next tick; `about`: the endpoint an operational event is about. */
async function event(
  type: string,
  opts: { account?: string; livemode?: boolean; test?: boolean; about?: string; at?: number } = {},
) {
  const at = opts.at ?? tick();
  const id = newId('evt', at);
  const body = JSON.stringify({
    id,
    type,
    data: opts.about ? { object: 'webhook_endpoint', id: opts.about } : {},
  });
  await db.pool.query(
    `insert into webhooks.events (id, account_id, livemode, type, payload, body, test, created_at)
     values ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [
      id,
      opts.account ?? caller.accountId,
      opts.livemode ?? false,
      type,
      Buffer.alloc(0),
      body,
      opts.test ?? false,
      new Date(at),
    ],
  );
  return { id, at };
}

/** A delivery of `ev` to `endpointId` (fan-out's, or a resend). */
async function delivery(
  ev: { id: string; at: number },
  endpointId: string,
  status: string,
  origin: 'event' | 'resend' = 'event',
) {
  const id = origin === 'event' ? fanoutDeliveryId(ev.id, new Date(ev.at), endpointId) : newId('dlv', tick());
  await db.pool.query(
    `insert into webhooks.deliveries (id, event_id, endpoint_id, account_id, livemode, status, attempts, origin, created_at)
     values ($1, $2, $3, $4, false, $5, 1, $6, now())`,
    [id, ev.id, endpointId, caller.accountId, status, origin],
  );
  return id;
}

describe('recovery backlog', () => {
  it('sends every event the endpoint missed since `since`, and nothing else', async () => {
    const since = new Date(clock);
    const before = await event('order.created'); // before the endpoint existed
    const created = new Date(tick());
    const { endpoint } = await db.db.transaction((tx) =>
      createEndpoint(
        tx,
        caller,
        { url: 'http://127.0.0.1:9/hook', events: ['*', 'webhook_endpoint.disabled'] },
        { box, policy: { allowHttp: true, allowPrivate: true } },
        created,
      ),
    );
    const ep = endpoint.id;
    const other = 'we_other';

    const want = {
      disabledMeanwhile: await event('order.created'),
      peerDisabled: await event('webhook_endpoint.disabled', { about: other }),
      failed: await event('order.updated'),
      skipped: await event('order.created'),
      failedTwice: await event('order.created'),
      resendFailed: await event('order.created'),
    };
    const not = {
      own: await event('webhook_endpoint.disabled', { about: ep }),
      notNamed: await event('webhook_endpoint.enabled', { about: other }),
      otherAccount: await event('order.created', { account: 'acct_rcv2' }),
      live: await event('order.created', { livemode: true }),
      test: await event('order.created', { test: true }),
      succeeded: await event('order.created'),
      pending: await event('order.created'),
      resent: await event('order.created'),
      resending: await event('order.created'),
    };
    const failedRow = await delivery(want.failed, ep, 'failed');
    const skippedRow = await delivery(want.skipped, ep, 'skipped');
    const failedTwiceRow = await delivery(want.failedTwice, ep, 'failed');
    const failedResendRow = await delivery(want.failedTwice, ep, 'failed', 'resend');
    await delivery(want.resendFailed, ep, 'failed', 'resend');
    await delivery(not.succeeded, ep, 'succeeded');
    await delivery(not.pending, ep, 'pending');
    await delivery(not.resent, ep, 'failed');
    await delivery(not.resent, ep, 'succeeded', 'resend');
    await delivery(not.resending, ep, 'pending', 'resend');

    const now = new Date(tick());
    const later = await event('order.created', { at: now.getTime() + 5 }); // after the recovery began
    const queued: QueuedDelivery[] = [];
    const replayer = createReplayer({
      db: db.db,
      log,
      rate: 4,
      leaseMs: 10_000,
      enqueue: (items) => queued.push(...items),
      pollMs: 60_000,
    });
    try {
      const { replay } = await db.db.transaction((tx) => startRecovery(tx, caller, ep, since, now));
      expect(replay.total).toBe(6);
      // 4 a chunk: two chunks, then it is complete (each next chunk made due at once: a second
      // back, since the replayer's clock has milliseconds and now() microseconds).
      for (let i = 0; i < 10; i++) {
        await replayer.runDue();
        const { rows } = await db.pool.query(
          `update webhooks.replays set next_run_at = now() - interval '1 second'
            where id = $1 and status = 'running' returning id`,
          [replay.id],
        );
        if (rows.length === 0) break;
      }
      const { rows: job } = await db.pool.query('select status, queued from webhooks.replays where id = $1', [
        replay.id,
      ]);
      expect(job[0]).toMatchObject({ status: 'completed', queued: 6 });

      const { rows } = await db.pool.query(
        `select id, event_id, origin, status, replay_id from webhooks.deliveries where id = any($1)`,
        [queued.map((q) => q.deliveryId)],
      );
      expect(rows).toHaveLength(6);
      expect(
        rows.every((r) => r.status === 'pending' && r.replay_id === replay.id && r.origin === 'event'),
      ).toBe(true);
      expect(new Set(rows.map((r) => r.event_id))).toEqual(new Set(Object.values(want).map((e) => e.id)));
      // Failed and skipped ones in place; of a failed fan-out delivery and a failed resend, one.
      const ids = new Set(rows.map((r) => r.id));
      for (const id of [failedRow, skippedRow, failedTwiceRow]) expect(ids.has(id)).toBe(true);
      expect(ids.has(failedResendRow)).toBe(false);
      // The new ones have fan-out's ids.
      for (const e of [want.disabledMeanwhile, want.peerDisabled, want.resendFailed]) {
        expect(ids.has(fanoutDeliveryId(e.id, new Date(e.at), ep))).toBe(true);
      }
      for (const e of [before, ...Object.values(not)]) {
        expect(rows.map((r) => r.event_id)).not.toContain(e.id);
      }

      // Nothing is left but the event that came after the first began: a second recovery finds
      // that one only, once the first's are delivered.
      await db.pool.query(`update webhooks.deliveries set status = 'succeeded' where id = any($1)`, [
        [...ids],
      ]);
      const again = await db.db.transaction((tx) =>
        startRecovery(tx, caller, ep, since, new Date(later.at + 10)),
      );
      expect(again.replay.total).toBe(1);
    } finally {
      await replayer.stop();
    }
  });
});

describe('a replay meeting the retention purge', () => {
  // The purge (domain/retention.ts) locks the events it removes (FOR UPDATE), then looks for
  // their deliveries and removes events and deliveries together. A chunk that queued deliveries
  // of those events meanwhile, unlocked, left them pending for events that were gone.
  it.each(['resend', 'recovery'] as const)(
    '%s: queues nothing for events the purge removes while its chunk runs',
    async (kind) => {
      const account = { accountId: `acct_rcv_${kind}`, livemode: false };
      const since = new Date(tick());
      const { endpoint } = await db.db.transaction((tx) =>
        createEndpoint(
          tx,
          account,
          { url: 'http://127.0.0.1:9/hook', events: ['*'] },
          { box, policy: { allowHttp: true, allowPrivate: true } },
          new Date(tick()),
        ),
      );
      const old = [
        await event('order.created', { account: account.accountId }),
        await event('order.updated', { account: account.accountId }),
      ];
      const ids = old.map((e) => e.id);
      const now = new Date(tick());
      const replayer = createReplayer({
        db: db.db,
        log,
        rate: 10,
        leaseMs: 10_000,
        enqueue: () => {},
        pollMs: 60_000,
      });
      const purge = await db.pool.connect();
      try {
        const input = { since, until: now, type: undefined, endpoint: undefined };
        if (kind === 'resend') await db.db.transaction((tx) => startBulkResend(tx, account, input, 10, now));
        else await db.db.transaction((tx) => startRecovery(tx, account, endpoint.id, since, now));
        // The purge has locked the events it is about to remove, and found no delivery of them.
        await purge.query('begin');
        await purge.query('select id from webhooks.events where id = any($1) for update', [ids]);
        const running = replayer.runDue();
        await new Promise((r) => setTimeout(r, 300));
        await purge.query('delete from webhooks.events where id = any($1)', [ids]);
        await purge.query('commit');
        await running;
        const { rows } = await db.pool.query('select id from webhooks.deliveries where event_id = any($1)', [
          ids,
        ]);
        expect(rows).toEqual([]);
        expect(endpoint.status).toBe('enabled');
      } finally {
        await purge.query('rollback').catch(() => {});
        purge.release();
        await replayer.stop();
      }
    },
  );
});
