// Where the CPU went during a measurement: per process group, from /proc (Linux), in cores
// (1.0 = one core busy for the whole window). Our processes are the runner's descendants, told
// apart by their entry file; PostgreSQL backends of the benchmark's database are told from the
// rest of the server by their process title. Everything else on the machine is "other", which
// shows when a measurement was disturbed (another test run, a compiler).
import { readdirSync, readFileSync } from 'node:fs';
import type { Table } from './lib.ts';

interface Proc {
  pid: number;
  ppid: number;
  comm: string;
  ticks: number;
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
      // After "pid (comm) ": state ppid … utime (14th field overall) stime (15th).
      out.set(Number(name), {
        pid: Number(name),
        ppid: Number(f[1]),
        comm,
        ticks: Number(f[11]) + Number(f[12]),
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

const ENTRIES: Array<[RegExp, string]> = [
  [/gateway\/src\/main\.ts/, 'gateway'],
  [/services\/commerce\//, 'commerce'],
  [/services\/webhooks\//, 'webhooks'],
  [/services\/accounts\//, 'accounts'],
  [/services\/messaging\//, 'messaging'],
  [/bench\/load-worker\.ts/, 'load generator'],
  [/bench\/bare-ingest\.ts/, 'bare server'],
];

function classify(p: Proc, procs: Map<number, Proc>, database: string | undefined): string {
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
    for (const [re, label] of ENTRIES) if (re.test(cmd)) return label;
    const script = cmd.split(' ').find((a) => a.endsWith('.ts') || a.endsWith('.js'));
    return `runner child ${script ? script.split('/').slice(-2).join('/') : p.comm}`;
  }
  if (p.comm === 'postgres' || p.comm.startsWith('postgres')) {
    if (database && cmdline(p.pid).includes(database)) return 'postgres (bench db)';
    return 'postgres (server)';
  }
  if (p.comm === 'nats-server') return 'nats-server';
  return 'other';
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

/** Starts a CPU window; `end()` returns the cores each group used during it. */
export function cpuWindow(database?: string): { end(): CpuReport | null } {
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
      for (const p of procs.values()) {
        const before = start.procs.get(p.pid);
        const delta = p.ticks - (before && before.comm === p.comm ? before.ticks : 0);
        if (delta <= 0) continue;
        const g = classify(p, procs, database);
        byGroup[g] = (byGroup[g] ?? 0) + delta / TICKS_PER_SEC / windowSec;
      }
      const cores = readFileSync('/proc/cpuinfo', 'utf8').match(/^processor\s*:/gm)?.length ?? 1;
      const machineBusyCores =
        ((machine.busy - start.machine.busy) / (machine.total - start.machine.total || 1)) * cores;
      for (const k of Object.keys(byGroup)) byGroup[k] = Math.round(byGroup[k]! * 100) / 100;
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
