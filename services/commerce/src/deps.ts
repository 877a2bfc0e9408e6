import type { Db } from '@mcs/kit/db';
import type { KeyStore } from '@mcs/kit/idempotency';
import type { Relay } from '@mcs/kit/outbox';
import type { PaymentProviders } from './providers/payment-provider.ts';

/** What the handlers need, built once in main.ts (and by the tests). */
export interface Deps {
  db: Db;
  /** Idempotency keys and their answers (commerce.idempotency_keys). */
  keys: KeyStore;
  relay: Relay;
  payments: PaymentProviders;
}
