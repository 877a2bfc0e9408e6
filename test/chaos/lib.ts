// Shared by the chaos scenarios (README "Guarantees"). `pnpm test` runs each one short;
// `pnpm test:chaos` (CHAOS=full) runs the lengths the issue names (30 s outages, 5 kills of each
// part, 1,000 hostile deliveries, 10,000 requests per route). Each prints one line
// `[chaos] NAME: sent=… delivered=… lost=… duplicated=… recovery=…` and fails on any loss.
import { type AccountKeys, type Receiver, type Stack, until } from '@mcs/testkit';
import { expect } from 'vitest';
import {
  createdEvents,
  type LoadReport,
  ledger,
  missingDeliveries,
  sleep,
  startStreamAudit,
  summary,
} from '../e2e/load.ts';

export const FULL = process.env.CHAOS === 'full';
/** The short length in `pnpm test`, the full one in `pnpm test:chaos`. */
export const pick = <T>(short: T, full: T): T => (FULL ? full : short);

export const STACK_ENV = {
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
  WEBHOOK_ALLOW_HTTP: 'true',
  WEBHOOK_TIMEOUT: '2s',
  WEBHOOK_LEASE_MARGIN: '1s',
  WEBHOOK_RETRY_SCHEDULE: '500ms,1s,1s,2s,2s',
};

/** An account with a rate limit far above any burst here (a 429 would hide the fault) and an endpoint for every event. */
export async function setUp(
  stack: Stack,
  receiver: Receiver,
): Promise<AccountKeys & { audit: Awaited<ReturnType<typeof startStreamAudit>> }> {
  const keys = JSON.parse(
    await stack.cli([
      'accounts',
      'create',
      '--email',
      `chaos-${Date.now()}@example.com`,
      '--rate-limit',
      '100000',
    ]),
  ) as AccountKeys;
  const endpoint = await stack.api(keys.secret_key, 'POST', '/v1/webhooks', {
    url: receiver.url,
    events: ['*'],
  });
  expect(endpoint.status, endpoint.text).toBe(200);
  // What JetStream stores from here on: this scenario's events only.
  return { ...keys, audit: await startStreamAudit(stack) };
}

export interface Verdict {
  sent: number;
  delivered: number;
  lost: number;
  duplicated: number;
}

/**
 * Waits until every resource the load created reached the receiver, then counts: keys given up,
 * resources never delivered, delivery rows beyond one per event and endpoint, events the stream
 * stored (one per resource, however many copies), resources whose `*.created` arrived under two
 * event ids. Prints the
 * scenario's line and fails on any loss or duplicate.
 */
export async function verdict(
  name: string,
  stack: Stack,
  receiver: Receiver,
  keys: AccountKeys & { audit: Awaited<ReturnType<typeof startStreamAudit>> },
  report: LoadReport,
  opts: {
    recoveryMs?: number;
    extra?: string;
    deliverWithinMs?: number;
    /**
     * false: the audit cannot count the stream (nats-server was killed -9: on restart it drops
     * messages the audit had not read yet, which the webhooks service had), so its events are
     * printed only.
     */
    streamAudited?: boolean;
  } = {},
): Promise<Verdict> {
  const ids = [...report.done.values()].map((o) => o.id);
  await until(
    `${name}: every created resource delivered`,
    () => missingDeliveries(receiver, ids).length === 0,
    { timeoutMs: opts.deliverWithinMs ?? 60_000, everyMs: 200 },
  ).catch(() => {});
  await sleep(1_000); // late repeats would show up now
  const missing = missingDeliveries(receiver, ids);
  const rows = await ledger(stack, keys.account.id);
  const stream = await keys.audit.read();
  const seen = createdEvents(receiver);
  const doubled = ids.filter((id) => (seen.get(id)?.size ?? 0) > 1).length;
  const v: Verdict = {
    sent: report.sent,
    delivered: ids.length - missing.length,
    lost: missing.length + report.gaveUp.length,
    duplicated: rows.duplicateDeliveries + doubled,
  };
  const statuses = JSON.stringify(Object.fromEntries(report.statuses));
  console.info(
    summary(name, {
      ...v,
      ...(opts.recoveryMs !== undefined ? { recoveryMs: opts.recoveryMs } : {}),
      extra: `${opts.extra ? `${opts.extra}; ` : ''}answers ${statuses}; stream: ${stream.events} events in ${stream.messages} messages, ${stream.events - stream.distinct} stored twice`,
    }),
  );
  expect(report.violations, 'answers that broke the error rules').toEqual([]);
  expect(report.gaveUp, 'keys that never got a 200').toEqual([]);
  expect(missing, 'resources whose event never arrived').toEqual([]);
  expect(rows.duplicateDeliveries, 'duplicate delivery rows').toBe(0);
  // One event per resource reached the stream; one stored twice (a batch's events published
  // again after a lost ack) is recorded once by the webhooks service, which the checks above hold.
  if (opts.streamAudited !== false)
    expect(stream.distinct, 'events stored in the stream (one per resource)').toBe(ids.length);
  expect(doubled, 'resources delivered under two event ids').toBe(0);
  expect(rows.orders + rows.conversations, 'one resource per key').toBe(ids.length);
  return v;
}
