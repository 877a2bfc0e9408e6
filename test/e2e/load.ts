// Steady load for the scale-out and chaos tests: lanes of clients creating orders and
// conversations with an Idempotency-Key each, retrying a failed request with the same key (on
// the next gateway replica when there are several), as a well-behaved client does. What was
// sent, what each key finally answered, and every status seen are kept for the checks.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fromBinary } from '@bufbuild/protobuf';
import { streamNames } from '@mcs/kit/nats';
import { events as eventsProto } from '@mcs/proto';
import type { Receiver, Stack } from '@mcs/testkit';
import { AckPolicy, connect, DeliverPolicy } from 'nats';
import pg from 'pg';

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface Outcome {
  /** What the key finally answered with: the resource id. */
  id: string;
  kind: 'order' | 'conversation';
  path: string;
  body: unknown;
  /** Requests it took (1 = no retry). */
  tries: number;
}

export interface LoadReport {
  /** Keys sent (each one resource the client wants). */
  sent: number;
  /** Keys answered 200 (with their resource). */
  done: Map<string, Outcome>;
  /** Every status seen, with the error type for non-2xx (`503 api_error`, `conn` for no answer). */
  statuses: Map<string, number>;
  /** Keys that never got a 200 within their retries. */
  gaveUp: string[];
  /** Answers that broke a rule: a bare 5xx, a 5xx without the error envelope, a hang. */
  violations: string[];
  /** Longest wait for any single answer (ms). */
  slowestMs: number;
}

export interface Load {
  report: LoadReport;
  /** Stops issuing new keys; resolves when every lane has settled its last key. */
  stop(): Promise<LoadReport>;
}

/**
 * `lanes` clients, each sending one request at a time (`pauseMs` between keys). A request that
 * fails (no answer, 5xx, 409 in flight) is retried with the same key up to `retries` times,
 * `retryDelayMs` apart, rotating over the gateway replicas. A request gets `answerMs` to answer.
 */
export function startLoad(
  stack: Stack,
  key: string,
  opts: {
    lanes?: number;
    pauseMs?: number;
    retries?: number;
    retryDelayMs?: number;
    answerMs?: number;
    conversations?: boolean;
  } = {},
): Load {
  const lanes = opts.lanes ?? 4;
  const retries = opts.retries ?? 200;
  const retryDelayMs = opts.retryDelayMs ?? 100;
  const answerMs = opts.answerMs ?? 15_000;
  const gateways = stack.gatewayUrls.length;
  const report: LoadReport = {
    sent: 0,
    done: new Map(),
    statuses: new Map(),
    gaveUp: [],
    violations: [],
    slowestMs: 0,
  };
  let running = true;
  let rr = 0;
  const count = (s: string) => report.statuses.set(s, (report.statuses.get(s) ?? 0) + 1);

  async function one(kind: Outcome['kind'], n: number): Promise<void> {
    const idem = `load-${randomBytes(6).toString('hex')}`;
    report.sent++;
    const body =
      kind === 'order'
        ? {
            customer: { name: `Customer ${n}`, phone: '+4915112345678' },
            currency: 'EUR',
            items: [{ name: 'Coffee', unit_amount: 300, quantity: 1 }],
          }
        : // One conversation per customer phone: a new phone for each.
          { customer: { name: `Customer ${n}`, phone: `+4915${String(n % 1e9).padStart(9, '0')}` } };
    const path = kind === 'order' ? '/v1/orders' : '/v1/conversations';
    for (let tries = 1; tries <= retries; tries++) {
      const replica = rr++ % gateways;
      const t0 = performance.now();
      let status = 0;
      let type = 'conn';
      let json: { id?: string; error?: { type?: string; message?: string } } | null = null;
      try {
        const res = await stack.api(key, 'POST', path, body, {
          replica,
          headers: { 'idempotency-key': idem },
          signal: AbortSignal.timeout(answerMs),
        });
        status = res.status;
        json = res.json;
        type = json?.error?.type ?? '';
      } catch (err) {
        const e = err as Error;
        if (e.name === 'TimeoutError') report.violations.push(`${path} no answer in ${answerMs} ms`);
      }
      const ms = performance.now() - t0;
      report.slowestMs = Math.max(report.slowestMs, ms);
      count(status === 0 ? 'conn' : `${status}${type ? ` ${type}` : ''}`);
      if (status >= 500 && (type !== 'api_error' || typeof json?.error?.message !== 'string')) {
        report.violations.push(`${path} answered ${status} without the error envelope`);
      }
      if (status === 200 && json?.id) {
        report.done.set(idem, { id: json.id, kind, path, body, tries });
        return;
      }
      if (status !== 0 && status < 500 && status !== 409 && status !== 429) {
        report.violations.push(`${path} answered ${status} ${JSON.stringify(json)}`);
        return;
      }
      await sleep(retryDelayMs);
    }
    report.gaveUp.push(idem);
  }

  const done = Promise.all(
    Array.from({ length: lanes }, async (_, lane) => {
      for (let i = 0; running; i++) {
        await one(opts.conversations && i % 2 === 1 ? 'conversation' : 'order', lane * 1_000_000 + i);
        if (opts.pauseMs) await sleep(opts.pauseMs);
      }
    }),
  );
  return {
    report,
    async stop() {
      running = false;
      await done;
      return report;
    },
  };
}

/** Resource id → the distinct event ids of its `*.created` events the receiver got. */
export function createdEvents(receiver: Receiver): Map<string, Set<string>> {
  const seen = new Map<string, Set<string>>();
  for (const r of receiver.received) {
    const envelope = JSON.parse(r.body) as { id: string; type: string; data: { id: string } };
    if (!envelope.type.endsWith('.created')) continue;
    const ids = seen.get(envelope.data.id) ?? new Set<string>();
    ids.add(envelope.id);
    seen.set(envelope.data.id, ids);
  }
  return seen;
}

export function missingDeliveries(receiver: Receiver, ids: Iterable<string>): string[] {
  const seen = createdEvents(receiver);
  return [...ids].filter((id) => !seen.has(id));
}

/** The stack's database: counts of rows that prove nothing was lost or doubled. */
export async function ledger(stack: Stack, accountId: string) {
  const client = new pg.Client({ connectionString: stack.db.url });
  await client.connect();
  try {
    const one = async (sql: string) => Number((await client.query(sql, [accountId])).rows[0].n);
    return {
      orders: await one('select count(*) as n from commerce.orders where account_id = $1'),
      conversations: await one('select count(*) as n from messaging.conversations where account_id = $1'),
      /** Delivery rows of one event to one endpoint beyond the first (a unique index forbids them). */
      duplicateDeliveries: await one(
        `select count(*) as n from (select event_id from webhooks.deliveries where account_id = $1
           group by event_id, endpoint_id having count(*) > 1) d`,
      ),
      deliveries: await one('select count(*) as n from webhooks.deliveries where account_id = $1'),
      undelivered: await one(
        `select count(*) as n from webhooks.deliveries where account_id = $1 and status <> 'succeeded'`,
      ),
    };
  } finally {
    await client.end();
  }
}

export interface StreamAudit {
  /** Messages JetStream stored since the audit began. */
  messages: number;
  /** Events in them (a batch message holds several: kit/relay, events.proto EventBatch). */
  events: number;
  /** Distinct event ids among them: `events − distinct` were stored twice. */
  distinct: number;
}

/**
 * Reads what JetStream stores of the stack's events from now on, through a consumer of its own
 * beside the webhooks service's: while it exists the stream keeps every message until the audit
 * has read it too (interest retention). `read()` takes them all, counts events and distinct event
 * ids, and removes the consumer. An event stored twice is not a duplicate delivery (the webhooks
 * service records an event id once); a batch's events published again by a relay's poll, after
 * a publish whose ack was lost, are stored twice by design (docs/design.md, Events).
 */
export async function startStreamAudit(stack: Stack): Promise<{ read(): Promise<StreamAudit> }> {
  const nc = await connect({ servers: stack.nats.url });
  const names = streamNames(stack.nats.prefix);
  const name = `audit_${randomBytes(4).toString('hex')}`;
  const jsm = await nc.jetstreamManager();
  // From the next message on, by sequence (a durable made with "new" and killed before it wrote
  // its state would start over from the restart).
  const next = (await jsm.streams.info(names.stream)).state.last_seq + 1;
  await jsm.consumers.add(names.stream, {
    durable_name: name,
    // Explicit: a consumer without acks counts as having read what it was never sent once
    // nats-server restarts (NATS killed), and the stream drops those messages for it.
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.StartSequence,
    opt_start_seq: next,
    filter_subject: names.all,
  });
  return {
    async read() {
      try {
        const consumer = await nc.jetstream().consumers.get(names.stream, name);
        const seen = new Map<string, number>();
        let messages = 0;
        let events = 0;
        const note = (bytes: Uint8Array) => {
          const id = fromBinary(eventsProto.EventSchema, bytes).id;
          seen.set(id, (seen.get(id) ?? 0) + 1);
          events++;
        };
        for (;;) {
          const left = (await consumer.info()).num_pending;
          if (left === 0) break;
          const batch = await consumer.fetch({ max_messages: Math.min(left, 500), expires: 2_000 });
          for await (const m of batch) {
            messages++;
            m.ack();
            if (m.subject === names.batch) {
              for (const item of fromBinary(eventsProto.EventBatchSchema, m.data).events) note(item.event);
            } else note(m.data);
          }
        }
        return { messages, events, distinct: seen.size };
      } finally {
        await jsm.consumers.delete(names.stream, name).catch(() => {});
        await nc.close();
      }
    },
  };
}

/** CPU time (user + system, ms) a process has used so far, from /proc. */
export function cpuMs(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // utime, stime in 1/100 s
  } catch {
    return 0;
  }
}

/** One line per scenario, as the chaos suite prints them. */
export function summary(
  name: string,
  f: {
    sent: number;
    delivered: number;
    lost: number;
    duplicated: number;
    recoveryMs?: number;
    extra?: string;
  },
): string {
  const recovery = f.recoveryMs === undefined ? '' : ` recovery=${(f.recoveryMs / 1000).toFixed(1)}s`;
  return `[chaos] ${name}: sent=${f.sent} delivered=${f.delivered} lost=${f.lost} duplicated=${f.duplicated}${recovery}${f.extra ? ` ${f.extra}` : ''}`;
}
