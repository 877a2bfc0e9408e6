import type { OutboxPartDeps } from '@mcs/kit/outbox-part';
import type { Channels } from './channels/channel.ts';

/**
 * What the handlers need, built once in part.ts (and by the tests): the database, the idempotency
 * keys (kit's idempotency.keys) and the outbox relay, and the messaging service's own adapters.
 */
export interface Deps extends OutboxPartDeps {
  channels: Channels;
}
