// grpc.health.v1.Health on every service port (Kubernetes gRPC probes, grpc_health_probe,
// grpcurl). A service is SERVING while every dependency it was given answers (its PostgreSQL,
// its NATS connection) and NOT_SERVING while one does not. Nothing runs while nobody asks: a
// Check probes the dependencies (answers shared for a second, so a burst of probes costs one
// round trip each), and the dependencies are polled only while a Watch is open.
//
// A Check for a dependency by name (`postgres`, `nats`) probes that one dependency now, uncached:
// the gateway asks `postgres` while it refuses a service whose database was down (gateway/circuit),
// to see it back within a fraction of a second without sending a client's request to find out.
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError, type ConnectRouter } from '@connectrpc/connect';
import { grpcHealth } from '@mcs/proto';
import type { NatsConnection } from 'nats';
import type { Pool } from 'pg';

const { ServingStatus } = { ServingStatus: grpcHealth.HealthCheckResponse_ServingStatus };
type ServingStatus = grpcHealth.HealthCheckResponse_ServingStatus;

/** One dependency: resolves when it answers, rejects (or does not settle) when it does not. */
export interface HealthDependency {
  name: string;
  probe: () => Promise<unknown>;
}

export interface HealthOptions {
  dependencies: HealthDependency[];
  /** How long a probe may take before its dependency counts as down. */
  timeoutMs?: number;
  /** How long one probe's answer is reused, and how often Watch polls. */
  intervalMs?: number;
}

/** PostgreSQL answers `select 1` (through the service's own pool). */
export function databaseDependency(pool: Pool): HealthDependency {
  return { name: 'postgres', probe: () => pool.query('select 1') };
}

/** The NATS connection is open and the server answers a PING (flush waits for its PONG). */
export function natsDependency(nc: NatsConnection): HealthDependency {
  return {
    name: 'nats',
    probe: async () => {
      if (nc.isClosed()) throw new Error('NATS connection closed');
      await nc.flush();
    },
  };
}

function within<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

export interface HealthState {
  /** The status every served service shares now (probing if the last answer is stale). */
  current(): Promise<ServingStatus>;
  /** Names of the dependencies that failed the last probe (for logs and tests). */
  failing(): string[];
}

/**
 * Adds grpc.health.v1.Health to `router`, answering for "" (the whole server) and for each of
 * `services` (full names). Every service of a process shares its dependencies, so they share one status.
 */
export function addHealthService(
  router: ConnectRouter,
  services: string[],
  opts: HealthOptions,
): HealthState {
  const timeoutMs = opts.timeoutMs ?? 2_000;
  const intervalMs = opts.intervalMs ?? 1_000;
  const known = new Set(['', ...services]);
  let last: { at: number; status: ServingStatus; failing: string[] } | undefined;
  let running: Promise<ServingStatus> | undefined;

  const byName = new Map(opts.dependencies.map((d) => [d.name, d]));
  const probing = new Map<string, Promise<ServingStatus>>();
  /** One dependency, now (calls at the same time share the probe). */
  function probeOne(d: HealthDependency): Promise<ServingStatus> {
    let p = probing.get(d.name);
    if (!p) {
      p = within(Promise.resolve().then(d.probe), timeoutMs)
        .then(
          () => ServingStatus.SERVING,
          () => ServingStatus.NOT_SERVING,
        )
        .finally(() => probing.delete(d.name));
      probing.set(d.name, p);
    }
    return p;
  }

  async function probe(): Promise<ServingStatus> {
    const results = await Promise.allSettled(
      opts.dependencies.map((d) => within(Promise.resolve().then(d.probe), timeoutMs)),
    );
    const failing = opts.dependencies.filter((_, i) => results[i]?.status === 'rejected').map((d) => d.name);
    const status = failing.length === 0 ? ServingStatus.SERVING : ServingStatus.NOT_SERVING;
    last = { at: Date.now(), status, failing };
    return status;
  }

  const state: HealthState = {
    current() {
      if (last && Date.now() - last.at < intervalMs) return Promise.resolve(last.status);
      running ??= probe().finally(() => {
        running = undefined;
      });
      return running;
    },
    failing: () => last?.failing ?? [],
  };

  const answer = (status: ServingStatus) => create(grpcHealth.HealthCheckResponseSchema, { status });

  router.service(grpcHealth.Health, {
    async check(req) {
      const dependency = byName.get(req.service);
      if (dependency && !known.has(req.service)) return answer(await probeOne(dependency));
      if (!known.has(req.service))
        throw new ConnectError(`unknown service ${JSON.stringify(req.service)}`, Code.NotFound);
      return answer(await state.current());
    },
    async list() {
      const status = await state.current();
      return create(grpcHealth.HealthListResponseSchema, {
        statuses: Object.fromEntries([...known].map((name) => [name, answer(status)])),
      });
    },
    async *watch(req, ctx) {
      // An unknown service is not an error for Watch: it may be registered later (the protocol).
      if (!known.has(req.service)) {
        yield answer(ServingStatus.SERVICE_UNKNOWN);
        await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
        return;
      }
      let sent: ServingStatus | undefined;
      while (!ctx.signal.aborted) {
        const status = await state.current();
        if (status !== sent) {
          sent = status;
          yield answer(status);
        }
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, intervalMs);
          ctx.signal.addEventListener(
            'abort',
            () => {
              clearTimeout(timer);
              resolve();
            },
            { once: true },
          );
        });
      }
    },
  });
  return state;
}
