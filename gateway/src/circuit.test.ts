// The gateway's circuit per service against a real Connect server (kit/server, HTTP/2): a service
// whose database is down, or whose port refuses connections, is refused at once after the first
// failure; one trial at a time gets through; the first answer closes it. Other errors (a bad key,
// a channel's own 503) never open it.
import { type ConnectRouter, createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { apiError, renderConnectError } from '@mcs/errors';
import { createLogger } from '@mcs/kit/log';
import { errorLogger, type ServerHandle, startConnectServer } from '@mcs/kit/server';
import { accounts, grpcHealth } from '@mcs/proto';
import { afterEach, describe, expect, it } from 'vitest';
import { createCircuit, ServiceDown } from './circuit.ts';
import { createUnaryTransport } from './transport.ts';

type Mode = 'ok' | 'database down' | 'bad key' | 'channel down' | 'stalled' | 'slow';

const log = createLogger('test', 'silent');
let server: ServerHandle | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

/** An AccountService whose AuthenticateKey answers as `state.mode` says, counting the calls it got. */
/** Released by the test: the answers a stalled or slow service holds back until then. */
let release: () => void = () => {};
let held = new Promise<void>((r) => {
  release = r;
});
afterEach(() => {
  release();
  held = new Promise<void>((r) => {
    release = r;
  });
});

async function serve(state: { mode: Mode; calls: number; probes?: number }, port = 0) {
  server = await startConnectServer({
    port,
    host: '127.0.0.1',
    interceptors: [errorLogger(log)],
    // Its database: down while the mode says so.
    health: {
      dependencies: [
        {
          name: 'postgres',
          probe: async () => {
            state.probes = (state.probes ?? 0) + 1;
            if (state.mode === 'database down') throw new Error('ECONNREFUSED');
            if (state.mode === 'stalled') await held; // a stalled database answers nothing
          },
        },
      ],
    },
    routes: (router: ConnectRouter) =>
      router.rpc(accounts.AccountService.method.authenticateKey, async () => {
        state.calls++;
        if (state.mode === 'stalled' || state.mode === 'slow') await held;
        if (state.mode === 'database down')
          throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
        if (state.mode === 'bad key') throw apiError('api_key_invalid');
        if (state.mode === 'channel down') throw apiError('service_unavailable', { message: 'channel' });
        return { accountId: 'acct_1' };
      }),
  });
  return server.port;
}

/**
 * A client of the server behind a circuit: as the gateway has it (its lean unary transport,
 * guarded), or as an interceptor of connect-node's transport.
 */
function clientOf(
  port: number,
  probing = false,
  now?: () => number,
  viaInterceptor = false,
  suspectAfterMs?: number,
) {
  const changes: boolean[] = [];
  const circuit = createCircuit('accounts', {
    onChange: (down) => changes.push(down),
    ...(suspectAfterMs ? { suspectAfterMs } : {}),
    ...(now ? { now } : {}),
    // As the gateway does: a health Check of the service's database, over the same transport.
    ...(probing
      ? {
          probe: async () =>
            (
              await createClient(grpcHealth.Health, transport).check(
                { service: 'postgres' },
                { timeoutMs: 1_000 },
              )
            ).status === grpcHealth.HealthCheckResponse_ServingStatus.SERVING,
        }
      : {}),
  });
  const url = `http://127.0.0.1:${port}`;
  const transport = viaInterceptor
    ? createConnectTransport({ baseUrl: url, httpVersion: '2', interceptors: [circuit.interceptor] })
    : circuit.guard(createUnaryTransport(url, createConnectTransport({ baseUrl: url, httpVersion: '2' })));
  const client = createClient(accounts.AccountService, transport);
  const call = () =>
    client.authenticateKey({ key: 'sk_test_x' }, { timeoutMs: 5_000 }).then(
      () => 'ok' as const,
      (err: unknown) => err,
    );
  return { circuit, call, changes };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('the circuit of a service', () => {
  it('opens on a database-down 503, refuses every call without sending it, and closes once a health check of its database passes', async () => {
    const state = { mode: 'database down' as Mode, calls: 0, probes: 0 };
    const { circuit, call, changes } = clientOf(await serve(state), true);
    expect(renderConnectError(await call(), '').code).toBe('service_unavailable');
    expect(circuit.isOpen()).toBe(true);
    const t0 = performance.now();
    while (performance.now() - t0 < 400) {
      const err = await call();
      expect(err).toBeInstanceOf(ServiceDown);
      expect(renderConnectError(err, '')).toMatchObject({ status: 503, code: 'service_unavailable' });
      await sleep(5);
    }
    // No client call reached it; the gateway probed its database meanwhile (25, 50, 100, 200 ms…).
    expect(state.calls).toBe(1);
    expect(state.probes).toBeGreaterThanOrEqual(3);
    expect(state.probes).toBeLessThanOrEqual(6);
    state.mode = 'ok';
    const backAt = performance.now();
    while ((await call()) !== 'ok') {
      expect(performance.now() - backAt, 'seen back within the longest wait between probes').toBeLessThan(
        1_000,
      );
      await sleep(5);
    }
    expect(state.calls).toBe(2);
    expect(changes).toEqual([true, false]);
  });

  it('opens when calls hang and so does the health check (a frozen service, a stalled database)', async () => {
    for (const viaInterceptor of [false, true]) {
      const state = { mode: 'stalled' as Mode, calls: 0, probes: 0 };
      const { circuit, call, changes } = clientOf(await serve(state), true, undefined, viaInterceptor, 200);
      const hanging = call();
      // Within two ticks of 100 ms the call is suspect; the probe then times out after 1 s.
      const t0 = performance.now();
      while (!circuit.isOpen() && performance.now() - t0 < 3_000) await sleep(20);
      expect(circuit.isOpen()).toBe(true);
      expect(changes).toEqual([true]);
      const refusedAt = performance.now();
      expect(await call()).toBeInstanceOf(ServiceDown);
      expect(performance.now() - refusedAt).toBeLessThan(100);
      expect(state.calls).toBe(1);
      release();
      expect(await hanging).toBe('ok');
      circuit.close();
      await server?.close();
      server = undefined;
      held = new Promise<void>((r) => {
        release = r;
      });
    }
  });

  it('stays closed for a slow call while the health check answers', async () => {
    const state = { mode: 'slow' as Mode, calls: 0, probes: 0 };
    const { circuit, call } = clientOf(await serve(state), true, undefined, false, 200);
    const slow = call();
    await sleep(700);
    expect(state.probes).toBeGreaterThanOrEqual(1); // it was suspect, and probed
    expect(circuit.isOpen()).toBe(false);
    state.mode = 'ok';
    expect(await call()).toBe('ok');
    release();
    expect(await slow).toBe('ok');
    circuit.close();
  });

  it('without a probe: one client call at a time is the trial, at growing intervals', async () => {
    const state = { mode: 'database down' as Mode, calls: 0 };
    let t = 0; // the circuit's clock, moved by hand
    const { circuit, call, changes } = clientOf(await serve(state), false, () => t);
    const first = await call();
    expect(renderConnectError(first, '').code).toBe('service_unavailable');
    expect(state.calls).toBe(1);
    expect(circuit.isOpen()).toBe(true);
    // Refused here: never sent, answered at once, rendered as the catalog's 503.
    const refused = await Promise.all(Array.from({ length: 50 }, call));
    expect(state.calls).toBe(1);
    for (const err of refused) {
      expect(err).toBeInstanceOf(ServiceDown);
      expect(renderConnectError(err, '')).toMatchObject({ status: 503, code: 'service_unavailable' });
    }
    // A trial after 25 ms (still down: the wait doubles), then one at a time.
    t += 24;
    await call();
    expect(state.calls, 'no trial before 25 ms').toBe(1);
    t += 1;
    await Promise.all(Array.from({ length: 5 }, call));
    expect(state.calls).toBe(2);
    t += 30;
    await call();
    expect(state.calls, 'the second trial waits 50 ms').toBe(2);
    // The database is back: the next trial gets through and closes the circuit.
    state.mode = 'ok';
    t += 20;
    expect(await call()).toBe('ok');
    expect(circuit.isOpen()).toBe(false);
    expect(await Promise.all([call(), call()])).toEqual(['ok', 'ok']);
    expect(changes).toEqual([true, false]);
  });

  it('opens when the port refuses connections, and closes once the service listens again', async () => {
    const state = { mode: 'ok' as Mode, calls: 0 };
    const port = await serve(state);
    const { circuit, call } = clientOf(port, true);
    expect(await call()).toBe('ok');
    await server!.close();
    server = undefined;
    const down = await call();
    expect(renderConnectError(down, '').code).toBe('service_unavailable');
    expect(circuit.isOpen()).toBe(true);
    expect(await call()).toBeInstanceOf(ServiceDown);
    await serve(state, port);
    const backAt = performance.now();
    while ((await call()) !== 'ok') {
      expect(performance.now() - backAt, 'seen back within the longest wait between trials').toBeLessThan(
        2_000,
      );
      await sleep(10);
    }
    expect(circuit.isOpen()).toBe(false);
  });

  it('stays closed for answers of the service: a refused key, a 503 of its own (not its database)', async () => {
    const state = { mode: 'bad key' as Mode, calls: 0 };
    const { circuit, call } = clientOf(await serve(state), false, undefined, true);
    for (const mode of ['bad key', 'channel down'] as const) {
      state.mode = mode;
      for (let i = 0; i < 3; i++) await call();
      expect(circuit.isOpen(), mode).toBe(false);
    }
    expect(state.calls).toBe(6);
  });
});
