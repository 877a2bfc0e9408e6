import type { Db } from '@mcs/kit/db';
import type { KeyStore } from '@mcs/kit/idempotency';
import type { DeliveryQueue } from './domain/deliveries.ts';
import type { EndpointPolicy } from './domain/endpoints.ts';
import type { SecretBox } from './domain/secrets.ts';

/** What the handlers need, built once in main.ts (and by the tests). */
export interface Deps {
  db: Db;
  /** Idempotency keys and their answers (kit's idempotency.keys, shared with the other services). */
  keys: KeyStore;
  box: SecretBox;
  policy: EndpointPolicy;
  /** The delivery engine: resends and test events go out at once, without waiting for a poll. */
  queue: DeliveryQueue;
  /** The service's retry schedule (WEBHOOK_RETRY_SCHEDULE), in ms: what live mode always uses. */
  schedule: number[];
  /** Recoveries and bulk resends (delivery/replayer.ts): woken when one is created. */
  replays: {
    wake(): void /** WEBHOOK_REPLAY_RATE: deliveries queued per second per replay. */;
    rate: number;
  };
}
