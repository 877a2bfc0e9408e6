// HTTP load, bounded, in a child process (load-worker.ts): closed loop (as fast as the server
// answers on N connections) or paced at a fixed rate (`overallRate`). Both stop sending at their
// duration (or after `amount` requests) and then wait for the answers still in flight, so every
// request sent is counted: the 2xx count equals what the server committed. The child is asked to
// stop when the benchmark is aborted, and killed if it is still there a few seconds after its
// bound, so no load outlives its time.
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export interface LoadRequest {
  body?: string;
  headers?: Record<string, string>;
  /** 2xx answers are counted per tag (e.g. which account a request belongs to). */
  tag?: string;
}

export interface LoadSpec {
  title: string;
  url: string;
  method: 'POST' | 'GET';
  connections: number;
  durationSec: number;
  /**
   * Requests per second, evenly spaced (paced open loop, load-worker.ts); closed loop (as fast
   * as answers come back on `connections`) when absent.
   */
  overallRate?: number;
  body?: string;
  headers?: Record<string, string>;
  /** A cycle of requests each connection walks through (overrides body/headers per request). */
  requests?: LoadRequest[];
  /** Replace `[<id>]` in each request (headers and body) with a unique id. */
  idReplacement?: boolean;
  timeoutSec?: number;
  /** Closed loop only: stop after this many requests (or at durationSec, whichever comes first). */
  amount?: number;
  /** Answers that differ are counted as `unexpected` (e.g. replays must carry a header). */
  expect?: { status?: number; header?: [name: string, value: string] };
}

export interface LoadSummary {
  title: string;
  generator: string;
  startedAt: number;
  endedAt: number;
  durationSec: number;
  connections: number;
  overallRate: number | null;
  requests: number;
  ok: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  okPerSec: number;
  reqPerSec: number;
  latencyMs: { p50: number; p90: number; p99: number; max: number; mean: number };
  statusCodes: Record<string, number>;
  okByTag: Record<string, number>;
  /** Answers that did not match `expect`, and a few of them described. */
  unexpected: number;
  unexpectedSample: string[];
  /** CPU the generator's process used in all (it is one per load), milliseconds. */
  generatorCpuMs: number;
}

export type WorkerMessage =
  | { kind: 'started'; at: number }
  | { kind: 'done'; summary: LoadSummary }
  | { kind: 'error'; message: string };

const WORKER = fileURLToPath(new URL('./load-worker.ts', import.meta.url));
/** Past its duration, how long the generator may take to finish its last requests and report. */
const GRACE_MS = 15_000;

export function runLoad(
  spec: LoadSpec,
  opts: {
    signal: AbortSignal;
    /** When the generator starts sending. */
    onStart?: (at: number) => void;
    /** When it has finished, while its process is still alive (to read its CPU time). */
    onEnd?: () => void;
  },
): Promise<LoadSummary> {
  return new Promise((resolve, reject) => {
    if (opts.signal.aborted) return reject(opts.signal.reason);
    const child = fork(WORKER, [], {
      execPath: process.execPath,
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    let settled = false;
    const finish = (err: Error | null, summary?: LoadSummary) => {
      if (settled) return;
      settled = true;
      clearTimeout(killer);
      opts.signal.removeEventListener('abort', onAbort);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      if (err) reject(err);
      else resolve(summary!);
    };
    const killer = setTimeout(
      () =>
        finish(
          new Error(
            `load "${spec.title}" did not finish within ${spec.durationSec} s + ${GRACE_MS / 1000} s`,
          ),
        ),
      spec.durationSec * 1000 + GRACE_MS + 5_000,
    );
    const onAbort = () => {
      if (child.connected) child.send('stop');
      setTimeout(
        () => finish(new Error(`load "${spec.title}" aborted: ${String(opts.signal.reason)}`)),
        2_000,
      );
    };
    opts.signal.addEventListener('abort', onAbort, { once: true });
    child.on('message', (m: WorkerMessage) => {
      if (m.kind === 'started') opts.onStart?.(m.at);
      else if (m.kind === 'done') {
        opts.onEnd?.();
        finish(null, m.summary);
      } else finish(new Error(`load "${spec.title}" failed: ${m.message}`));
    });
    child.once('exit', (code, sig) => {
      if (!settled) finish(new Error(`load generator exited (${code ?? sig}) before reporting`));
    });
    child.once('error', (err) => finish(err));
    child.send(spec);
  });
}
