import type { Db } from '@mcs/kit/db';

/** What the handlers need, built once in main.ts (and by the tests). */
export interface Deps {
  db: Db;
}
