// Summarizes V8 CPU profiles (.cpuprofile, from `--cpu-prof`): self time by function and by
// package, so a benchmark's "where does the time go" needs no browser.
//
//   BENCH_NODE_OPTIONS="--cpu-prof --cpu-prof-dir=/tmp/prof" pnpm bench ingest
//   node test/bench/profile-summary.ts /tmp/prof/*.cpuprofile [--top 25]
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
const topIdx = args.indexOf('--top');
const top = topIdx >= 0 ? Number(args[topIdx + 1]) : 25;
const files = args.filter((a, i) => !a.startsWith('--') && (topIdx < 0 || i !== topIdx + 1));
if (files.length === 0) {
  process.stderr.write('usage: node test/bench/profile-summary.ts FILE.cpuprofile… [--top N]\n');
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
    const { functionName, url, lineNumber } = n.callFrame;
    if (functionName === '(idle)') idle += us;
    if (!entry && /\/src\/main\.ts$/.test(url)) entry = url;
    const name = `${functionName || '(anonymous)'}  ${url ? `${path.basename(url)}:${lineNumber + 1}` : ''}`;
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
}
