// Notices when whoever launched the orchestrator goes away without telling it.
//
// `pnpm start` runs `sh -c "node scripts/start.ts"`, and `node` there is the `node` package's
// shell wrapper (node_modules/.bin/node), which runs the real binary as a child. On SIGTERM pnpm
// signals only the `sh -c`, which dies, and exits; the wrapper and this process would carry on as
// orphans. So we watch the chain of parent links from us up to the first ancestor that is not a
// shell (pnpm itself): once a link breaks, we have been orphaned. (start.ts uses this only when
// run by a package manager; started directly, it behaves like any other process.)
import { existsSync, readFileSync, readlinkSync } from 'node:fs';
import { basename } from 'node:path';

const SHELLS = new Set(['sh', 'dash', 'bash', 'zsh', 'ash', 'busybox']);

function parentOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // "pid (comm) state ppid …"; comm may itself contain spaces and parentheses.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[1]);
  } catch {
    return undefined;
  }
}

/** Whether `pid` runs a shell: by its executable (a script's interpreter) or, failing that, its argv[0]. */
function isShell(pid: number): boolean {
  const names: string[] = [];
  try {
    names.push(basename(readlinkSync(`/proc/${pid}/exe`)));
  } catch {
    // not ours to inspect
  }
  try {
    names.push(basename(readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0] ?? ''));
  } catch {
    // gone
  }
  return names.some((name) => SHELLS.has(name));
}

/** Whether `pid` is a shell running the `node` package's wrapper script (node_modules/.bin/node). */
function runsNodeWrapper(pid: number): boolean {
  try {
    const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    return args.slice(1, 3).some((a) => a.endsWith('/node_modules/.bin/node'));
  } catch {
    return false;
  }
}

/** Calls `onGone` once when a process between us and our launcher exits. Linux only; else a no-op. */
export function watchLauncher(onGone: (why: string) => void, intervalMs = 500): () => void {
  if (!existsSync('/proc/self/stat')) return () => {};
  // chain[i + 1] is the parent of chain[i].
  const chain = [process.pid];
  for (let pid = process.ppid; pid > 1; ) {
    chain.push(pid);
    if (!isShell(pid)) break;
    const next = parentOf(pid);
    if (next === undefined) break;
    pid = next;
  }
  // pnpm itself may run under that same wrapper (node_modules/.bin first on PATH: package
  // scripts, `pnpm exec`, test runners): a SIGTERM to the wrapper ends only the wrapper, and pnpm
  // carries on without passing anything on. The wrapper is then our launcher: watch it too.
  const launcher = chain.at(-1)!;
  const above = launcher === process.pid ? undefined : parentOf(launcher);
  if (above !== undefined && above > 1 && isShell(above) && runsNodeWrapper(above)) chain.push(above);
  const timer = setInterval(() => {
    for (let i = 0; i + 1 < chain.length; i++) {
      const child = chain[i]!;
      const parent = chain[i + 1]!;
      const actual = i === 0 ? process.ppid : parentOf(child);
      if (actual !== parent) {
        clearInterval(timer);
        onGone(`process ${parent} (${i === 0 ? 'our parent' : 'an ancestor'}) has exited`);
        return;
      }
    }
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
