// Polling for a condition in tests: one helper instead of a copy per file.

/** Not there yet: keep polling. */
export type NotYet = undefined | null | false;

export interface UntilOptions {
  /** Give up after this long (default 15 s: generous for a loaded 2-core machine). */
  timeoutMs?: number;
  /** Pause between two looks (default 50 ms). */
  everyMs?: number;
  /** What else to put in the time-out error, e.g. the last lines of a process's output. */
  detail?: () => string;
}

/**
 * Calls `probe` until it returns a value other than `undefined`, `null` or `false`, and resolves to
 * that value; a probe that throws ends the wait with its error. `0` and `''` count as values.
 * Past the time-out it rejects with an error naming `what` was awaited, e.g.
 * `until('the endpoint to turn unhealthy', async () => (await get()).status === 'unhealthy' && …)`.
 *
 * `options` is the time-out in ms, or UntilOptions.
 */
export async function until<T>(
  what: string,
  probe: () => T | NotYet | Promise<T | NotYet>,
  options: number | UntilOptions = {},
): Promise<T> {
  const {
    timeoutMs = 15_000,
    everyMs = 50,
    detail,
  } = typeof options === 'number' ? { timeoutMs: options } : options;
  const started = Date.now();
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== null && v !== false) return v;
    if (Date.now() - started > timeoutMs) {
      const more = detail?.();
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${more ? `\n${more}` : ''}`);
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
