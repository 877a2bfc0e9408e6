// Where the CPU went during a measurement: per process group, from /proc (Linux), in cores
// (1.0 = one core busy for the whole window). Our processes are the runner's descendants, told
// apart by their entry file; PostgreSQL backends of the benchmark's database are told from the
// rest of the server by their process title, and named by the process they serve
// (`postgres: commerce`: the client port in that title is one of its sockets). Everything else on the machine is "other", which
// shows when a measurement was disturbed (another test run, a compiler).
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import type { Stack } from '@mcs/testkit';
import { round, type Table } from './lib.ts';

interface Proc {
  pid: number;
  ppid: number;
  comm: string;
  ticks: number;
  /** When the process started (clock ticks since boot): tells a reused pid from the same process. */
  started: number;
}

const TICKS_PER_SEC = 100; // USER_HZ on Linux

function readProcs(): Map<number, Proc> {
  const out = new Map<number, Proc>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const close = stat.lastIndexOf(')');
      const comm = stat.slice(stat.indexOf('(') + 1, close);
      const f = stat.slice(close + 2).split(' ');
      // After "pid (comm) ": state ppid … utime (14th field overall) stime (15th) … starttime (22nd).
      out.set(Number(name), {
        pid: Number(name),
        ppid: Number(f[1]),
        comm,
        ticks: Number(f[11]) + Number(f[12]),
        started: Number(f[19]),
      });
    } catch {}
  }
  return out;
}

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return '';
  }
}

/** The gateway, accounts, commerce and messaging in one process (MCS_ONE_PROCESS=true). */
export const ONE_PROCESS_PART = 'mcs (one process)';
const STACK_PARTS = new Set(['gateway', 'commerce', 'webhooks', 'accounts', 'messaging', ONE_PROCESS_PART]);

const ENTRIES: Array<[RegExp, string]> = [
  [/gateway\/src\/main\.ts/, 'gateway'],
  [/scripts\/one-process\.ts/, ONE_PROCESS_PART],
  [/services\/commerce\//, 'commerce'],
  [/services\/webhooks\//, 'webhooks'],
  [/services\/accounts\//, 'accounts'],
  [/services\/messaging\//, 'messaging'],
  [/bench\/load-worker\.ts/, 'load generator'],
  [/bench\/bare-ingest\.ts/, 'bare server'],
  [/bench\/bare-pipeline\.ts/, 'bare pipeline'],
];

/** Whether a process carries the stack's JetStream prefix in its environment (it belongs to that stack). */
function inStack(pid: number, prefix: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/environ`, 'utf8').includes(`\0MCS_NATS_PREFIX=${prefix}\0`);
  } catch {
    return false;
  }
}

function classify(
  p: Proc,
  procs: Map<number, Proc>,
  database: string | undefined,
  stackPrefix: string | undefined,
): string {
  if (p.pid === process.pid) return 'runner (receivers)';
  let a = procs.get(p.ppid);
  let ours = false;
  for (let i = 0; a && i < 20; i++) {
    if (a.pid === process.pid) {
      ours = true;
      break;
    }
    a = procs.get(a.ppid);
  }
  if (ours) {
    const cmd = cmdline(p.pid);
    for (const [re, label] of ENTRIES) {
      if (!re.test(cmd)) continue;
      // Another benchmark's stack running at the same time (an overlapping benchmark) is not ours.
      if (stackPrefix && STACK_PARTS.has(label) && !inStack(p.pid, stackPrefix)) return 'other bench stack';
      return label;
    }
    const script = cmd.split(' ').find((a) => a.endsWith('.ts') || a.endsWith('.js'));
    return `runner child ${script ? script.split('/').slice(-2).join('/') : p.comm}`;
  }
  if (p.comm === 'postgres' || p.comm.startsWith('postgres')) {
    if (database && cmdline(p.pid).includes(database)) return BENCH_DB;
    return 'postgres (server)';
  }
  if (p.comm === 'nats-server') return 'nats-server';
  return 'other';
}

/** Local TCP port of each socket inode, from /proc/net/tcp and tcp6 (this network namespace). */
function portsByInode(): Map<string, number> {
  const out = new Map<string, number>();
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
      const cols = line.trim().split(/\s+/);
      if (cols.length > 9) out.set(cols[9]!, Number.parseInt(cols[1]!.split(':')[1]!, 16));
    }
  }
  return out;
}

/** The local TCP ports of `pid`'s open sockets. */
function localPorts(pid: number, byInode: Map<string, number>): number[] {
  const ports: number[] = [];
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return ports;
  }
  for (const fd of fds) {
    try {
      const inode = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))?.[1];
      const port = inode === undefined ? undefined : byInode.get(inode);
      if (port !== undefined) ports.push(port);
    } catch {}
  }
  return ports;
}

const BENCH_DB = 'postgres (bench db)';

/**
 * Names each backend of the bench database by the process whose connection it serves
 * (`postgres: commerce`, `postgres: webhooks`, `postgres: bare server`): a backend's title
 * carries its client's address and port, and the client's socket is among that process's fds.
 * `groups` maps pid → group; backends whose client is not found keep BENCH_DB.
 */
function nameBackends(groups: Map<number, string>): void {
  const backends = [...groups].filter(([, g]) => g === BENCH_DB);
  if (backends.length === 0) return;
  const byInode = portsByInode();
  const owner = new Map<number, string>();
  for (const [pid, g] of groups) {
    if (g.startsWith('postgres') || g === 'nats-server' || g === 'other') continue;
    for (const port of localPorts(pid, byInode)) owner.set(port, g);
  }
  for (const [pid] of backends) {
    const port = /\((\d+)\)/.exec(cmdline(pid))?.[1];
    const g = port === undefined ? undefined : owner.get(Number(port));
    if (g) groups.set(pid, `postgres: ${g}`);
  }
}

function machineTicks(): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  const total = v.reduce((a, b) => a + b, 0);
  const idle = (v[3] ?? 0) + (v[4] ?? 0);
  return { busy: total - idle, total };
}

export interface CpuReport {
  windowSec: number;
  /** Cores busy, machine-wide (the box has `cores`). */
  machineBusyCores: number;
  cores: number;
  byGroup: Record<string, number>;
}

/**
 * Starts a CPU window; `end()` returns the cores each group used during it. With `stackPrefix`
 * (stack.nats.prefix), the parts of other stacks running meanwhile count as "other bench stack".
 */
export function cpuWindow(database?: string, stackPrefix?: string): { end(): CpuReport | null } {
  let start: { t: number; procs: Map<number, Proc>; machine: { busy: number; total: number } } | null = null;
  try {
    start = { t: performance.now(), procs: readProcs(), machine: machineTicks() };
  } catch {
    return { end: () => null }; // no /proc: not Linux
  }
  return {
    end() {
      if (!start) return null;
      const t = performance.now();
      const procs = readProcs();
      const machine = machineTicks();
      const windowSec = (t - start.t) / 1000;
      const byGroup: Record<string, number> = {};
      const deltas = new Map<number, number>();
      const groups = new Map<number, string>();
      for (const p of procs.values()) {
        const before = start.procs.get(p.pid);
        // The same process if it started at the same time: not by its name, which a kernel
        // worker changes with each work queue it serves ("kworker/u4:2-flush-254:0"), and a
        // renamed one was charged its whole life's CPU (up to 1.4 cores in one window).
        const delta = p.ticks - (before && before.started === p.started ? before.ticks : 0);
        if (delta <= 0) continue;
        deltas.set(p.pid, delta);
        groups.set(p.pid, classify(p, procs, database, stackPrefix));
      }
      nameBackends(groups);
      for (const [pid, g] of groups)
        byGroup[g] = (byGroup[g] ?? 0) + deltas.get(pid)! / TICKS_PER_SEC / windowSec;
      const cores = readFileSync('/proc/cpuinfo', 'utf8').match(/^processor\s*:/gm)?.length ?? 1;
      const machineBusyCores =
        ((machine.busy - start.machine.busy) / (machine.total - start.machine.total || 1)) * cores;
      for (const k of Object.keys(byGroup)) byGroup[k] = Math.round(byGroup[k]! * 1000) / 1000;
      return { windowSec, machineBusyCores: Math.round(machineBusyCores * 100) / 100, cores, byGroup };
    },
  };
}

/** One row per group, busiest first. */
export function cpuRows(r: CpuReport | null): Array<[string, number]> {
  if (!r) return [];
  return Object.entries(r.byGroup)
    .filter(([, v]) => v >= 0.01)
    .sort((a, b) => b[1] - a[1]);
}

/** Cores per process group during each measured run. */
export function cpuTable(runs: Array<{ name: string; cpu: CpuReport | null }>, title = 'CPU'): Table {
  const groups = new Set<string>();
  for (const r of runs) for (const [g] of cpuRows(r.cpu)) groups.add(g);
  const order = [...groups].sort(
    (a, b) =>
      Math.max(...runs.map((r) => r.cpu?.byGroup[b] ?? 0)) -
      Math.max(...runs.map((r) => r.cpu?.byGroup[a] ?? 0)),
  );
  return {
    title: `${title}: cores busy during each measured window (the machine has ${runs[0]?.cpu?.cores ?? '?'})`,
    columns: ['process group', ...runs.map((r) => r.name)],
    rows: [
      ...order.map((g) => [g, ...runs.map((r) => r.cpu?.byGroup[g] ?? null)]),
      ['machine total', ...runs.map((r) => r.cpu?.machineBusyCores ?? null)],
    ],
  };
}

/** A CPU window scoped to one stack: its database's backends and its own processes. */
export function stackCpuWindow(stack: Stack): { end(): CpuReport | null } {
  return cpuWindow(new URL(stack.db.url).pathname.slice(1), stack.nats.prefix);
}

const plural = (unit: string) => (unit.endsWith('y') ? `${unit.slice(0, -1)}ies` : `${unit}s`);

/** Groups that are not part of the system under test, left out of "server side total". */
const NOT_SERVER = new Set([
  'other',
  'postgres (server)',
  'load generator',
  'other bench stack',
  'runner (receivers)',
]);

/**
 * CPU milliseconds each process group spent per unit of work (a 2xx order, a delivery): the
 * figure that decides throughput and latency on a small box (PERF-NOTES.md). `units` is the
 * number of units completed inside each window.
 */
export function cpuPerUnitTable(
  runs: Array<{ name: string; cpu: CpuReport | null; units: number }>,
  unit: string,
  title = `CPU ms per ${unit}, by process group (cores × window s × 1000 / ${plural(unit)})`,
): Table {
  const groups = new Set<string>();
  for (const r of runs) for (const [g] of cpuRows(r.cpu)) groups.add(g);
  const per = (r: (typeof runs)[number], cores: number | undefined) =>
    cores === undefined || !r.cpu || r.units <= 0
      ? null
      : round((cores * r.cpu.windowSec * 1000) / r.units, 3);
  const order = [...groups].sort(
    (a, b) =>
      Math.max(...runs.map((r) => r.cpu?.byGroup[b] ?? 0)) -
      Math.max(...runs.map((r) => r.cpu?.byGroup[a] ?? 0)),
  );
  const serverSum = (r: (typeof runs)[number]) =>
    Object.entries(r.cpu?.byGroup ?? {})
      .filter(([g]) => !NOT_SERVER.has(g) && !NOT_SERVER.has(g.replace(/^postgres: /, '')))
      .reduce((s, [, v]) => s + v, 0);
  return {
    title,
    columns: ['process group', ...runs.map((r) => r.name)],
    rows: [
      ...order.map((g) => [g, ...runs.map((r) => per(r, r.cpu?.byGroup[g]))]),
      [
        'system under test (all but load generator, receivers, other)',
        ...runs.map((r) => per(r, serverSum(r))),
      ],
      [`${plural(unit)} in the window`, ...runs.map((r) => r.units)],
    ],
  };
}

// ---------------------------------------------------------------------------------------------
// Processes of a stack: pids, memory, exact CPU time

/** The pid of each part of `stack` (found by its entry file and its JetStream prefix). */
export function stackPids(stack: Stack): Record<string, number> {
  const out: Record<string, number> = {};
  const entries: Array<[RegExp, string]> = ENTRIES.filter(([, label]) => STACK_PARTS.has(label));
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const pid = Number(name);
    const cmd = cmdline(pid);
    const hit = entries.find(([re]) => re.test(cmd));
    if (hit && inStack(pid, stack.nats.prefix)) out[hit[1]] = pid;
  }
  return out;
}

/** The nats-server process listening on the port of `natsUrl` (or the only one running). */
export function natsServerPid(natsUrl: string): number | null {
  const port = new URL(natsUrl).port || '4222';
  const all: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (readFileSync(`/proc/${name}/comm`, 'utf8').trim() !== 'nats-server') continue;
    } catch {
      continue;
    }
    all.push(Number(name));
    const cmd = cmdline(Number(name));
    if (new RegExp(`(-p|--port)[ =]${port}\\b`).test(cmd)) return Number(name);
  }
  return all.length === 1 ? all[0]! : null;
}

/** Resident set size of a process in MiB (VmRSS), or null if it is gone. */
export function rssMiB(pid: number): number | null {
  try {
    const m = readFileSync(`/proc/${pid}/status`, 'utf8').match(/^VmRSS:\s+(\d+) kB/m);
    return m ? Number(m[1]) / 1024 : null;
  } catch {
    return null;
  }
}

/** The summed RSS (MiB) of the PostgreSQL backends connected to `database`. */
export function postgresBackendsRssMiB(database: string): number {
  let sum = 0;
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (!readFileSync(`/proc/${name}/comm`, 'utf8').startsWith('postgres')) continue;
    } catch {
      continue;
    }
    if (cmdline(Number(name)).includes(database)) sum += rssMiB(Number(name)) ?? 0;
  }
  return sum;
}

/**
 * CPU time of a whole process (every thread) in nanoseconds, from the scheduler's own account
 * (/proc/PID/task/TID/schedstat): exact where /proc/PID/stat counts 10 ms ticks.
 */
export function processCpuNs(pid: number): number | null {
  try {
    let sum = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        sum += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
      } catch {}
    }
    return sum;
  } catch {
    return null;
  }
}

/** Several windows as one: each group's cores averaged over the windows' total length. */
export function pooledCpu(reports: Array<CpuReport | null>): CpuReport | null {
  const rs = reports.filter((r): r is CpuReport => r !== null);
  if (rs.length === 0) return null;
  const windowSec = rs.reduce((s, r) => s + r.windowSec, 0);
  const byGroup: Record<string, number> = {};
  for (const r of rs)
    for (const [g, cores] of Object.entries(r.byGroup)) byGroup[g] = (byGroup[g] ?? 0) + cores * r.windowSec;
  for (const g of Object.keys(byGroup)) byGroup[g] = Math.round((byGroup[g]! / windowSec) * 1000) / 1000;
  const machine = rs.reduce((s, r) => s + r.machineBusyCores * r.windowSec, 0) / windowSec;
  return { windowSec, machineBusyCores: Math.round(machine * 100) / 100, cores: rs[0]!.cores, byGroup };
}
