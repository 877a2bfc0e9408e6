// Chaos: a webhooks replica frozen (SIGSTOP) under steady load for longer than the consumer's
// ack wait, then thawed. JetStream hands its unacked events to the other replica, which also
// takes over its leased deliveries; the frozen one wakes up holding the same events and
// deliveries. Nothing may be lost and no delivery row doubled (the unique index on event and
// endpoint, and the claims, decide who records and who sends).
import { type Receiver, type Stack, startReceiver, startStack, until } from '@mcs/testkit';
import { afterAll, beforeAll, it } from 'vitest';
import { missingDeliveries, sleep, startLoad } from '../e2e/load.ts';
import { pick, STACK_ENV, setUp, verdict } from './lib.ts';

const ACK_WAIT_MS = pick(3_000, 30_000);
const FROZEN_MS = pick(6_000, 40_000);

let stack: Stack;
let receiver: Receiver;

beforeAll(async () => {
  receiver = await startReceiver();
  stack = await startStack({
    replicas: { webhooks: 2 },
    env: { ...STACK_ENV, WEBHOOK_ACK_WAIT: `${ACK_WAIT_MS}ms` },
  });
}, 180_000);

afterAll(async () => {
  await stack?.stop();
  await receiver?.close();
});

it(
  `a webhooks replica frozen ${FROZEN_MS / 1000} s (ack wait ${ACK_WAIT_MS / 1000} s) under load: 0 lost, 0 duplicate delivery rows`,
  async () => {
    const keys = await setUp(stack, receiver);
    const load = startLoad(stack, keys.secret_key, { lanes: 4, pauseMs: 10 });
    await sleep(2_000);
    stack.signal('webhooks', 'SIGSTOP', 0);
    const frozenAt = Date.now();
    await sleep(FROZEN_MS);
    // What the API accepted while one replica was frozen reached the receiver through the other.
    const acceptedWhileFrozen = [...load.report.done.values()].map((o) => o.id);
    const missingAtThaw = missingDeliveries(receiver, acceptedWhileFrozen).length;
    stack.signal('webhooks', 'SIGCONT', 0);
    const thawedAt = Date.now();
    const deliveredAt = await until(
      'everything accepted while frozen delivered',
      () => missingDeliveries(receiver, acceptedWhileFrozen).length === 0 && Date.now(),
      { timeoutMs: 60_000, everyMs: 100 },
    );
    await sleep(2_000);
    const report = await load.stop();
    await verdict(
      `webhooks replica SIGSTOPped ${FROZEN_MS / 1000}s (ack wait ${ACK_WAIT_MS / 1000}s)`,
      stack,
      receiver,
      keys,
      report,
      {
        recoveryMs: deliveredAt - thawedAt,
        extra: `${missingAtThaw} of ${acceptedWhileFrozen.length} not yet delivered when thawed after ${((thawedAt - frozenAt) / 1000).toFixed(1)} s`,
      },
    );
  },
  120_000 + FROZEN_MS,
);
