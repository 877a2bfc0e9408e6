// auto_recover: an unhealthy endpoint that asked for it gets a probe — a signed `ping` event,
// signed and sent like any delivery but recorded nowhere — when its probe_at is due. The first
// is due WEBHOOK_PROBE_INTERVAL after it turned unhealthy (record.ts), each next one twice as
// long after the one before, up to 24 h. A 2xx answer re-enables the endpoint and starts a
// recovery of its backlog since it began failing (domain/replays.ts), in one transaction.
//
// A probe is claimed by moving probe_at a lease ahead (FOR UPDATE SKIP LOCKED), so replicas
// do not probe the same endpoint together, and one whose prober died is probed again once that
// lease ran out.
import type { Db } from '@mcs/kit/db';
import { newId } from '@mcs/kit/ids';
import type { Logger } from '@mcs/kit/log';
import { sql } from 'drizzle-orm';
import { enableEndpoint } from '../domain/endpoints.ts';
import type { QueuedDelivery } from '../domain/fanout.ts';
import { recordRecovery } from '../domain/replays.ts';
import type { SecretBox } from '../domain/secrets.ts';
import type { Sender } from './sender.ts';
import { serviceSignature, standardSignature } from './sign.ts';

const DAY_MS = 24 * 3600_000;

/** Probes one process sends at once at most (one statement's endpoints). */
export const PROBE_BATCH = 16;

export interface ProberOptions {
  db: Db;
  box: SecretBox;
  sender: Sender;
  log: Logger;
  /** WEBHOOK_PROBE_INTERVAL: the first probe's delay; each next one doubles, up to 24 h. */
  intervalMs: number;
  leaseMs: number;
  /** A probe succeeded and a recovery was recorded: run it. */
  onRecovered: () => void;
  /** Queues deliveries (of the webhook_endpoint.enabled event its re-enabling records). */
  enqueue: (items: QueuedDelivery[]) => void;
  clock?: () => Date;
}

/** The delay before probe number `n + 1` after `n` failed ones. */
export function probeDelay(intervalMs: number, n: number): number {
  return Math.min(DAY_MS, intervalMs * 2 ** Math.min(n, 30));
}

/** The body of a probe: an event envelope of type `ping` about the endpoint. */
export function pingBody(id: string, endpoint: { id: string; url: string; livemode: boolean }, at: Date) {
  return JSON.stringify({
    id,
    object: 'event',
    type: 'ping',
    created_at: at.toISOString(),
    data: { object: 'webhook_endpoint', id: endpoint.id, url: endpoint.url },
    livemode: endpoint.livemode,
  });
}

export function createProber(opts: ProberOptions): { runDue(): Promise<number> } {
  const { db, log } = opts;
  const clock = opts.clock ?? (() => new Date());

  async function probe(ep: {
    id: string;
    account_id: string;
    livemode: boolean;
    url: string;
    secret_sealed: Buffer;
    probes: number;
    failing_since: Date | string | null;
  }): Promise<void> {
    const at = clock();
    const id = newId('evt', at.getTime());
    const body = pingBody(id, ep, at);
    const secret = opts.box.open(ep.secret_sealed);
    const ts = Math.floor(at.getTime() / 1000);
    const result = await opts.sender.send(
      ep.url,
      body,
      {
        'x-service-signature': serviceSignature(secret, body),
        'webhook-id': id,
        'webhook-timestamp': String(ts),
        'webhook-signature': standardSignature(secret, id, ts, body),
      },
      // A listen endpoint's attempts go to its mcs listen session, which needs to know which
      // endpoint and attempt this is (without, the probe never ran: retried at every lease).
      { endpointId: ep.id, deliveryId: id, attempt: ep.probes + 1 },
    );
    const now = clock();
    if (!result.ok) {
      await db.execute(sql`
        update webhooks.endpoints
           set probes = probes + 1, last_error = ${result.error},
               probe_at = ${new Date(now.getTime() + probeDelay(opts.intervalMs, ep.probes + 1))}
         where id = ${ep.id} and status = 'unhealthy' and auto_recover`);
      log.info({ endpoint: ep.id, error: result.error }, 'probe failed');
      return;
    }
    const sink = { leaseMs: opts.leaseMs, queued: [] as QueuedDelivery[] };
    const recovered = await db.transaction(async (tx) => {
      sink.queued.length = 0;
      const caller = { accountId: ep.account_id, livemode: ep.livemode };
      const [row] = await tx
        .execute<{ status: string }>(sql`
        select status from webhooks.endpoints where id = ${ep.id} for update`)
        .then((r) => r.rows);
      if (row?.status !== 'unhealthy') return false;
      const endpoint = await enableEndpoint(tx, caller, ep.id, now, sink);
      // Its backlog: what was skipped since it began failing, and the deliveries whose retries
      // ran out in that stretch (of events from before it began, some of them). A recovery
      // takes events by their time, which is before their deliveries were made.
      const start = ep.failing_since ? new Date(ep.failing_since) : new Date(now.getTime() - DAY_MS);
      const { rows } = await tx.execute<{ since: Date | string | null }>(sql`
        select min(ev.created_at) as since
          from webhooks.deliveries d join webhooks.events ev on ev.id = d.event_id
         where d.endpoint_id = ${ep.id} and d.status in ('failed', 'skipped')
           and (d.last_attempt_at >= ${start} or d.created_at >= ${start})`);
      const first = rows[0]?.since ? new Date(rows[0].since) : start;
      await recordRecovery(tx, endpoint, new Date(Math.min(first.getTime(), start.getTime())), now);
      return true;
    });
    if (recovered) {
      if (sink.queued.length > 0) opts.enqueue(sink.queued);
      log.info({ endpoint: ep.id }, 'probe answered 2xx: endpoint re-enabled, backlog replaying');
      opts.onRecovered();
    }
  }

  return {
    async runDue() {
      const now = clock();
      const { rows } = await db.execute<Parameters<typeof probe>[0]>(sql`
        update webhooks.endpoints set probe_at = ${new Date(now.getTime() + opts.leaseMs)}
         where id in (select id from webhooks.endpoints
                       where probe_at <= ${now} and status = 'unhealthy' and auto_recover
                       order by probe_at limit ${PROBE_BATCH} for update skip locked)
        returning id, account_id, livemode, url, secret_sealed, probes, failing_since`);
      await Promise.all(
        rows.map((ep) =>
          probe(ep).catch((err) =>
            log.warn({ err: (err as Error).message, endpoint: ep.id }, 'probe failed to run'),
          ),
        ),
      );
      return rows.length;
    },
  };
}
