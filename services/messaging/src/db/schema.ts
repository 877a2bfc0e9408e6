// The messaging schema: conversations and messages arrive with their issue; the outbox is here
// from the start so every event of this service goes the transactional way.
import { outboxTable } from '@mcs/kit/outbox';
import { pgSchema } from 'drizzle-orm/pg-core';

export const messaging = pgSchema('messaging');

export const outbox = outboxTable(messaging);
