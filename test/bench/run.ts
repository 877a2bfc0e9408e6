// `pnpm bench [name…]`: the seven scenarios of issue 9, each with its same-run baseline, against
// fresh stacks of real processes on loopback (listeners below port 32768). Prints ONE summary
// table first (scenario, project, baseline, ratio, target, pass/fail), then every scenario's
// detail tables; progress goes to stderr. Writes the same as JSON and Markdown to
// .data/bench/<timestamp>.json and .md; a run of all seven also to .data/bench/latest.json and
// latest.md (the table for the README).
//
//   pnpm bench                      the seven scenarios (≤ 15 min; two 5-minute windows overlap)
//   pnpm bench ingest memory-soak   only these
//   pnpm bench --list               their names, targets and durations
//   MCS_ONE_PROCESS=true pnpm bench  the same with the API's parts in one process and webhooks in
//                                   its own (scripts/one-process.ts), as `MCS_ONE_PROCESS=true pnpm
//                                   start` runs them; the table goes to .data/bench/latest-one-process.*
//
// Each scenario has a hard time bound: past it, its load is stopped and everything it started
// (stacks, receivers, servers, load generators) is cleaned up; the others still run. A scenario
// that cannot run (a missing server, a tool, a schema it cannot seed) FAILS in the summary with
// its reason; nothing passes by being skipped. Exit code 0 only when every check passed.
//
// Knobs (experiments): BENCH_NODE_OPTIONS (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof") reaches
// every process of the stack; BENCH_STACK_ENV="K=V,…" adds variables to every part of every
// stack; BENCH_CONNECTIONS (ingest connections, default 32); BENCH_ROUNDS (default 3);
// BENCH_BOUND_FACTOR scales every time bound; BENCH_SOAK_SEC / BENCH_BACKLOG_SEC shorten the two
// 5-minute windows (the summary then says the target was not measured as specified);
// BENCH_LATENCY_ROUNDS (scenario 2, default 5); BENCH_TIMELINE_DIR=/tmp/tl writes every load's
// per-request send times and latencies there (load-worker.ts). Beside the scenarios,
// `node test/bench/gc-per-request.ts` measures each part's garbage collector per request, and
// `node test/bench/ab-latency.ts` compares scenario 2's tail for two settings side by side.
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { REPO_ROOT } from '@mcs/testkit';
import { calibrate } from './calibrate.ts';
import { deliveryLatency } from './delivery-latency.ts';
import { deliveryThroughput } from './delivery-throughput.ts';
import { idempotencyCost, ingest } from './ingest.ts';
import { ingestLatency } from './ingest-latency.ts';
import { isolation } from './isolation.ts';
import {
  type BenchContext,
  type Benchmark,
  type BenchResult,
  type Check,
  fmt,
  ONE_PROCESS,
  queryDb,
  renderTable,
  type Table,
} from './lib.ts';
import { memorySoak } from './memory-soak.ts';
import { retryBacklog } from './retry-backlog.ts';

/** The default run, in the order they run (ingest first: later ones reuse its numbers). */
const SCENARIOS: Benchmark[] = [
  ingest,
  idempotencyCost,
  ingestLatency,
  deliveryLatency,
  deliveryThroughput,
  retryBacklog,
  memorySoak,
];
/** Runnable by name only. */
const EXTRAS: Benchmark[] = [isolation];
const ALL = [...SCENARIOS, ...EXTRAS];
/** Scales every benchmark's time bound (a slower machine; or a tiny factor to test the bound). */
const BOUND_FACTOR = Number(process.env.BENCH_BOUND_FACTOR ?? 1) || 1;

interface Outcome {
  name: string;
  title: string;
  target?: number;
  ok: boolean;
  seconds: number;
  error?: string;
  result?: BenchResult;
}

const log = (message: string) =>
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);

interface Running {
  name: string;
  abort: AbortController;
  cleanups: Array<{ label: string; fn: () => unknown }>;
}
/** Benchmarks running now (two when a pair overlaps), for a signal to stop and clean up. */
const running = new Set<Running>();
let interrupted = false;

async function runCleanups(r: Running): Promise<void> {
  const list = r.cleanups.reverse();
  r.cleanups = [];
  for (const c of list) {
    try {
      await Promise.race([
        Promise.resolve().then(c.fn),
        new Promise((_, reject) => setTimeout(() => reject(new Error('took over 30 s')), 30_000).unref()),
      ]);
    } catch (err) {
      log(`${r.name}: clean-up "${c.label}" failed: ${(err as Error).message}`);
    }
  }
}

const shared = new Map<string, unknown>();

async function runOne(b: Benchmark, selected: Set<string>, onReady: () => void): Promise<Outcome> {
  const started = Date.now();
  const state: Running = { name: b.name, abort: new AbortController(), cleanups: [] };
  running.add(state);
  let readyCalled = false;
  const ready = () => {
    if (readyCalled) return;
    readyCalled = true;
    onReady();
  };
  const ctx: BenchContext = {
    signal: state.abort.signal,
    defer: (label, fn) => state.cleanups.push({ label, fn }),
    log: (m) => log(m),
    selected,
    shared,
    ready,
  };
  const budgetMs = b.budgetMs * BOUND_FACTOR;
  log(`${b.name}: starting (bound ${budgetMs / 1000} s)`);
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const err = new Error(`${b.name} exceeded its bound of ${budgetMs / 1000} s and was stopped`);
      state.abort.abort(err);
      reject(err);
    }, budgetMs);
  });
  const run = b.run(ctx);
  const base = { name: b.name, title: b.title, ...(b.target ? { target: b.target } : {}) };
  try {
    const result = await Promise.race([run, bound]);
    return { ...base, ok: true, seconds: (Date.now() - started) / 1000, result };
  } catch (err) {
    state.abort.abort(err);
    // Give the benchmark a moment to notice the abort and stop its load before cleaning up.
    await Promise.race([run.catch(() => {}), new Promise((r) => setTimeout(r, 5_000))]);
    const message = (err as Error).message ?? String(err);
    log(`${b.name}: FAILED: ${message}`);
    return { ...base, ok: false, seconds: (Date.now() - started) / 1000, error: message };
  } finally {
    clearTimeout(timer);
    ready(); // a benchmark that ends (or fails) before ready() releases the one waiting on it
    log(`${b.name}: cleaning up`);
    await runCleanups(state);
    running.delete(state);
  }
}

function usage(): string {
  const line = (b: Benchmark) =>
    `  ${b.name.padEnd(20)} ${b.target ? `target ${b.target}` : 'extra   '}  ~${String(Math.round(b.expectedSec / 10) * 10).padStart(3)} s  ${b.title}`;
  return [
    'usage: pnpm bench [name…] | --list',
    '',
    'the seven scenarios of issue 9 (pnpm bench runs them all, in this order):',
    ...SCENARIOS.map(line),
    '',
    'by name only:',
    ...EXTRAS.map(line),
    '',
    'retry-backlog and memory-soak overlap when both run (their 5-minute windows at the same time).',
    'idempotency-cost reuses the ingest rounds when ingest runs too.',
  ].join('\n');
}

function parseArgs(argv: string[]): Benchmark[] {
  if (argv.includes('--help') || argv.includes('-h') || argv.includes('--list')) {
    process.stdout.write(`${usage()}\n`);
    process.exit(0);
  }
  const flags = argv.filter((a) => a.startsWith('-'));
  if (flags.length > 0) {
    process.stderr.write(`unknown option: ${flags.join(', ')}\n${usage()}\n`);
    process.exit(2);
  }
  const names = argv;
  if (names.length === 0) return SCENARIOS;
  const unknown = names.filter((n) => !ALL.some((b) => b.name === n));
  if (unknown.length > 0) {
    process.stderr.write(`unknown benchmark: ${unknown.join(', ')}\n${usage()}\n`);
    process.exit(2);
  }
  return ALL.filter((b) => names.includes(b.name));
}

/** The code measured: HEAD, and whether the tree had changes. */
function gitDescribe(): { head: string; dirty: boolean } | null {
  try {
    const git = (args: string[]) => execFileSync('git', args, { cwd: REPO_ROOT, encoding: 'utf8' }).trim();
    return { head: git(['rev-parse', 'HEAD']), dirty: git(['status', '--porcelain']).length > 0 };
  } catch {
    return null;
  }
}

// ---------------------------------------------------------------------------------------------
// The summary

interface SummaryRow {
  target: number | null;
  scenario: string;
  check: Check;
}

function summaryRows(outcomes: Outcome[]): SummaryRow[] {
  const rows: SummaryRow[] = [];
  const sorted = [...outcomes].sort((a, b) => (a.target ?? 99) - (b.target ?? 99));
  for (const o of sorted) {
    const scenario = `${o.target ?? '–'} ${o.name}`;
    if (!o.result) {
      rows.push({
        target: o.target ?? null,
        scenario,
        check: {
          label: 'could not run',
          project: null,
          baseline: null,
          ratio: null,
          target: 'runs',
          pass: false,
          note: o.error ?? 'no result',
        },
      });
      continue;
    }
    if (o.result.checks.length === 0) {
      rows.push({
        target: o.target ?? null,
        scenario,
        check: {
          label: 'no checks',
          project: null,
          baseline: null,
          ratio: null,
          target: '–',
          pass: o.target ? false : null,
          note: 'the scenario returned no checks',
        },
      });
    }
    for (const c of o.result.checks) rows.push({ target: o.target ?? null, scenario, check: c });
  }
  return rows;
}

const verdict = (c: Check) => (c.pass === true ? 'pass' : c.pass === false ? 'FAIL' : 'FAIL (void)');
const ratioText = (r: number | null) => (r === null || !Number.isFinite(r) ? '–' : `${r.toFixed(2)}×`);
const cell = (v: string | number | null) => (typeof v === 'number' ? fmt(v) : (v ?? '–'));

function summaryTable(rows: SummaryRow[]): Table {
  return {
    title: 'Summary: issue 9 targets, each against its baseline measured in this run',
    columns: ['scenario', 'project', 'baseline', 'ratio', 'target', 'pass/fail'],
    rows: rows.map((r) => [
      `${r.scenario}: ${r.check.label}`,
      cell(r.check.project),
      cell(r.check.baseline),
      ratioText(r.check.ratio),
      r.check.target,
      verdict(r.check),
    ]),
    notes: rows.filter((r) => r.check.note).map((r) => `${r.scenario}, ${r.check.label}: ${r.check.note}`),
  };
}

const mdEscape = (s: string) => s.replaceAll('|', '\\|');

function markdownTable(t: Table): string {
  const out = [
    `| ${t.columns.map(mdEscape).join(' | ')} |`,
    `| ${t.columns.map((_, i) => (i === 0 ? '---' : '---:')).join(' | ')} |`,
    ...t.rows.map((r) => `| ${r.map((c) => mdEscape(fmt(c))).join(' | ')} |`),
  ];
  if (t.notes?.length) out.push('', ...t.notes.map((n) => `- ${mdEscape(n)}`));
  return out.join('\n');
}

async function postgresVersion(): Promise<string | null> {
  try {
    const [row] = await queryDb<{ v: string }>(
      process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
      `select current_setting('server_version') as v`,
    );
    return row?.v ?? null;
  } catch {
    return null;
  }
}

async function main(): Promise<number> {
  const selected = parseArgs(process.argv.slice(2));
  const selectedNames = new Set(selected.map((b) => b.name));
  const startedAt = new Date();
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      log(`${sig}: stopping the running benchmarks and cleaning up`);
      interrupted = true;
      const all = [...running];
      for (const r of all) r.abort.abort(new Error(sig));
      Promise.all(all.map(runCleanups)).finally(() => process.exit(130));
    });
  }
  const speedAtStart = calibrate();
  const outcomes: Outcome[] = [];
  const queue = [...selected];
  while (queue.length > 0 && !interrupted) {
    const b = queue.shift()!;
    const partnerIndex = b.overlapsWith ? queue.findIndex((q) => q.name === b.overlapsWith) : -1;
    if (partnerIndex < 0) {
      outcomes.push(await runOne(b, selectedNames, () => {}));
      continue;
    }
    const partner = queue.splice(partnerIndex, 1)[0]!;
    let release: () => void = () => {};
    const released = new Promise<void>((r) => {
      release = r;
    });
    const first = runOne(b, selectedNames, () => {
      log(`${b.name} is ready: starting ${partner.name} alongside it`);
      release();
    });
    await released;
    const second = interrupted ? null : runOne(partner, selectedNames, () => {});
    outcomes.push(await first);
    if (second) outcomes.push(await second);
  }

  const speedAtEnd = calibrate();
  const rows = summaryRows(outcomes);
  const summary = summaryTable(rows);
  const finishedAt = new Date();
  const minutes = (finishedAt.getTime() - startedAt.getTime()) / 60_000;
  const commit = gitDescribe();
  const machine = {
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model ?? null,
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
    os: `${os.type()} ${os.release()}`,
    node: process.version,
    postgres: await postgresVersion(),
    loadAverageAtEnd: os.loadavg().map((v) => Math.round(v * 100) / 100),
    /** test/bench/calibrate.ts: ms of a fixed CPU workload before and after the run (lower is faster). */
    calibrationMs: { start: speedAtStart, end: speedAtEnd },
  };
  const machineLine =
    `${machine.cpus} × ${machine.cpuModel}, ${machine.memoryGiB} GiB, ${machine.os}, Node ${machine.node}, ` +
    `PostgreSQL ${machine.postgres ?? '?'}; speed: calibration loop ${speedAtStart} ms at the start, ` +
    `${speedAtEnd} ms at the end (lower is faster)`;
  const modeLine = ONE_PROCESS
    ? 'stack: the gateway, accounts, commerce and messaging in one process, webhooks in its own (MCS_ONE_PROCESS=true)'
    : 'stack: a process per part (the default of pnpm start)';
  const passed = rows.filter((r) => r.check.pass === true).length;
  const couldNotRun = outcomes.filter((o) => !o.ok).map((o) => o.name);
  const tail =
    `${passed} of ${rows.length} checks passed` +
    (couldNotRun.length ? `; could not run: ${couldNotRun.join(', ')}` : '') +
    `; ${minutes.toFixed(1)} min${minutes > 15 ? ' (over the 15-minute budget of issue 9)' : ''}`;

  // stdout: the summary first, then each scenario's details.
  process.stdout.write(`\n${renderTable(summary)}\n   machine: ${machineLine}\n   ${modeLine}\n   ${tail}\n`);
  for (const o of outcomes) {
    process.stdout.write(`\n# ${o.target ? `${o.target} ` : ''}${o.title} (${o.seconds.toFixed(0)} s)\n`);
    if (o.result) for (const t of o.result.tables) process.stdout.write(`\n${renderTable(t)}\n`);
    else process.stdout.write(`\nFAILED: ${o.error}\n`);
  }

  const report = {
    startedAt: startedAt.toISOString(),
    finishedAt: finishedAt.toISOString(),
    minutes: Math.round(minutes * 10) / 10,
    argv: process.argv.slice(2),
    commit,
    machine,
    oneProcess: ONE_PROCESS,
    summary: rows.map((r) => ({
      issueTarget: r.target,
      scenario: r.scenario,
      ...r.check,
      verdict: verdict(r.check),
    })),
    benchmarks: Object.fromEntries(
      outcomes.map((o) => [
        o.name,
        {
          ok: o.ok,
          seconds: o.seconds,
          ...(o.error ? { error: o.error } : {}),
          ...(o.result ? { checks: o.result.checks, tables: o.result.tables, data: o.result.data } : {}),
        },
      ]),
    ),
  };
  const md = [
    `# pnpm bench${process.argv.length > 2 ? ` ${process.argv.slice(2).join(' ')}` : ''}`,
    '',
    `${startedAt.toISOString().slice(0, 16).replace('T', ' ')} UTC, ${minutes.toFixed(1)} min; ` +
      `commit ${commit ? `${commit.head.slice(0, 12)}${commit.dirty ? ' (with uncommitted changes)' : ''}` : '?'}`,
    '',
    `Machine: ${machineLine}`,
    '',
    `${modeLine[0]!.toUpperCase()}${modeLine.slice(1)}.`,
    '',
    markdownTable(summary),
    '',
    tail,
    '',
    '## Details',
    ...outcomes.flatMap((o) => [
      '',
      `### ${o.target ? `${o.target} ` : ''}${o.title} (${o.seconds.toFixed(0)} s)`,
      '',
      ...(o.result
        ? o.result.tables.flatMap((t) => ['```text', renderTable(t), '```', ''])
        : [`FAILED: ${o.error}`]),
    ]),
  ].join('\n');

  const dir = path.join(REPO_ROOT, '.data', 'bench');
  mkdirSync(dir, { recursive: true });
  const stamp = startedAt
    .toISOString()
    .replaceAll(':', '-')
    .replace(/\.\d+Z$/, 'Z');
  const json = path.join(dir, `${stamp}.json`);
  const mdFile = path.join(dir, `${stamp}.md`);
  writeFileSync(json, `${JSON.stringify(report, null, 2)}\n`);
  writeFileSync(mdFile, `${md}\n`);
  // latest.* is the last run of all seven (the table the README shows); a partial run leaves it.
  // latest-one-process.* the same for MCS_ONE_PROCESS=true.
  const full = SCENARIOS.every((b) => selectedNames.has(b.name)) && !interrupted;
  const latest = ONE_PROCESS ? 'latest-one-process' : 'latest';
  if (full) {
    copyFileSync(json, path.join(dir, `${latest}.json`));
    copyFileSync(mdFile, path.join(dir, `${latest}.md`));
  }
  process.stdout.write(
    `\n${tail}\nwritten: ${path.relative(REPO_ROOT, json)}, ${path.relative(REPO_ROOT, mdFile)}` +
      `${full ? ` (and ${latest}.json, ${latest}.md)` : ''}\n`,
  );
  await Promise.all([...running].map(runCleanups));
  if (interrupted) return 130;
  return passed === rows.length && couldNotRun.length === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    log(`fatal: ${(err as Error).stack ?? err}`);
    Promise.all([...running].map(runCleanups)).finally(() => process.exit(1));
  },
);
