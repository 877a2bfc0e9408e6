// Retry backlog (issue 9, target 5): two identical idle stacks side by side, observed over the
// same 5 minutes: stack B holds 1,000,000 deliveries scheduled hours ahead (seeded with one
// INSERT … SELECT generate_series into webhooks.deliveries, for one endpoint of one account,
// status 'pending'), stack A holds none. Both webhooks processes are restarted after the seed
// (a process that loads its backlog at start shows here). Targets, B against A:
//   - idle CPU of the webhooks process ≤ 1.5 × (exact CPU time from /proc/PID/task/*/schedstat);
//   - ≤ 5 polling queries/s against webhooks.deliveries (pg_stat_statements when the server has
//     it preloaded; otherwise table scans/s from pg_stat_user_tables, an upper bound: each query
//     scans the table at least once);
//   - RSS of the webhooks process flat over the window: the last minute's median at most 10 % above
//     the first minute's, and B's change within ±10 % of A's (an idle Node process returns memory
//     after a while, A as much as B: that drop is the runtime, not the backlog);
//   - claiming due retries costs the same at 0 and 1M: EXPLAIN (ANALYZE, BUFFERS) of the claim
//     query of services/webhooks/src/delivery/claims.ts claimDue() (read from that file; a copy if it
//     cannot be found there), on 500 due deliveries inserted in a transaction that is rolled back
//     (so the running service never sees them), before and after the seed.
// Measuring both stacks at once keeps the comparison fair when the machine is busy: when
// memory-soak runs too, it runs during this window (run.ts), and affects A and B alike.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT, type Stack } from '@mcs/testkit';
import pg from 'pg';
import { processCpuNs, rssMiB, stackPids } from './cpu.ts';
import {
  type Account,
  type Benchmark,
  type Check,
  complaintNotes,
  createAccounts,
  createEndpoint,
  median,
  orderBody,
  orderHeaders,
  queryDb,
  ratioOf,
  round,
  sleep,
  stackComplaints,
  startBenchStack,
  type Table,
  waitUntil,
} from './lib.ts';
import { runLoad } from './load.ts';
import { EventLog, startReceivers } from './receiver.ts';

const BACKLOG = Number(process.env.BENCH_BACKLOG_ROWS ?? 1_000_000);
const WINDOW_SEC = Number(process.env.BENCH_BACKLOG_SEC ?? 300);
const SAMPLE_SEC = 5;
const DUE = 500;
const TARGET_CPU = 1.5;
const TARGET_QPS = 5;
const TARGET_RSS = 0.1;

// ---------------------------------------------------------------------------------------------
// The claim query

/** The poller's claim, as the engine had it when this benchmark was written (the fallback). */
const CLAIM_COPY = `update webhooks.deliveries set next_attempt_at = $1
 where id in (select id from webhooks.deliveries
               where status = 'pending' and next_attempt_at <= $2
               order by next_attempt_at limit 500 for update skip locked)
returning id, endpoint_id`;

const CLAIMS = 'services/webhooks/src/delivery/claims.ts';

/**
 * The poller's claim query, claims.ts claimDue(): the first sql`…` template after `function claimDue(` that
 * touches webhooks.deliveries, its interpolations mapped to $1 (the lease: now + lease) and $2
 * (now), and the ids held in memory (`mine`) to an empty array. Falls back to the copy above, and says so.
 */
export function claimQuery(): { text: string; source: string } {
  try {
    const src = readFileSync(path.join(REPO_ROOT, CLAIMS), 'utf8');
    const at = src.search(/function claimDue\s*\(/);
    if (at < 0) throw new Error('no function claimDue( in it');
    const templates = [...src.slice(at).matchAll(/sql`([\s\S]*?)`/g)].map((m) => m[1]!);
    const t = templates.find((x) => /webhooks\.deliveries/.test(x) && /update|select/i.test(x));
    if (!t) throw new Error('no sql`…` on webhooks.deliveries after it');
    let unknown = '';
    const text = t.replace(/\$\{([^}]*)\}/g, (_, expr: string) => {
      if (/lease/i.test(expr)) return '$1';
      if (/\bnow\b/i.test(expr)) return '$2';
      if (/^\s*\d+\s*$/.test(expr)) return expr.trim();
      if (/limit|batch|max/i.test(expr)) return String(DUE);
      // The ids this process already holds in memory (none in an idle process with its backlog
      // in the future): an empty text array.
      if (/\bmine\b/.test(expr)) return `'{}'`;
      unknown ||= expr;
      return '';
    });
    if (unknown) throw new Error(`an interpolation it cannot map: \${${unknown}}`);
    return { text: text.trim(), source: `${CLAIMS} claimDue() (read from the file)` };
  } catch (err) {
    return {
      text: CLAIM_COPY,
      source: `a copy of ${CLAIMS} claimDue() (not found in the file: ${(err as Error).message})`,
    };
  }
}

// ---------------------------------------------------------------------------------------------
// Seeding webhooks.deliveries

/** What each known column gets; $1 endpoint, $2 account, $3 id prefix; g = generate_series. */
const KNOWN: Record<string, string> = {
  id: `'dlv_' || $3 || '_' || g`,
  event_id: `'evt_' || $3 || '_' || g`,
  endpoint_id: '$1',
  account_id: '$2',
  livemode: 'false',
  status: `'pending'`,
  attempts: '1',
  schedule_start: '0',
  last_attempt_at: 'now()',
  created_at: 'now()',
};
const REQUIRED = ['id', 'endpoint_id', 'status', 'next_attempt_at'];

/**
 * An INSERT … SELECT generate_series(1, n) for webhooks.deliveries as its columns are now: the
 * known ones filled, any other NOT NULL column without a default makes it fail loudly.
 */
async function seedStatement(url: string): Promise<(n: number, nextAttemptAt: string) => string> {
  const cols = await queryDb<{ name: string; nullable: string; def: string | null }>(
    url,
    `select column_name as name, is_nullable as nullable, column_default as def
       from information_schema.columns where table_schema = 'webhooks' and table_name = 'deliveries'`,
  );
  if (cols.length === 0) throw new Error('webhooks.deliveries does not exist: cannot seed the backlog');
  const names = new Set(cols.map((c) => c.name));
  const missing = REQUIRED.filter((c) => !names.has(c));
  if (missing.length)
    throw new Error(`webhooks.deliveries has no ${missing.join(', ')}: cannot seed the backlog`);
  const unknown = cols.filter(
    (c) => c.nullable === 'NO' && c.def === null && !(c.name in KNOWN) && c.name !== 'next_attempt_at',
  );
  if (unknown.length)
    throw new Error(
      `webhooks.deliveries has NOT NULL columns this benchmark cannot fill: ${unknown.map((c) => c.name).join(', ')}`,
    );
  const used = cols.map((c) => c.name).filter((c) => c in KNOWN);
  return (n, nextAttemptAt) =>
    `insert into webhooks.deliveries (${[...used, 'next_attempt_at'].join(', ')})
     select ${[...used.map((c) => KNOWN[c]), nextAttemptAt].join(', ')} from generate_series(1, ${n}) g`;
}

// ---------------------------------------------------------------------------------------------
// EXPLAIN of the claim

interface Explained {
  backlog: number;
  executionMs: number | null;
  buffers: number | null;
  plan: string[];
  runs: Array<{ executionMs: number; buffers: number }>;
}

interface PlanNode {
  'Shared Hit Blocks'?: number;
  'Shared Read Blocks'?: number;
}

async function explainClaim(
  url: string,
  claim: string,
  insert: (n: number, next: string) => string,
  endpointId: string,
  accountId: string,
  backlog: number,
): Promise<Explained> {
  const client = new pg.Client({ connectionString: url, application_name: 'bench-explain' });
  await client.connect();
  const runs: Explained['runs'] = [];
  let plan: string[] = [];
  try {
    for (let i = 0; i < 4; i++) {
      await client.query('begin');
      try {
        await client.query(insert(DUE, `now() - interval '1 minute' + g * interval '1 millisecond'`), [
          endpointId,
          accountId,
          `due${i}_${randomBytes(3).toString('hex')}`,
        ]);
        const lease = new Date(Date.now() + 15_000);
        const at = new Date(Date.now() + 1_000);
        if (i < 3) {
          const { rows } = await client.query<{
            'QUERY PLAN': Array<{ Plan: PlanNode; 'Execution Time': number }>;
          }>(`explain (analyze, buffers, format json) ${claim}`, [lease, at]);
          const top = rows[0]!['QUERY PLAN'][0]!;
          runs.push({
            executionMs: top['Execution Time'],
            buffers: (top.Plan['Shared Hit Blocks'] ?? 0) + (top.Plan['Shared Read Blocks'] ?? 0),
          });
        } else {
          const { rows } = await client.query<{ 'QUERY PLAN': string }>(
            `explain (analyze, buffers) ${claim}`,
            [lease, at],
          );
          plan = rows.map((r) => r['QUERY PLAN']);
        }
      } finally {
        await client.query('rollback');
      }
    }
  } finally {
    await client.end();
  }
  return {
    backlog,
    executionMs: median(runs.map((r) => r.executionMs)),
    buffers: median(runs.map((r) => r.buffers)),
    plan,
    runs,
  };
}

// ---------------------------------------------------------------------------------------------
// Polling queries

async function pgStatStatements(url: string): Promise<boolean> {
  try {
    const [row] = await queryDb<{ s: string }>(
      url,
      `select setting as s from pg_settings where name = 'shared_preload_libraries'`,
    );
    if (!row?.s.includes('pg_stat_statements')) return false;
    await queryDb(url, 'create extension if not exists pg_stat_statements');
    return true;
  } catch {
    return false;
  }
}

/** Queries (pg_stat_statements) or table scans (pg_stat_user_tables) against webhooks.deliveries so far. */
async function deliveriesCounter(url: string, statements: boolean): Promise<number> {
  if (statements) {
    const [row] = await queryDb<{ n: string | null }>(
      url,
      `select sum(calls)::bigint as n from pg_stat_statements
        where dbid = (select oid from pg_database where datname = current_database())
          and query ilike '%webhooks.deliveries%' and query not ilike '%pg_stat%' and query not ilike 'explain%'`,
    );
    return Number(row?.n ?? 0);
  }
  const [row] = await queryDb<{ n: string | null }>(
    url,
    `select (coalesce(seq_scan, 0) + coalesce(idx_scan, 0))::bigint as n
       from pg_stat_user_tables where schemaname = 'webhooks' and relname = 'deliveries'`,
  );
  return Number(row?.n ?? 0);
}

// ---------------------------------------------------------------------------------------------

interface Side {
  name: string;
  stack: Stack;
  account: Account;
  endpointId: string;
}

interface Observed {
  cpuMsPerSec: number | null;
  pollsPerSec: number | null;
  rss: Array<{ t: number; mib: number | null }>;
  rssFirst: number | null;
  rssLast: number | null;
  rssMax: number | null;
  rssChange: number | null;
  restarted: boolean;
}

async function prepare(stack: Stack, receiverUrl: string, name: string): Promise<Side> {
  const [account] = await createAccounts(stack, 1);
  const endpointId = await createEndpoint(stack, account!, receiverUrl, `retry-backlog ${name}`, ['*']);
  return { name, stack, account: account!, endpointId };
}

export const retryBacklog: Benchmark = {
  name: 'retry-backlog',
  target: 5,
  title: `Retry backlog: ${BACKLOG.toLocaleString('en-US')} deliveries scheduled ahead vs none, idle for ${WINDOW_SEC} s`,
  budgetMs: (WINDOW_SEC + 240) * 1000,
  expectedSec: WINDOW_SEC + 90,
  overlapsWith: 'memory-soak',
  async run(ctx) {
    const [receiver] = await startReceivers(1, 'ok', ctx.defer);
    const [stackA, stackB] = await Promise.all([startBenchStack(ctx), startBenchStack(ctx)]);
    const [a, b] = await Promise.all([
      prepare(stackA!, receiver!.url, 'A (none)'),
      prepare(stackB!, receiver!.url, 'B (backlog)'),
    ]);
    // The same bit of real work on both, so each webhooks process has delivered before idling.
    const log = new EventLog(receiver!);
    await Promise.all(
      [a, b].map((s) =>
        runLoad(
          {
            title: `warm ${s.name}`,
            url: `${s.stack.baseUrl}/v1/orders`,
            method: 'POST',
            connections: 4,
            durationSec: 2,
            overallRate: 25,
            body: orderBody(`warm-${s.stack.nats.prefix}`),
            headers: orderHeaders(s.account.secretKey, true),
            idReplacement: true,
          },
          { signal: ctx.signal },
        ),
      ),
    );
    await waitUntil(
      () => log.count(`warm-${a.stack.nats.prefix}`) >= 50 && log.count(`warm-${b.stack.nats.prefix}`) >= 50,
      15_000,
      ctx.signal,
    );

    const claim = claimQuery();
    const insert = await seedStatement(b.stack.db.url);
    ctx.log('retry-backlog: EXPLAIN of the claim at 0 backlog');
    const explain0 = await explainClaim(b.stack.db.url, claim.text, insert, b.endpointId, b.account.id, 0);

    ctx.log(`retry-backlog: seeding ${BACKLOG.toLocaleString('en-US')} future deliveries`);
    const t0 = Date.now();
    await queryDb(
      b.stack.db.url,
      insert(BACKLOG, `now() + interval '2 hours' + (g % 7200) * interval '1 second'`),
      [b.endpointId, b.account.id, `seed_${randomBytes(3).toString('hex')}`],
    );
    const seedSec = (Date.now() - t0) / 1000;
    await Promise.all([a, b].map((s) => queryDb(s.stack.db.url, 'vacuum analyze webhooks.deliveries')));
    const [{ n: pending } = { n: 0 }] = await queryDb<{ n: number }>(
      b.stack.db.url,
      `select count(*)::int as n from webhooks.deliveries where status = 'pending'`,
    );
    ctx.log(`retry-backlog: seeded in ${seedSec.toFixed(1)} s; EXPLAIN at ${pending} pending`);
    const explain1 = await explainClaim(
      b.stack.db.url,
      claim.text,
      insert,
      b.endpointId,
      b.account.id,
      pending,
    );

    ctx.log('retry-backlog: restarting both webhooks processes, then idling');
    await Promise.all(
      [a, b].map(async (s) => {
        await s.stack.kill('webhooks');
        await s.stack.restart('webhooks');
      }),
    );
    await sleep(10_000, ctx.signal);
    const pids = { a: stackPids(a.stack).webhooks, b: stackPids(b.stack).webhooks };
    if (!pids.a || !pids.b)
      throw new Error('could not find the webhooks processes of the two stacks in /proc');
    const statements = await pgStatStatements(b.stack.db.url);
    if (statements) await pgStatStatements(a.stack.db.url);
    ctx.ready();

    ctx.log(`retry-backlog: observing both for ${WINDOW_SEC} s`);
    const start = performance.now();
    const cpu0 = { a: processCpuNs(pids.a), b: processCpuNs(pids.b) };
    const polls0 = {
      a: await deliveriesCounter(a.stack.db.url, statements),
      b: await deliveriesCounter(b.stack.db.url, statements),
    };
    const rss: { a: Observed['rss']; b: Observed['rss'] } = { a: [], b: [] };
    for (let t = 0; ; t += SAMPLE_SEC) {
      const at = (performance.now() - start) / 1000;
      rss.a.push({ t: round(at, 1)!, mib: rssMiB(pids.a) });
      rss.b.push({ t: round(at, 1)!, mib: rssMiB(pids.b) });
      if (t + SAMPLE_SEC > WINDOW_SEC) break;
      await sleep(Math.max(0, start + (t + SAMPLE_SEC) * 1000 - performance.now()), ctx.signal);
    }
    const seconds = (performance.now() - start) / 1000;
    const cpu1 = { a: processCpuNs(pids.a), b: processCpuNs(pids.b) };
    const polls1 = {
      a: await deliveriesCounter(a.stack.db.url, statements),
      b: await deliveriesCounter(b.stack.db.url, statements),
    };
    const edge = Math.min(60, WINDOW_SEC / 5);
    const observe = (k: 'a' | 'b', s: Side): Observed => {
      const samples = rss[k];
      const first = median(samples.filter((x) => x.t < edge).map((x) => x.mib));
      const last = median(samples.filter((x) => x.t >= seconds - edge).map((x) => x.mib));
      const c0 = cpu0[k];
      const c1 = cpu1[k];
      return {
        cpuMsPerSec: c0 === null || c1 === null ? null : (c1 - c0) / 1e6 / seconds,
        pollsPerSec: (polls1[k] - polls0[k]) / seconds,
        rss: samples,
        rssFirst: first,
        rssLast: last,
        rssMax: Math.max(...samples.map((x) => x.mib ?? 0)),
        rssChange: first && last ? last / first - 1 : null,
        restarted: !s.stack.alive('webhooks') || stackPids(s.stack).webhooks !== pids[k],
      };
    };
    const obsA = observe('a', a);
    const obsB = observe('b', b);
    if (obsA.restarted || obsB.restarted) throw new Error('a webhooks process exited during the window');

    const cpuRatio = ratioOf(obsB.cpuMsPerSec, obsA.cpuMsPerSec);
    const timeRatio = ratioOf(explain1.executionMs, explain0.executionMs);
    const bufRatio = ratioOf(explain1.buffers, explain0.buffers);
    const claimSame =
      explain0.executionMs !== null &&
      explain1.executionMs !== null &&
      explain0.buffers !== null &&
      explain1.buffers !== null &&
      explain1.executionMs <= 2 * explain0.executionMs + 1 &&
      explain1.buffers <= 2 * explain0.buffers + 64;
    const shortened = WINDOW_SEC < 300;
    // B's change relative to A's over the same window: what the backlog adds to the runtime's own drift.
    const rssRelative =
      obsA.rssChange === null || obsB.rssChange === null ? null : (1 + obsB.rssChange) / (1 + obsA.rssChange);
    const rssFlat =
      rssRelative !== null &&
      obsB.rssChange !== null &&
      obsB.rssChange <= TARGET_RSS &&
      Math.abs(rssRelative - 1) <= TARGET_RSS;
    const pollMethod = statements ? 'queries/s (pg_stat_statements)' : 'table scans/s (pg_stat_user_tables)';
    const fmtRss = (o: Observed) => `${round(o.rssFirst)} → ${round(o.rssLast)} MiB (max ${round(o.rssMax)})`;
    const checks: Check[] = [
      {
        label: 'webhooks idle CPU ms/s, 1M vs none',
        project: round(obsB.cpuMsPerSec, 2),
        baseline: round(obsA.cpuMsPerSec, 2),
        ratio: cpuRatio,
        target: `≤ ${TARGET_CPU}`,
        pass: cpuRatio === null ? null : cpuRatio <= TARGET_CPU,
      },
      {
        label: `polling ${statements ? 'queries' : 'scans'}/s on deliveries, 1M`,
        project: round(obsB.pollsPerSec, 2),
        baseline: round(obsA.pollsPerSec, 2),
        ratio: null,
        target: `≤ ${TARGET_QPS}/s`,
        pass: obsB.pollsPerSec === null ? null : obsB.pollsPerSec <= TARGET_QPS,
        note: `${pollMethod} on webhooks.deliveries; baseline: the stack without backlog`,
      },
      {
        label: `webhooks RSS, ${WINDOW_SEC} s idle, 1M`,
        project: fmtRss(obsB),
        baseline: fmtRss(obsA),
        ratio: obsB.rssChange === null ? null : 1 + obsB.rssChange,
        target: `≤ +${TARGET_RSS * 100} %, ±${TARGET_RSS * 100} % of A`,
        pass: shortened || rssRelative === null || obsB.rssChange === null ? null : rssFlat,
        note:
          'first → last minute median (max); flat: B grows ≤ 10 % and its change is within ±10 % of the ' +
          'stack without backlog (A), so memory the runtime returns when idle (both drop alike) does not count' +
          (shortened ? `; void: window shortened to ${WINDOW_SEC} s (BENCH_BACKLOG_SEC), not 5 minutes` : ''),
      },
      {
        label: `claim ${DUE} due: exec ms (buffers), 1M vs 0`,
        project: `${round(explain1.executionMs, 2)} ms (${explain1.buffers})`,
        baseline: `${round(explain0.executionMs, 2)} ms (${explain0.buffers})`,
        ratio: timeRatio,
        target: '≤ 2× time and buffers',
        pass: claimSame,
        note: `buffers ratio ${round(bufRatio, 2) ?? '–'}; query from ${claim.source}`,
      },
    ];
    const rssTimeline: Table = {
      title: `Webhooks process RSS (MiB) while idle, every ${Math.max(SAMPLE_SEC, Math.round(WINDOW_SEC / 10 / SAMPLE_SEC) * SAMPLE_SEC)} s`,
      columns: ['t s', 'A: none', `B: ${BACKLOG.toLocaleString('en-US')} ahead`],
      rows: rss.a
        .map((x, i) => [x.t, round(x.mib), round(rss.b[i]?.mib)])
        .filter((_, i, all) => i % Math.max(1, Math.round(all.length / 10)) === 0 || i === all.length - 1),
    };
    const tables: Table[] = [
      {
        title: `Retry backlog: two idle stacks observed for ${round(seconds, 0)} s; B holds ${pending.toLocaleString('en-US')} pending deliveries (seeded in ${round(seedSec, 1)} s), A none`,
        columns: ['measure', 'A: none', 'B: backlog', 'B / A'],
        rows: [
          [
            'webhooks CPU, ms per s (schedstat)',
            round(obsA.cpuMsPerSec, 3),
            round(obsB.cpuMsPerSec, 3),
            round(cpuRatio, 2),
          ],
          [`polling ${pollMethod}`, round(obsA.pollsPerSec, 2), round(obsB.pollsPerSec, 2), null],
          ['RSS first minute median, MiB', round(obsA.rssFirst), round(obsB.rssFirst), null],
          ['RSS last minute median, MiB', round(obsA.rssLast), round(obsB.rssLast), null],
          ['RSS max, MiB', round(obsA.rssMax), round(obsB.rssMax), null],
          [
            'RSS change first → last',
            pctText(obsA.rssChange),
            pctText(obsB.rssChange),
            round(rssRelative, 2),
          ],
        ],
        notes: [
          'both webhooks processes were restarted after the seed and observed from 10 s after their start',
          ...(ctx.selected.has('memory-soak')
            ? ['memory-soak ran during this window (it affects A and B alike)']
            : []),
          ...complaintNotes(a.stack).map((n) => `A: ${n}`),
          ...complaintNotes(b.stack).map((n) => `B: ${n}`),
        ],
      },
      {
        title: `Claiming ${DUE} due retries (EXPLAIN ANALYZE, median of 3; each in a rolled-back transaction)`,
        columns: ['pending deliveries', 'execution ms', 'shared buffers (hit + read)', 'runs: ms / buffers'],
        rows: [explain0, explain1].map((e) => [
          e.backlog,
          round(e.executionMs, 3),
          e.buffers,
          e.runs.map((r) => `${round(r.executionMs, 2)}/${r.buffers}`).join(', '),
        ]),
        notes: [`query from ${claim.source}:`, ...claim.text.split('\n').map((l) => `  ${l.trim()}`)],
      },
      planTable(`EXPLAIN (ANALYZE, BUFFERS) at ${explain0.backlog} pending`, explain0.plan),
      planTable(
        `EXPLAIN (ANALYZE, BUFFERS) at ${explain1.backlog.toLocaleString('en-US')} pending`,
        explain1.plan,
      ),
      rssTimeline,
    ];
    return {
      checks,
      tables,
      data: {
        backlog: pending,
        windowSec: seconds,
        seedSec,
        pollMethod,
        claim,
        explain: [explain0, explain1],
        a: obsA,
        b: obsB,
        stackLog: { a: stackComplaints(a.stack), b: stackComplaints(b.stack) },
      },
    };
  },
};

function pctText(v: number | null): string | null {
  return v === null ? null : `${v >= 0 ? '+' : ''}${(v * 100).toFixed(1)} %`;
}

function planTable(title: string, lines: string[]): Table {
  return { title, columns: ['plan'], rows: lines.map((l) => [l]) };
}
