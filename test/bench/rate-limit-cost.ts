// What the shared rate limit costs per request (README "Growing past one machine"). Not part of
// `pnpm bench`: run it alone with
//   node_modules/.bin/node test/bench/rate-limit-cost.ts
// against DATABASE_URL (a fresh database is created and dropped).
import { createDatabase } from '@mcs/kit/db';
import { freshDatabase } from '@mcs/testkit';
import { migrateGateway } from '../../gateway/src/db/migrate.ts';
import {
  createPgTokenStore,
  createRateLimiter,
  createSharedRateLimiter,
  type TokenStore,
} from '../../gateway/src/rate-limit.ts';

const database = await freshDatabase(migrateGateway, 'rate-limit-bench');
const pool = createDatabase(database.url, { name: 'bench', max: 8 });
const store = createPgTokenStore(pool.pool);
let statements = 0;
const counted: TokenStore = {
  reserve: (...a) => {
    statements++;
    return store.reserve(...a);
  },
};
const pct = (xs: number[], p: number) => xs.sort((a, b) => a - b)[Math.floor((xs.length - 1) * p)]!;

try {
  // 1. The old limiter: a bucket in memory.
  {
    const local = createRateLimiter(3);
    const n = 1_000_000;
    const t0 = performance.now();
    for (let i = 0; i < n; i++) local.take(`acct_${i % 100}`, 1e9);
    console.log(`local bucket: ${(((performance.now() - t0) / n) * 1e6).toFixed(0)} ns per request`);
  }

  // 2. One reservation statement, alone and 8 at a time.
  {
    const lat: number[] = [];
    for (let i = 0; i < 3_000; i++) {
      const t0 = performance.now();
      await store.reserve(`acct_stmt_${i % 50}`, 1000, 1000, 10);
      lat.push(performance.now() - t0);
    }
    console.log(
      `reserve statement, one at a time: p50 ${pct(lat, 0.5).toFixed(3)} ms, p99 ${pct(lat, 0.99).toFixed(3)} ms`,
    );
    const t0 = performance.now();
    let done = 0;
    await Promise.all(
      Array.from({ length: 8 }, async (_, w) => {
        for (let i = 0; i < 1_500; i++) {
          await store.reserve(`acct_par_${(w * 1_500 + i) % 200}`, 1000, 1000, 10);
          done++;
        }
      }),
    );
    console.log(`reserve statement, 8 in flight: ${Math.round(done / ((performance.now() - t0) / 1000))}/s`);
  }

  // 3. The shared limiter for an account under its limit: requests at 2,000/s against 5,000/s.
  for (const [label, offered, rate] of [
    ['under its limit (2,000/s offered, 5,000/s allowed)', 2_000, 5_000],
    ['over its limit (2,000/s offered, 200/s allowed)', 2_000, 200],
  ] as const) {
    const shared = createSharedRateLimiter({ store: counted, replicas: 3 });
    statements = 0;
    const waits: number[] = [];
    let ok = 0;
    let n = 0;
    const t0 = performance.now();
    while (performance.now() - t0 < 3_000) {
      // 20 requests every 10 ms.
      for (let k = 0; k < offered / 100; k++) {
        const s = performance.now();
        const d = await shared.take(`acct_${label.length}`, rate);
        waits.push(performance.now() - s);
        if (d.ok) ok++;
        n++;
      }
      await new Promise((r) => setTimeout(r, 10));
    }
    const secs = (performance.now() - t0) / 1000;
    console.log(
      `shared limiter, ${label}: ${n} requests, ${ok} allowed, ${statements} statements ` +
        `(${(statements / secs).toFixed(1)}/s, ${((statements / n) * 1000).toFixed(1)} per 1,000 requests); ` +
        `take() p50 ${(pct(waits, 0.5) * 1000).toFixed(1)} µs, p99 ${(pct(waits, 0.99) * 1000).toFixed(0)} µs, ` +
        `max ${pct(waits, 1).toFixed(2)} ms`,
    );
  }
} finally {
  await pool.close();
  await database.close();
}
