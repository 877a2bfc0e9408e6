// `pnpm bench [name…]`: the benchmarks of DESIGN.md's targets, each against a fresh stack of real
// processes. Prints a table per benchmark on stdout (progress goes to stderr) and writes the same
// numbers as JSON to .data/bench/<timestamp>.json.
//
//   pnpm bench                      every benchmark (about 3 minutes on 2 cores)
//   pnpm bench ingest isolation     only these
//   pnpm bench --list               their names
//
// Each benchmark has a hard time bound: past it, its load is stopped and everything it started
// (stack, receivers, servers, load generator) is cleaned up; the others still run. Set
// BENCH_NODE_OPTIONS (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof") to pass NODE_OPTIONS to every
// process of the stack, BENCH_STACK_ENV="K=V,…" to add variables to every part of every stack
// (experiments: WEBHOOK_ENDPOINT_CONCURRENCY=32), BENCH_CONNECTIONS to change the ingest
// connections (default 32), BENCH_BOUND_FACTOR to scale every time bound.
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { REPO_ROOT } from '@mcs/testkit';
import { deliveryLatency } from './delivery-latency.ts';
import { deliveryThroughput } from './delivery-throughput.ts';
import { ingest } from './ingest.ts';
import { isolation } from './isolation.ts';
import { type BenchContext, type Benchmark, type BenchResult, renderTable } from './lib.ts';

const BENCHMARKS: Benchmark[] = [ingest, deliveryLatency, deliveryThroughput, isolation];
/** Scales every benchmark's time bound (a slower machine; or a tiny factor to test the bound). */
const BOUND_FACTOR = Number(process.env.BENCH_BOUND_FACTOR ?? 1) || 1;

interface Outcome {
  name: string;
  title: string;
  ok: boolean;
  seconds: number;
  error?: string;
  result?: BenchResult;
}

const log = (message: string) =>
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);

/** Clean-ups of the benchmark running now, for a signal to run too. */
let pendingCleanups: Array<{ label: string; fn: () => unknown }> = [];
let currentAbort: AbortController | null = null;
let interrupted = false;
/** Clean-ups run one batch after another, however many callers ask (the benchmark's end, a signal). */
let cleanupChain: Promise<void> = Promise.resolve();

function runCleanups(): Promise<void> {
  cleanupChain = cleanupChain.then(async () => {
    const list = pendingCleanups.reverse();
    pendingCleanups = [];
    for (const c of list) {
      try {
        await Promise.race([
          Promise.resolve().then(c.fn),
          new Promise((_, reject) => setTimeout(() => reject(new Error('took over 30 s')), 30_000).unref()),
        ]);
      } catch (err) {
        log(`clean-up "${c.label}" failed: ${(err as Error).message}`);
      }
    }
  });
  return cleanupChain;
}

async function runOne(b: Benchmark): Promise<Outcome> {
  const started = Date.now();
  const abort = new AbortController();
  currentAbort = abort;
  const ctx: BenchContext = {
    signal: abort.signal,
    defer: (label, fn) => pendingCleanups.push({ label, fn }),
    log: (m) => log(m),
  };
  const budgetMs = b.budgetMs * BOUND_FACTOR;
  log(`${b.name}: starting (bound ${budgetMs / 1000} s)`);
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const err = new Error(`${b.name} exceeded its bound of ${budgetMs / 1000} s and was stopped`);
      abort.abort(err);
      reject(err);
    }, budgetMs);
  });
  const running = b.run(ctx);
  try {
    const result = await Promise.race([running, bound]);
    return { name: b.name, title: b.title, ok: true, seconds: (Date.now() - started) / 1000, result };
  } catch (err) {
    abort.abort(err);
    // Give the benchmark a moment to notice the abort and stop its load before cleaning up.
    await Promise.race([running.catch(() => {}), new Promise((r) => setTimeout(r, 5_000))]);
    const message = (err as Error).message ?? String(err);
    log(`${b.name}: FAILED: ${message}`);
    return {
      name: b.name,
      title: b.title,
      ok: false,
      seconds: (Date.now() - started) / 1000,
      error: message,
    };
  } finally {
    clearTimeout(timer);
    currentAbort = null;
    log(`${b.name}: cleaning up`);
    await runCleanups();
  }
}

function parseArgs(argv: string[]): Benchmark[] {
  if (argv.includes('--help') || argv.includes('-h') || argv.includes('--list')) {
    process.stdout.write(
      `usage: pnpm bench [name…]\n\n${BENCHMARKS.map((b) => `  ${b.name.padEnd(20)} ${b.title}`).join('\n')}\n`,
    );
    process.exit(0);
  }
  const names = argv.filter((a) => !a.startsWith('-'));
  if (names.length === 0) return BENCHMARKS;
  const unknown = names.filter((n) => !BENCHMARKS.some((b) => b.name === n));
  if (unknown.length > 0) {
    process.stderr.write(
      `unknown benchmark: ${unknown.join(', ')}; choose from ${BENCHMARKS.map((b) => b.name).join(', ')}\n`,
    );
    process.exit(2);
  }
  return BENCHMARKS.filter((b) => names.includes(b.name));
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

async function main(): Promise<number> {
  const selected = parseArgs(process.argv.slice(2));
  const startedAt = new Date();
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      log(`${sig}: stopping the running benchmark and cleaning up`);
      interrupted = true;
      currentAbort?.abort(new Error(sig));
      runCleanups().finally(() => process.exit(130));
    });
  }
  const outcomes: Outcome[] = [];
  for (const b of selected) {
    if (interrupted) break;
    const outcome = await runOne(b);
    outcomes.push(outcome);
    process.stdout.write(`\n# ${outcome.title} (${outcome.seconds.toFixed(0)} s)\n`);
    if (outcome.result) for (const t of outcome.result.tables) process.stdout.write(`\n${renderTable(t)}\n`);
    else process.stdout.write(`\nFAILED: ${outcome.error}\n`);
  }

  const report = {
    startedAt: startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    argv: process.argv.slice(2),
    commit: gitDescribe(),
    machine: {
      cpus: os.cpus().length,
      cpuModel: os.cpus()[0]?.model ?? null,
      memoryGiB: Math.round(os.totalmem() / 2 ** 30),
      node: process.version,
      loadAverage: os.loadavg(),
    },
    benchmarks: Object.fromEntries(
      outcomes.map((o) => [
        o.name,
        { ok: o.ok, seconds: o.seconds, ...(o.error ? { error: o.error } : {}), ...(o.result?.data ?? {}) },
      ]),
    ),
  };
  const dir = path.join(REPO_ROOT, '.data', 'bench');
  mkdirSync(dir, { recursive: true });
  const file = path.join(
    dir,
    `${startedAt
      .toISOString()
      .replaceAll(':', '-')
      .replace(/\.\d+Z$/, 'Z')}.json`,
  );
  writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
  const failed = outcomes.filter((o) => !o.ok);
  process.stdout.write(
    `\n${outcomes.length - failed.length} of ${outcomes.length} benchmarks ran` +
      `${failed.length ? ` (failed: ${failed.map((f) => f.name).join(', ')})` : ''}; JSON: ${path.relative(REPO_ROOT, file)}\n`,
  );
  await runCleanups();
  return interrupted ? 130 : failed.length ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    log(`fatal: ${(err as Error).stack ?? err}`);
    runCleanups().finally(() => process.exit(1));
  },
);
