// The outbox relay's second way out (relay.ts): rows nobody published. Rows older than `minAgeMs`
// (a few seconds: left by a crash, a failed publish, or a replica that did not hand them over)
// are published by a poll that takes them with FOR UPDATE SKIP LOCKED, so several replicas share
// them, and deleted in the same transaction. Fresh rows are left to the fast path of the process
// that wrote them, so poll and fast path do not race for them; when they do meet (a row older
// than minAgeMs still in flight), the same event is published twice and JetStream drops the
// second (its event id is the Nats-Msg-Id).
import { headers as natsHeaders } from 'nats';
import type pg from 'pg';
import type { Logger } from './log.ts';
import type { EventPublisher, StreamNames } from './nats.ts';
import { OUTBOX_SEQ_HEADER, RESOURCE_VERSION_HEADER } from './outbox.ts';

export interface OutboxPollOptions {
  pool: pg.Pool;
  /** The outbox table, schema-qualified and quoted. */
  table: string;
  js: EventPublisher;
  names: StreamNames;
  log: Logger;
  /** How often the poll looks for rows nobody published. */
  pollMs: number;
  /** The poll takes only rows at least this old. */
  minAgeMs: number;
  /** Rows per round. */
  batch: number;
}

export interface OutboxPoll {
  /** Every row now, however fresh (Relay.wake). */
  wake(): void;
  /** Publishes those of `ids` that exist, i.e. committed; a lost race with the poll skips them. */
  verify(ids: string[]): void;
  /**
   * Events JetStream acked whose rows the fast path could not delete (PostgreSQL gone between the
   * publish and the delete): the poll deletes those rows without publishing them again, since
   * after an outage longer than the stream's duplicate window (15 s, nats.ts) a republish would
   * be stored a second time. Bounded: a republish is harmless (the webhooks consumer records an
   * event id once), only wasteful.
   */
  ackedNotDeleted(ids: readonly string[]): void;
  /** Stops polling and waits for the rounds under way. */
  stop(): Promise<void>;
}

const MAX_ACKED_NOT_DELETED = 10_000;

export function startOutboxPoll(opts: OutboxPollOptions): OutboxPoll {
  const { pool, table, js, names, log, minAgeMs, batch } = opts;
  const acked = new Set<string>();
  const verifying = new Set<Promise<void>>();
  let stopped = false;
  let running: Promise<void> | null = null;
  let again = false;
  /** The next drain takes fresh rows too (wake()). */
  let all = false;
  let failures = 0;

  /** One round of the poll: rows at least `minAge` old (or the rows of `ids`), oldest first. */
  async function drainOnce(minAge: number, ids?: string[]): Promise<number> {
    const client = await pool.connect();
    try {
      await client.query('begin');
      const { rows } = await client.query<{
        seq: number;
        event_id: string;
        type: string;
        payload: Buffer;
        resource_version: number | null;
      }>(
        ids
          ? `select seq, event_id, type, payload, resource_version from ${table} where event_id = any($2::text[])
              order by seq limit $1 for update skip locked`
          : `select seq, event_id, type, payload, resource_version from ${table}
              where created_at <= now() - make_interval(secs => $2)
              order by seq limit $1 for update skip locked`,
        [ids ? ids.length : batch, ids ?? minAge / 1000],
      );
      if (rows.length > 0) {
        await Promise.all(
          rows
            .filter((r) => !acked.has(r.event_id))
            .map((r) => {
              const h = natsHeaders();
              h.set(OUTBOX_SEQ_HEADER, String(r.seq));
              if (r.resource_version !== null) h.set(RESOURCE_VERSION_HEADER, String(r.resource_version));
              return js.publish(names.subject(r.type), r.payload, {
                msgID: r.event_id,
                timeout: 5_000,
                headers: h,
              });
            }),
        );
        await client.query(`delete from ${table} where seq = any($1::bigint[])`, [rows.map((r) => r.seq)]);
      }
      await client.query('commit');
      for (const r of rows) acked.delete(r.event_id);
      return rows.length;
    } catch (err) {
      await client.query('rollback').catch(() => {});
      throw err;
    } finally {
      client.release();
    }
  }

  /** One cheap statement when there is nothing to do, the common case. */
  async function anyAged(minAge: number): Promise<boolean> {
    const { rows } = await pool.query(
      `select 1 from ${table} where created_at <= now() - make_interval(secs => $1) limit 1`,
      [minAge / 1000],
    );
    return rows.length > 0;
  }

  async function drain(): Promise<void> {
    do {
      again = false;
      const minAge = all ? 0 : minAgeMs;
      all = false;
      try {
        if (await anyAged(minAge)) while (!stopped && (await drainOnce(minAge)) === batch) {}
        failures = 0;
      } catch (err) {
        failures++;
        log.warn({ err: (err as Error).message, failures }, 'outbox relay: publish failed, will retry');
        await new Promise((r) => setTimeout(r, Math.min(5_000, 100 * 2 ** failures)));
        again = true;
      }
    } while (again && !stopped);
  }

  function poll(): void {
    if (stopped) return;
    if (running) {
      again = true;
      return;
    }
    running = drain().finally(() => {
      running = null;
    });
  }

  const timer = setInterval(poll, opts.pollMs);
  timer.unref();
  poll();

  return {
    wake() {
      all = true;
      poll();
    },
    verify(ids) {
      if (stopped) return;
      const p: Promise<void> = drainOnce(0, ids)
        .then(
          () => {},
          (err: Error) => log.warn({ err: err.message }, 'outbox relay: publish failed, the poll will retry'),
        )
        .finally(() => verifying.delete(p));
      verifying.add(p);
    },
    ackedNotDeleted(ids) {
      for (const id of ids) {
        if (acked.size >= MAX_ACKED_NOT_DELETED) break;
        acked.add(id);
      }
    },
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running;
      await Promise.allSettled([...verifying]);
    },
  };
}
