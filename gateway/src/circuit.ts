// Fast refusals for a service that is down (issue 11: "503 api_error within 100 ms, never a
// hang"). One circuit per service, shared by every Connect client of that service in this
// gateway (routes, authentication, the dashboard, listen streams), as an interceptor on the
// service's transport (`guard`).
//
// A call fails "down" when the service cannot be reached (connection refused, reset mid-call: a
// killed or restarting process) or when the service says its database cannot be reached (the
// `mcs-unavailable: database` header of kit/server errorLogger's 503). The first such failure
// opens the circuit: from then on calls are refused here, at once, with 503 service_unavailable,
// instead of each one going to the service (a connect attempt, or a hop to a process that then
// fails its own database connect) and waiting on a busy machine for the processes on that path.
// Meanwhile the gateway probes the service itself, 25 ms after the circuit opened, then at
// doubling intervals up to 250 ms: a grpc.health.v1 Check of its `postgres` dependency (kit/health
// probes it then and there), which needs the service listening and its database answering. The
// first SERVING closes the circuit, so a part or PostgreSQL back is seen within about a quarter
// of a second, and no client's request is spent finding out (a request let through as a trial
// would take the long way, the slowest answers of an outage). Health calls pass the circuit.
//
// A frozen service (SIGSTOP, a stalled VM) or a stalled database fails no call: calls just wait
// for their deadlines, and every new one joined them. So a unary call still in flight after
// `suspectAfterMs` (2 s) has the service probed the same way, once at a time: when the probe
// fails, the circuit opens, and new calls are refused at once instead of waiting too.
import { Code, ConnectError, type Interceptor, type Transport } from '@connectrpc/connect';
import { apiError } from '@mcs/errors';
import { CALLER_HEADERS } from '@mcs/kit/caller';
import { grpcHealth } from '@mcs/proto';

const HEALTH = grpcHealth.Health.typeName;

export interface CircuitOptions {
  /**
   * Whether the service can serve again (the gateway: a health Check of its database). Without
   * one, a client's call is let through as the trial instead.
   */
  probe?: () => Promise<boolean>;
  /** First trial after the circuit opens (ms). */
  firstTrialMs?: number;
  /** Longest wait between trials (ms). */
  maxTrialMs?: number;
  now?: () => number;
  /** Called when the circuit opens (with the failure) and when it closes again. */
  onChange?: (down: boolean, err?: ConnectError) => void;
  /** A unary call in flight this long (ms) has the service probed (needs `probe`). */
  suspectAfterMs?: number;
}

const REFUSED = Symbol('refused by a circuit');

/** A call refused by an open circuit (never sent). */
export class ServiceDown extends ConnectError {
  readonly service: string;
  readonly [REFUSED] = true;
  // ConnectError's own check accepts any ConnectError (it is duck-typed across package copies).
  static override [Symbol.hasInstance](v: unknown): boolean {
    return typeof v === 'object' && v !== null && REFUSED in v;
  }
  constructor(service: string) {
    const e = apiError('service_unavailable');
    super(`${service} is down: refused without calling it`, Code.Unavailable, undefined, e.details as never);
    this.service = service;
  }
}

/** Whether a failed call says the service (or its database) is down, rather than the call being refused. */
export function isDown(err: unknown): boolean {
  if (!(err instanceof ConnectError)) return false;
  if (err instanceof ServiceDown) return false;
  if (!err.isWireError) {
    // Raised by the client: no connection (Unavailable), or it broke mid-call (Aborted).
    return err.code === Code.Unavailable || err.code === Code.Aborted;
  }
  return err.code === Code.Unavailable && err.metadata.get(CALLER_HEADERS.unavailable) === 'database';
}

export interface Circuit {
  /** The circuit as an interceptor of a connect-node transport. */
  readonly interceptor: Interceptor;
  /** Any transport behind the circuit (the gateway's lean unary transport runs no interceptors). */
  guard(transport: Transport): Transport;
  /** True while calls are refused. */
  isOpen(): boolean;
  /** Stops probing (shutdown). */
  close(): void;
}

export function createCircuit(service: string, opts: CircuitOptions = {}): Circuit {
  const now = opts.now ?? (() => performance.now());
  const firstTrialMs = opts.firstTrialMs ?? 25;
  const maxTrialMs = opts.maxTrialMs ?? 250;
  let open = false;
  let closed = false;
  /** Next wait between trials. */
  let backoff = firstTrialMs;
  /** No trial before this (client trials, without a probe). */
  let trialAt = 0;
  let trialInFlight = false;
  let timer: NodeJS.Timeout | undefined;
  let probing = false;

  // Unary calls in flight, counted per tick of `suspectAfterMs / 2` in which they started, in a
  // ring of four counts (calls started four or more ticks ago move to `older`): a call only reads
  // the tick and moves a count, nothing is allocated per call (a Map entered and left by every
  // call rehashes into new tables). At each tick, a count two or more ticks old means a call has
  // been waiting at least suspectAfterMs / 2 … suspectAfterMs.
  const tickMs = (opts.suspectAfterMs ?? 2_000) / 2;
  let tick = 0;
  const started = new Int32Array(4);
  let older = 0;
  let ticker: NodeJS.Timeout | undefined;
  let suspecting = false;
  function startTicker() {
    ticker = setInterval(() => {
      tick++;
      older += started[tick & 3]!;
      started[tick & 3] = 0;
      if (open || probing || suspecting || !opts.probe) return;
      if (older > 0 || started[(tick - 2) & 3]! > 0 || started[(tick - 3) & 3]! > 0) suspect();
    }, tickMs);
    ticker.unref();
  }
  function suspect() {
    suspecting = true;
    const after = (up: boolean) => {
      suspecting = false;
      if (!up && !closed)
        fail(
          new ConnectError(
            `${service} did not answer in ${2 * tickMs} ms, nor its health check`,
            Code.DeadlineExceeded,
          ),
          false,
        );
    };
    opts.probe!().then(after, () => after(false));
  }

  function schedule() {
    trialAt = now() + backoff;
    if (opts.probe && !closed) {
      timer = setTimeout(runProbe, backoff);
      timer.unref();
    }
    backoff = Math.min(backoff * 2, maxTrialMs);
  }
  function runProbe() {
    timer = undefined;
    if (!open || closed) return;
    probing = true;
    const after = (up: boolean) => {
      probing = false;
      if (up) succeed();
      else if (open && !timer) schedule();
    };
    opts.probe!().then(after, () => after(false));
  }
  function fail(err: ConnectError, trial: boolean) {
    if (!open) {
      open = true;
      backoff = firstTrialMs;
      opts.onChange?.(true, err);
    } else if (!trial) return; // a call sent before it opened: the waits are the trials' to set
    if (!timer && !probing) schedule();
  }
  function succeed() {
    if (!open) return;
    open = false;
    clearTimeout(timer);
    timer = undefined;
    opts.onChange?.(false);
  }

  async function run<T>(health: boolean, call: () => Promise<T>, unary = false): Promise<T> {
    if (health) return call(); // the probe, and operators' checks
    let trial = false;
    if (open) {
      if (opts.probe || trialInFlight || now() < trialAt) throw new ServiceDown(service);
      trial = trialInFlight = true;
    }
    const at = tick;
    if (unary) {
      if (!ticker && !closed && opts.probe) startTicker();
      started[at & 3]!++;
    }
    try {
      const res = await call();
      succeed();
      return res;
    } catch (err) {
      if (isDown(err)) fail(err as ConnectError, trial);
      else if (
        err instanceof ConnectError &&
        err.code !== Code.Canceled &&
        err.code !== Code.DeadlineExceeded
      )
        succeed(); // the service answered (a refusal of the call itself)
      throw err;
    } finally {
      if (trial) trialInFlight = false;
      if (unary) {
        if (tick - at >= 4) older--;
        else started[at & 3]!--;
      }
    }
  }

  const interceptor: Interceptor = (next) => (req) =>
    run(req.service.typeName === HEALTH, () => next(req), !req.stream);
  return {
    interceptor,
    guard(transport) {
      return {
        unary: (method, ...rest) =>
          run(method.parent.typeName === HEALTH, () => transport.unary(method, ...rest), true),
        stream: (method, ...rest) =>
          run(method.parent.typeName === HEALTH, () => transport.stream(method, ...rest)),
      } as Transport;
    },
    isOpen: () => open,
    close() {
      closed = true;
      clearTimeout(timer);
      clearInterval(ticker);
    },
  };
}
