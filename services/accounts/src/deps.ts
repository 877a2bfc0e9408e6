import type { Db } from '@mcs/kit/db';

/** What the handlers need, built once in main.ts (and by the tests). */
export interface Deps {
  db: Db;
  /** Tells every gateway to forget a revoked key at once (over NATS in main.ts). */
  announceRevocation?: (keyId: string) => void;
  /** Tells every gateway an owner's password was replaced: its sessions end (over NATS in main.ts). */
  announcePasswordSet?: (accountId: string) => void;
}
