// A unary call settled once: by its own outcome, by the caller's AbortSignal (`canceled`) or by
// its deadline (`deadline_exceeded`), whichever comes first; a call cut short is told through the
// function its start returned. The gateway's lean transport (gateway/src/transport.ts) and the
// in-process transport (kit/in-process) both race their calls this way.
import { Code, ConnectError } from '@connectrpc/connect';

export interface Settle<T> {
  resolve(value: T): void;
  reject(err: ConnectError): void;
}

/**
 * Starts the call (`start`), which settles it through `settle` and returns how to cancel it. A
 * call that fails before `start` returns (no connection at all) is cancelled as well, so it can
 * release what it holds.
 */
export function raceCall<T>(
  signal: AbortSignal | undefined,
  timeoutMs: number | undefined,
  start: (settle: Settle<T>) => (reason: ConnectError) => void,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    if (signal?.aborted) {
      reject(ConnectError.from(signal.reason, Code.Canceled));
      return;
    }
    let done = false;
    let timer: NodeJS.Timeout | undefined;
    let cancel: ((reason: ConnectError) => void) | undefined;
    let failedEarly: ConnectError | undefined;
    const finish = () => {
      if (done) return false;
      done = true;
      if (timer) clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      return true;
    };
    const fail = (err: ConnectError) => {
      if (!finish()) return;
      cancel?.(err);
      reject(err);
    };
    const onAbort = () => fail(ConnectError.from(signal?.reason, Code.Canceled));
    signal?.addEventListener('abort', onAbort, { once: true });
    if (timeoutMs !== undefined && timeoutMs > 0)
      timer = setTimeout(
        () => fail(new ConnectError('the operation timed out', Code.DeadlineExceeded)),
        timeoutMs,
      );
    cancel = start({
      resolve(value) {
        if (finish()) resolve(value);
      },
      reject(err) {
        if (!finish()) return;
        if (cancel === undefined) failedEarly = err;
        reject(err);
      },
    });
    if (failedEarly) cancel(failedEarly);
  });
}
