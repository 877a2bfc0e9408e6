// Chaos: NATS killed (kill -9) and kept down, then frozen (SIGSTOP: connections open, nothing
// answers), each for 30 s in `pnpm test:chaos` and 5 s in `pnpm test`, under steady load. The API
// keeps taking writes (the outbox holds their events), and once NATS is back every event is
// delivered once. A private nats-server: the shared one is never touched.
import {
  type PrivateNats,
  privateNats,
  type Receiver,
  type Stack,
  startReceiver,
  startStack,
  until,
} from '@mcs/testkit';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { missingDeliveries, sleep, startLoad } from '../e2e/load.ts';
import { pick, STACK_ENV, setUp, verdict } from './lib.ts';

const OUTAGE_MS = pick(5_000, 30_000);

let nats: PrivateNats;
let stack: Stack;
let receiver: Receiver;

beforeAll(async () => {
  nats = await privateNats();
  await nats.start();
  receiver = await startReceiver();
  stack = await startStack({ natsUrl: nats.url, env: STACK_ENV });
}, 180_000);

afterAll(async () => {
  if (!nats.running()) await nats.start().catch(() => {});
  nats.signal('SIGCONT');
  await stack?.stop();
  await receiver?.close();
  await nats?.remove();
});

for (const fault of ['killed', 'frozen'] as const) {
  it(
    `NATS ${fault} ${OUTAGE_MS / 1000} s under load: writes go on, every event delivered after`,
    async () => {
      const keys = await setUp(stack, receiver);
      const load = startLoad(stack, keys.secret_key, { lanes: 4, pauseMs: 20, conversations: true });
      await sleep(2_000);
      const before = load.report.done.size;

      if (fault === 'killed') await nats.kill();
      else nats.signal('SIGSTOP');
      const downAt = Date.now();
      // The gateway's readiness says so at once (a frozen server never answers its ping: it is
      // timed out, not waited for), while the API goes on taking writes.
      const ready = await fetch(`${stack.baseUrl}/readyz`, { signal: AbortSignal.timeout(10_000) });
      expect(ready.status).toBe(503);
      expect(await ready.text()).toMatch(/^not ready: NATS/);
      await sleep(OUTAGE_MS - (Date.now() - downAt));
      const acceptedWhileDown = load.report.done.size - before;
      if (fault === 'killed') await nats.start();
      else nats.signal('SIGCONT');
      const upAt = Date.now();
      // Recovery: until everything accepted up to now has reached the receiver (the load goes on).
      const accepted = [...load.report.done.values()].map((o) => o.id);
      const deliveredAt = await until(
        'every event accepted during the outage delivered after NATS is back',
        () => missingDeliveries(receiver, accepted).length === 0 && Date.now(),
        { timeoutMs: 60_000, everyMs: 100 },
      );
      await sleep(1_000);
      const report = await load.stop();

      await verdict(`NATS ${fault} ${OUTAGE_MS / 1000}s`, stack, receiver, keys, report, {
        recoveryMs: deliveredAt - upAt,
        extra: `${acceptedWhileDown} writes accepted in the ${((upAt - downAt) / 1000).toFixed(1)} s NATS was ${fault}`,
        // A killed nats-server comes back without the messages the audit had not read yet.
        streamAudited: fault !== 'killed',
      });
      // The API did not need NATS to take writes.
      expect(acceptedWhileDown).toBeGreaterThan(0);
    },
    120_000 + OUTAGE_MS,
  );
}
