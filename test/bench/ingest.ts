// Ingest: POST /v1/orders through the gateway (→ Connect → commerce → Postgres + outbox), closed
// loop on N connections, with a unique Idempotency-Key per request and without one; and the bare
// node:http + pg server doing the same writes in one statement, measured in the same run.
// DESIGN.md target: gateway with keys ≥ 0.5 × bare.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { type CpuReport, cpuTable, cpuWindow } from './cpu.ts';
import {
  type BenchContext,
  type Benchmark,
  complaintNotes,
  counterDelta,
  createAccounts,
  databaseName,
  dbCounters,
  freeLowPort,
  orderBody,
  orderHeaders,
  pct,
  round,
  stackComplaints,
  startBenchStack,
  type Table,
} from './lib.ts';
import { type LoadSpec, type LoadSummary, runLoad } from './load.ts';

const WARMUP_SEC = 3;
const MEASURE_SEC = 15;
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
/** PERF-NOTES.md: node:http + pg, idempotency row + order + outbox in one statement, 32 connections. */
const NOTES_BARE_RPS = 3_089;
const TARGET_RATIO = 0.5;

interface Run {
  name: string;
  load: LoadSummary;
  cpu: CpuReport | null;
  /** Database transactions committed per 2xx answer (pg_stat_database; approximate). */
  xactsPerRequest: number | null;
  rowsWrittenPerRequest: number | null;
}

const BARE = fileURLToPath(new URL('./bare-ingest.ts', import.meta.url));

/** Starts bare-ingest.ts on the benchmark's database; resolves its URL once it listens. */
async function startBare(
  ctx: BenchContext,
  databaseUrl: string,
): Promise<{ url: string; stop: () => Promise<void> }> {
  const port = await freeLowPort();
  const child = spawn(process.execPath, [BARE], {
    env: { PATH: process.env.PATH ?? '', DATABASE_URL: databaseUrl, PORT: String(port), POOL: '32' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    const t = setTimeout(() => child.kill('SIGKILL'), 3_000);
    await exited;
    clearTimeout(t);
  };
  ctx.defer('stop the bare server', stop);
  let err = '';
  child.stderr.on('data', (c: Buffer) => {
    err += c;
  });
  await new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`bare server not ready in 15 s: ${err}`)), 15_000);
    child.stdout.on('data', (c: Buffer) => {
      if (c.toString().includes('"ready"')) {
        clearTimeout(t);
        resolve();
      }
    });
    child.once('exit', (code) => {
      clearTimeout(t);
      reject(new Error(`bare server exited (${code}): ${err}`));
    });
  });
  return { url: `http://127.0.0.1:${port}`, stop };
}

async function measure(
  ctx: BenchContext,
  name: string,
  spec: Omit<LoadSpec, 'title' | 'durationSec' | 'connections'>,
  databaseUrl: string,
): Promise<Run> {
  ctx.log(`ingest: ${name}: ${WARMUP_SEC} s warm-up, then ${MEASURE_SEC} s on ${CONNECTIONS} connections`);
  await runLoad(
    { ...spec, title: `${name} warm-up`, durationSec: WARMUP_SEC, connections: CONNECTIONS },
    { signal: ctx.signal },
  );
  const before = await dbCounters(databaseUrl);
  let cpu: ReturnType<typeof cpuWindow> | undefined;
  let cpuReport: CpuReport | null = null;
  const load = await runLoad(
    { ...spec, title: name, durationSec: MEASURE_SEC, connections: CONNECTIONS },
    {
      signal: ctx.signal,
      onStart: () => {
        cpu = cpuWindow(databaseName(databaseUrl));
      },
      onEnd: () => {
        cpuReport = cpu?.end() ?? null;
      },
    },
  );
  const delta = counterDelta(before, await dbCounters(databaseUrl));
  const per = (n: number | undefined) => (n === undefined || load.ok === 0 ? null : round(n / load.ok, 2));
  return {
    name,
    load,
    cpu: cpuReport,
    xactsPerRequest: per(delta?.xactCommit),
    rowsWrittenPerRequest: per(delta ? delta.tupInserted + delta.tupUpdated + delta.tupDeleted : undefined),
  };
}

/** CPU milliseconds each part spent per answered request: where an order's cost goes. */
function cpuPerRequestTable(runs: Run[]): Table {
  const groups = [...new Set(runs.flatMap((r) => Object.keys(r.cpu?.byGroup ?? {})))].filter(
    (g) => !['other', 'postgres (server)', 'runner (receivers)', 'accounts', 'messaging'].includes(g),
  );
  const per = (r: Run, cores: number | undefined) =>
    cores === undefined || r.load.okPerSec === 0 ? null : round((cores * 1000) / r.load.okPerSec, 2);
  const sum = (r: Run) =>
    groups.reduce((s, g) => s + (g === 'load generator' ? 0 : (r.cpu?.byGroup[g] ?? 0)), 0);
  return {
    title: 'CPU ms per 2xx request, by process group (cores × 1000 / 2xx per s)',
    columns: ['process group', ...runs.map((r) => r.name)],
    rows: [
      ...groups
        .sort((a, b) => (keyedCores(runs, b) ?? 0) - (keyedCores(runs, a) ?? 0))
        .map((g) => [g, ...runs.map((r) => per(r, r.cpu?.byGroup[g]))]),
      ['server side total (without load generator)', ...runs.map((r) => per(r, sum(r)))],
    ],
  };
}

const keyedCores = (runs: Run[], g: string) => runs[1]?.cpu?.byGroup[g];

export const ingest: Benchmark = {
  name: 'ingest',
  title: 'Ingest: POST /v1/orders',
  budgetMs: 120_000,
  async run(ctx) {
    const stack = await startBenchStack(ctx);
    const [account] = await createAccounts(stack, 1);
    const body = orderBody('ingest');
    const bare = await startBare(ctx, stack.db.url);

    const runs: Run[] = [];
    runs.push(
      await measure(
        ctx,
        'bare node:http + pg, 1 statement',
        {
          url: `${bare.url}/v1/orders`,
          method: 'POST',
          body,
          headers: orderHeaders('unused', true),
          idReplacement: true,
        },
        stack.db.url,
      ),
    );
    // Its 32 connections go before the stack's pools grow (max_connections is 100 here).
    await bare.stop();
    const gateway = (key: boolean) => ({
      url: `${stack.baseUrl}/v1/orders`,
      method: 'POST' as const,
      body,
      headers: orderHeaders(account!.secretKey, key),
      idReplacement: key,
    });
    runs.push(await measure(ctx, 'gateway, Idempotency-Key', gateway(true), stack.db.url));
    runs.push(await measure(ctx, 'gateway, no key', gateway(false), stack.db.url));
    // The same with the webhooks service frozen: on this 2-core box its consumer (recording each
    // event) competes with ingest for the CPU, which the bare server never has to.
    stack.signal('webhooks', 'SIGSTOP');
    ctx.defer('thaw webhooks', () => stack.signal('webhooks', 'SIGCONT'));
    try {
      runs.push(await measure(ctx, 'gateway, key, webhooks paused', gateway(true), stack.db.url));
    } finally {
      stack.signal('webhooks', 'SIGCONT');
    }

    const [bareRun, keyed, unkeyed, paused] = runs as [Run, Run, Run, Run];
    const ratioSameRun = bareRun.load.okPerSec > 0 ? keyed.load.okPerSec / bareRun.load.okPerSec : null;
    const ratioNotes = keyed.load.okPerSec / NOTES_BARE_RPS;
    const met = ratioSameRun !== null && ratioSameRun >= TARGET_RATIO;

    const tables: Table[] = [
      {
        title: `Ingest: POST /v1/orders, ${CONNECTIONS} connections, ${MEASURE_SEC} s after ${WARMUP_SEC} s warm-up`,
        columns: [
          'run',
          '2xx/s',
          'p50 ms',
          'p99 ms',
          'max ms',
          'non-2xx',
          'errors',
          'db xacts/req',
          'rows/req',
        ],
        rows: runs.map((r) => [
          r.name,
          round(r.load.okPerSec, 0),
          r.load.latencyMs.p50,
          r.load.latencyMs.p99,
          r.load.latencyMs.max,
          r.load.non2xx,
          r.load.errors + r.load.timeouts,
          r.xactsPerRequest,
          r.rowsWrittenPerRequest,
        ]),
        notes: [
          `target: gateway with keys ≥ ${TARGET_RATIO} × bare (DESIGN.md)`,
          `  vs bare in this run: ${round(keyed.load.okPerSec, 0)} / ${round(bareRun.load.okPerSec, 0)} = ${pct(ratioSameRun)} → ${met ? 'MET' : 'MISSED'}`,
          `  vs PERF-NOTES bare ≈ ${NOTES_BARE_RPS.toLocaleString('en-US')} req/s (target ${(NOTES_BARE_RPS * TARGET_RATIO).toLocaleString('en-US')}): ${pct(ratioNotes)}`,
          `  without a key: ${pct(bareRun.load.okPerSec > 0 ? unkeyed.load.okPerSec / bareRun.load.okPerSec : null)} of bare; ` +
            `with the webhooks consumer paused: ${pct(bareRun.load.okPerSec > 0 ? paused.load.okPerSec / bareRun.load.okPerSec : null)}`,
          'db xacts/req: committed transactions per 2xx (pg_stat_database, approximate; relay batches included)',
          ...complaintNotes(stack),
        ],
      },
      cpuTable(runs),
      cpuPerRequestTable(runs),
    ];
    return {
      tables,
      data: {
        stackLog: stackComplaints(stack),
        connections: CONNECTIONS,
        warmupSec: WARMUP_SEC,
        measureSec: MEASURE_SEC,
        runs,
        ratioToBareSameRun: ratioSameRun,
        ratioToPerfNotesBare: ratioNotes,
        targetRatio: TARGET_RATIO,
        targetMet: met,
      },
    };
  },
};
