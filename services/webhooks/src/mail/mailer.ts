// The mailer: sends the notifications outbox (webhooks.notifications), one e-mail per row.
//
// The engine writes a row in the same transaction that turns an endpoint unhealthy, disables it
// on a 410, or marks its early warning (only the transaction that makes the transition writes
// one), so each transition has exactly one row. A row is claimed with FOR UPDATE SKIP LOCKED and stays locked while its message is sent;
// `sent_at` is set in that same transaction. So two mailers (replicas) never send one row at the
// same time, and a row is never lost: if sending fails, the row is retried with backoff.
//
// A crash between the SMTP server accepting the message and the commit of `sent_at` is the one
// window left (milliseconds wide): the lock goes with the connection, and the next mailer sends
// the row again. Exactly-once across two systems (our database and someone's SMTP server) is not
// possible, so the resend is the same message: the Message-ID is derived from the notification
// id (`<ntf_…@mcs.webhooks>`) and mail systems that deduplicate by Message-ID show it once. We
// prefer that at-least-once window to the alternative (mark first, send after), which loses the
// e-mail on a crash.
import type { Db } from '@mcs/kit/db';
import type { Logger } from '@mcs/kit/log';
import { sql } from 'drizzle-orm';
import { isNoticeKind, type UnhealthyNotice } from '../domain/health.ts';
import type { AccountDirectory } from './accounts.ts';
import { messageFor } from './message.ts';
import type { MailTransport } from './transport.ts';

export interface MailerOptions {
  db: Db;
  directory: AccountDirectory;
  transport: MailTransport;
  log: Logger;
  from: string;
  /** Fallback poll for rows written by other replicas or left by a crash; default 5 s. */
  pollMs?: number;
}

export interface Mailer {
  /** Sends what is due now (the engine calls it when an endpoint turns unhealthy). */
  wake(): void;
  /** Sends every due notification; resolves how many were handled. */
  runOnce(): Promise<number>;
  stop(): Promise<void>;
}

/** Delay before trying a row again after its `attempts`-th failure: 5 s doubling, at most 10 min. */
export function backoffMs(attempts: number): number {
  return Math.min(5_000 * 2 ** Math.max(0, attempts - 1), 600_000);
}

type Row = {
  id: string;
  account_id: string;
  endpoint_id: string;
  kind: string;
  detail: string;
  attempts: number;
};

export function createMailer(opts: MailerOptions): Mailer {
  const { db, log } = opts;
  let stopped = false;
  let running: Promise<number> | null = null;
  let again = false;

  /** Handles one due row in its own transaction; false when none is due. */
  async function sendOne(): Promise<boolean> {
    return db.transaction(async (tx) => {
      const { rows } = await tx.execute<Row>(sql`
        select id, account_id, endpoint_id, kind, detail, attempts from webhooks.notifications
         where sent_at is null and next_attempt_at <= now()
         order by next_attempt_at limit 1 for update skip locked`);
      const row = rows[0];
      if (!row) return false;
      const done = (error: string | null) =>
        tx.execute(
          sql`update webhooks.notifications set sent_at = now(), last_error = ${error} where id = ${row.id}`,
        );
      try {
        const { kind } = row;
        if (!isNoticeKind(kind)) {
          log.error({ notification: row.id, kind: row.kind }, 'unknown notification kind, dropping it');
          await done(`unknown kind ${row.kind}`);
          return true;
        }
        const to = await opts.directory.emailOf(row.account_id);
        if (!to) {
          log.warn({ notification: row.id, account: row.account_id }, 'account has no e-mail address');
          await done('the account has no e-mail address');
          return true;
        }
        const notice = JSON.parse(row.detail) as UnhealthyNotice;
        await opts.transport.send(
          messageFor(kind, {
            notificationId: row.id,
            endpointId: row.endpoint_id,
            notice,
            from: opts.from,
            to,
          }),
        );
        await done(null);
        log.info({ notification: row.id, endpoint: row.endpoint_id, kind: row.kind }, 'endpoint e-mail sent');
      } catch (err) {
        const message = (err as Error).message;
        const attempts = row.attempts + 1;
        log.warn({ notification: row.id, attempts, err: message }, 'could not send e-mail, will retry');
        await tx.execute(sql`
          update webhooks.notifications
             set attempts = ${attempts}, last_error = ${message.slice(0, 500)},
                 next_attempt_at = now() + ${backoffMs(attempts)} * interval '1 millisecond'
           where id = ${row.id}`);
      }
      return true;
    });
  }

  async function drain(): Promise<number> {
    let n = 0;
    while (!stopped && (await sendOne())) n++;
    return n;
  }

  function runOnce(): Promise<number> {
    if (running) {
      again = true; // a wake-up during a run: run once more after it
      return running;
    }
    running = (async () => {
      let total = 0;
      try {
        do {
          again = false;
          total += await drain();
        } while (again && !stopped);
      } finally {
        running = null;
      }
      return total;
    })();
    return running;
  }

  const tick = () => {
    runOnce().catch((err) => log.warn({ err: (err as Error).message }, 'mailer run failed'));
  };
  const poller = setInterval(tick, opts.pollMs ?? 5_000);
  tick(); // rows left unsent by a previous process

  return {
    wake: tick,
    runOnce,
    async stop() {
      stopped = true;
      clearInterval(poller);
      await running?.catch(() => {});
      await opts.transport.close();
    },
  };
}
