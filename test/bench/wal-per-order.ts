// WAL written per keyed order, by relation and record kind: what each table and index of the
// write path costs PostgreSQL's log (docs/performance.md). Starts a bench stack with one
// endpoint on "*", warms it, runs a paced keyed run, waits for its deliveries and reads the WAL
// between the run's start and end with pg_waldump (needs read access to the server's pg_wal:
// run it as root or as postgres on the machine PostgreSQL runs on). Not a benchmark with a target.
//
//   node test/bench/wal-per-order.ts                  # 600 orders/s for 6 s
//   WAL_RATE=1000 WAL_SEC=10 node test/bench/wal-per-order.ts
//
// WAL_DIR (default: the server's data_directory + /pg_wal) and WAL_DUMP (default: pg_waldump of
// the server's major version under /usr/lib/postgresql) say where to look.
import { execFileSync } from 'node:child_process';
import pg from 'pg';
import {
  type BenchContext,
  createAccounts,
  createEndpoint,
  orderBody,
  orderHeaders,
  sleep,
  startBenchStack,
  waitUntil,
} from './lib.ts';
import { type LoadSpec, runLoad } from './load.ts';
import { startReceivers } from './receiver.ts';

const RATE = Number(process.env.WAL_RATE ?? 600);
const SEC = Number(process.env.WAL_SEC ?? 6);

const cleanups: Array<() => unknown> = [];
const ctx: BenchContext = {
  signal: new AbortController().signal,
  defer: (_label, fn) => cleanups.push(fn),
  log: (message) => console.error(message),
  selected: new Set(),
  shared: new Map(),
  ready() {},
};

/** Sums pg_waldump's records by relation and by (relation, resource manager, kind), per order. */
export function walTable(dump: string, dbOid: number, names: Map<number, string>, orders: number): string {
  const byRel = new Map<string, number>();
  const byKind = new Map<string, { bytes: number; count: number }>();
  let total = 0;
  let records = 0;
  const relOf = new RegExp(`rel \\d+/${dbOid}/(\\d+)`);
  for (const line of dump.split('\n')) {
    const m = /rmgr: (\S+)\s+len \(rec\/tot\):\s+\d+\/\s*(\d+).*desc: (\S+)/.exec(line);
    if (!m) continue;
    const bytes = Number(m[2]);
    total += bytes;
    records++;
    const r = relOf.exec(line);
    const rel = r ? (names.get(Number(r[1])) ?? 'other relation') : '(no relation: commits, …)';
    byRel.set(rel, (byRel.get(rel) ?? 0) + bytes);
    const key = `${rel} ${m[1]} ${m[3]}`;
    const k = byKind.get(key) ?? { bytes: 0, count: 0 };
    k.bytes += bytes;
    k.count++;
    byKind.set(key, k);
  }
  const per = (n: number) => (n / orders).toFixed(1).padStart(8);
  const lines = [
    `${orders} orders: ${per(total)} B of WAL and ${(records / orders).toFixed(1)} records per order`,
    '',
    'B/order  relation',
    ...[...byRel].sort((a, b) => b[1] - a[1]).map(([rel, bytes]) => `${per(bytes)}  ${rel}`),
    '',
    'B/order  records/order  relation, resource manager, record',
    ...[...byKind]
      .sort((a, b) => b[1].bytes - a[1].bytes)
      .slice(0, 40)
      .map(([key, k]) => `${per(k.bytes)}  ${(k.count / orders).toFixed(2).padStart(13)}  ${key}`),
  ];
  return lines.join('\n');
}

try {
  const [receiver] = await startReceivers(1, 'ok', ctx.defer);
  const stack = await startBenchStack(ctx);
  const [account] = await createAccounts(stack, 1);
  await createEndpoint(stack, account!, receiver!.url, 'wal-per-order', ['*']);
  const keyed = (sec: number, rate?: number): LoadSpec => ({
    title: 'wal-per-order',
    url: `${stack.baseUrl}/v1/orders`,
    method: 'POST',
    connections: 32,
    durationSec: sec,
    ...(rate ? { overallRate: rate } : {}),
    body: orderBody('wal-per-order'),
    headers: orderHeaders(account!.secretKey, true),
    idReplacement: true,
  });
  await runLoad(keyed(5), { signal: ctx.signal });
  await sleep(3_000); // the warm-up's deliveries
  const client = new pg.Client({ connectionString: stack.db.url });
  await client.connect();
  try {
    const one = async <T>(q: string) => (await client.query(q)).rows[0] as T;
    const { oid } = await one<{ oid: number }>(
      'select oid from pg_database where datname = current_database()',
    );
    const { dir, major } = await one<{ dir: string; major: string }>(
      `select current_setting('data_directory') as dir, current_setting('server_version_num')::int / 10000 as major`,
    );
    // After a checkpoint every page's first change carries a full-page image; taken now, the
    // run's WAL counts them as a steady stream of checkpoints would, not as the warm-up left them.
    await client.query('checkpoint');
    const { lsn: start } = await one<{ lsn: string }>('select pg_current_wal_lsn() as lsn');
    receiver!.arrivals.length = 0;
    const run = await runLoad(keyed(SEC, RATE), { signal: ctx.signal });
    await waitUntil(() => receiver!.arrivals.length >= run.ok, 15_000, ctx.signal);
    await sleep(1_000); // the last successes' group record
    const { lsn: end } = await one<{ lsn: string }>('select pg_current_wal_lsn() as lsn');
    const rels = await client.query<{ relfilenode: number; name: string }>(
      `select c.relfilenode, n.nspname || '.' || c.relname as name
         from pg_class c join pg_namespace n on n.oid = c.relnamespace
        where n.nspname in ('accounts', 'commerce', 'messaging', 'webhooks') and c.relkind in ('r', 'i')`,
    );
    // Read before the stack stops: dropping its database checkpoints, and the segments recycle.
    const dump = execFileSync(
      process.env.WAL_DUMP ?? `/usr/lib/postgresql/${major}/bin/pg_waldump`,
      ['-p', process.env.WAL_DIR ?? `${dir}/pg_wal`, '-s', start, '-e', end],
      { maxBuffer: 1 << 30, encoding: 'utf8' },
    );
    console.log(
      `keyed orders paced at ${RATE}/s for ${SEC} s, one endpoint on "*", ${receiver!.arrivals.length} delivered`,
    );
    console.log(walTable(dump, oid, new Map(rels.rows.map((r) => [r.relfilenode, r.name])), run.ok));
  } finally {
    await client.end();
  }
} finally {
  for (const fn of cleanups.reverse()) await fn();
}
