import type { Db } from '@mcs/kit/db';
import type { Relay } from '@mcs/kit/outbox';
import type { PaymentProviders } from './providers/payment-provider.ts';

/** What the handlers need, built once in main.ts (and by the tests). */
export interface Deps {
  db: Db;
  relay: Relay;
  payments: PaymentProviders;
}
