// Summarizes V8 CPU profiles (.cpuprofile, from `--cpu-prof`): self time by function and by
// package, so a benchmark's "where does the time go" needs no browser.
//
//   BENCH_NODE_OPTIONS="--cpu-prof --cpu-prof-dir=/tmp/prof" pnpm bench ingest
//   node test/bench/profile-summary.ts /tmp/prof/*.cpuprofile [--top 25]
//   … --inclusive            also the top functions by inclusive time (each sample counted once
//                            per function on its stack): which call paths cost, not only which leaves
//   … --under NAME           what the calls of functions named NAME spend their time in: their
//                            callees two levels down, by inclusive time (e.g. --under handle)
//
// Self time in a system call (writev, read) includes time the thread sat preempted inside it: the
// profiler samples on a clock, not on CPU time. Read those shares as an upper bound.
//
// Every process of the stack writes one profile when it exits; the process's entry file is
// found from the profile's own frames and printed with it.
import { readFileSync } from 'node:fs';
import path from 'node:path';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

const args = process.argv.slice(2);
const flagValue = (flag: string) => {
  const i = args.indexOf(flag);
  return i >= 0 ? args[i + 1] : undefined;
};
const top = Number(flagValue('--top') ?? 25);
const under = flagValue('--under');
const inclusive = args.includes('--inclusive');
const files = args.filter((a, i) => !a.startsWith('--') && !['--top', '--under'].includes(args[i - 1] ?? ''));
if (files.length === 0) {
  process.stderr.write(
    'usage: node test/bench/profile-summary.ts FILE.cpuprofile… [--top N] [--inclusive] [--under NAME]\n',
  );
  process.exit(2);
}

/** The package or area a frame belongs to. */
function area(url: string, fn: string): string {
  if (fn === '(garbage collector)') return '(gc)';
  if (fn === '(idle)') return '(idle)';
  if (fn === '(program)') return '(program: native, not attributed)';
  if (!url) return '(native / builtins)';
  if (url.startsWith('node:internal/')) return `node:internal/${url.slice(14).split('/')[0]}`;
  if (url.startsWith('node:')) return url;
  const nm = url.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + 14).split('/');
    return rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  const m = url.match(/\/(gateway|services\/[^/]+|packages\/[^/]+|test)\//);
  return m ? m[1]! : url;
}

/** `name  file:line` of a frame, as the tables print it. */
function frameName(n: Node): string {
  const { functionName, url, lineNumber } = n.callFrame;
  return `${functionName || '(anonymous)'}  ${url ? `${path.basename(url)}:${lineNumber + 1}` : ''}`;
}

/** Inclusive time per node: its own samples and its callees'. */
function inclusiveTimes(p: Profile, self: Map<number, number>): Map<number, number> {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const out = new Map<number, number>();
  const visit = (n: Node): number => {
    let t = self.get(n.id) ?? 0;
    for (const c of n.children ?? []) t += visit(byId.get(c)!);
    out.set(n.id, t);
    return t;
  };
  visit(p.nodes[0]!);
  return out;
}

/** Top functions by inclusive time; a function recursing into itself counts once per sample. */
function byInclusive(p: Profile, self: Map<number, number>): Map<string, number> {
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const out = new Map<string, number>();
  for (const [id, us] of self) {
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const name = frameName(byId.get(cur)!);
      if (seen.has(name)) continue;
      seen.add(name);
      out.set(name, (out.get(name) ?? 0) + us);
    }
  }
  return out;
}

/** A callee under `--under`: its inclusive time and its own callees', by name. */
interface Callee {
  us: number;
  callees: Map<string, number>;
}

/**
 * The calls of functions named `name` (outermost ones only): their total inclusive time and
 * their callees one and two levels down, each summed by name.
 */
function breakdownUnder(
  p: Profile,
  incl: Map<number, number>,
  name: string,
): { total: number; callees: Map<string, Callee> } {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const callees = new Map<string, Callee>();
  let total = 0;
  const walk = (n: Node) => {
    if (n.callFrame.functionName !== name) {
      for (const c of n.children ?? []) walk(byId.get(c)!);
      return;
    }
    total += incl.get(n.id) ?? 0;
    for (const c of n.children ?? []) {
      const child = byId.get(c)!;
      const key = frameName(child);
      const entry = callees.get(key) ?? { us: 0, callees: new Map<string, number>() };
      entry.us += incl.get(child.id) ?? 0;
      for (const g of child.children ?? []) {
        const grand = byId.get(g)!;
        entry.callees.set(frameName(grand), (entry.callees.get(frameName(grand)) ?? 0) + (incl.get(g) ?? 0));
      }
      callees.set(key, entry);
    }
  };
  walk(p.nodes[0]!);
  return { total, callees };
}

function pctOf(v: number, total: number): string {
  return `${((v / total) * 100).toFixed(1).padStart(5)} %`;
}

for (const file of files) {
  const p = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  for (let i = 0; i < p.samples.length; i++) {
    self.set(p.samples[i]!, (self.get(p.samples[i]!) ?? 0) + (p.timeDeltas[i] ?? 0));
  }
  const total = [...self.values()].reduce((a, b) => a + b, 0);
  const byFn = new Map<string, number>();
  const byArea = new Map<string, number>();
  let entry = '';
  let idle = 0;
  for (const [id, us] of self) {
    const n = byId.get(id)!;
    const { functionName, url } = n.callFrame;
    if (functionName === '(idle)') idle += us;
    if (!entry && /\/src\/main\.ts$/.test(url)) entry = url;
    const name = frameName(n);
    byFn.set(name, (byFn.get(name) ?? 0) + us);
    const a = area(url, functionName);
    byArea.set(a, (byArea.get(a) ?? 0) + us);
  }
  if (!entry) {
    for (const n of p.nodes) {
      if (/\/(gateway|services\/[^/]+)\/src\/main\.ts$/.test(n.callFrame.url)) {
        entry = n.callFrame.url;
        break;
      }
    }
  }
  const busy = total - idle;
  process.stdout.write(
    `\n### ${path.basename(file)}  ${entry.replace(/^.*\/main\//, '') || '(entry unknown)'}\n` +
      `wall ${(total / 1e6).toFixed(1)} s, busy ${(busy / 1e6).toFixed(1)} s (${pctOf(busy, total).trim()}); shares below are of busy time\n`,
  );
  process.stdout.write('\nby package / area:\n');
  for (const [a, us] of [...byArea]
    .filter(([k]) => k !== '(idle)')
    .sort((x, y) => y[1] - x[1])
    .slice(0, 15)) {
    process.stdout.write(`  ${pctOf(us, busy)}  ${a}\n`);
  }
  process.stdout.write(`\ntop ${top} functions by self time:\n`);
  for (const [f, us] of [...byFn]
    .filter(([k]) => !k.startsWith('(idle)'))
    .sort((x, y) => y[1] - x[1])
    .slice(0, top)) {
    process.stdout.write(`  ${pctOf(us, busy)}  ${f}\n`);
  }
  if (inclusive) {
    process.stdout.write(`\ntop ${top} functions by inclusive time:\n`);
    for (const [f, us] of [...byInclusive(p, self)]
      .filter(([k]) => !/^\((root|idle|program)\)/.test(k))
      .sort((x, y) => y[1] - x[1])
      .slice(0, top)) {
      process.stdout.write(`  ${pctOf(us, busy)}  ${f}\n`);
    }
  }
  if (under) {
    const { total: t, callees } = breakdownUnder(p, inclusiveTimes(p, self), under);
    process.stdout.write(
      `\nunder ${under}: ${pctOf(t, busy).trim()} of busy time; shares below are of that\n`,
    );
    if (t > 0) {
      for (const [f, c] of [...callees].sort((x, y) => y[1].us - x[1].us).slice(0, top)) {
        process.stdout.write(`  ${pctOf(c.us, t)}  ${f}\n`);
        for (const [g, us] of [...c.callees].sort((x, y) => y[1] - x[1]).slice(0, 3)) {
          if (us / t >= 0.005) process.stdout.write(`  ${pctOf(us, t)}      ${g}\n`);
        }
      }
    }
  }
}
