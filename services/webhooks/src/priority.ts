// The webhooks process yields the CPU to the request path (WEBHOOK_NICE). On a machine the parts
// share, a delivery can wait a few milliseconds; an API request should not. Niceness weighs the
// process's share only while the CPU is contended: on an idle machine deliveries go at once, and
// alone in its container (Kubernetes) the process competes with nothing it would yield to.
//
// Linux sets niceness per thread, so every thread of the process is set (V8's and libuv's already
// run; threads started later inherit it from the main thread). Raising niceness needs no privilege.
import { readdirSync } from 'node:fs';
import os from 'node:os';

/**
 * Raises this process's niceness to `nice` (0–19; a thread already as nice or nicer is left as it
 * is, so 0 changes nothing). Returns the threads changed, or an error message when the system
 * refused (the service runs on at its priority then).
 */
export function yieldCpu(nice: number): { threads: number } | { error: string } | null {
  if (nice === 0) return null;
  const raise = (id: number) => {
    if (os.getPriority(id) >= nice) return 0;
    os.setPriority(id, nice);
    return 1;
  };
  try {
    if (process.platform !== 'linux') return { threads: raise(0) };
    let threads = 0;
    for (const tid of readdirSync('/proc/self/task')) {
      try {
        threads += raise(Number(tid));
      } catch (err) {
        // A thread that ended between the listing and the call.
        if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
      }
    }
    return { threads };
  } catch (err) {
    return { error: (err as Error).message };
  }
}
