import type { OutboxPartDeps } from '@mcs/kit/outbox-part';
import type { PaymentProviders } from './providers/payment-provider.ts';

/**
 * What the handlers need, built once in part.ts (and by the tests): the database, the idempotency
 * keys (kit's idempotency.keys) and the outbox relay, and the commerce service's own adapters.
 */
export interface Deps extends OutboxPartDeps {
  payments: PaymentProviders;
}
