// `pnpm start` without NATS_URL (CONTRACT §1): it spawns `nats-server -js` from PATH on
// 127.0.0.1:4229, storing under .data/nats, with the Go scheduler's processors that
// scripts/lib/nats.ts gives it (GOMAXPROCS unless the environment sets one); events flow through
// it (a signed order.created reaches a receiver); SIGTERM stops it with the rest of the stack.
// The stack keeps its events under its own JetStream prefix and deletes that stream before it
// stops, so the repository's .data/nats keeps nothing of the test.
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { availableParallelism } from 'node:os';
import {
  createTestDatabase,
  createTestNats,
  freeBasePort,
  REPO_ROOT,
  type Receiver,
  startReceiver,
  type TestDatabase,
  type TestNats,
  testStackEnv,
  until,
} from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { natsProcessors, SPAWNED_NATS_PORT } from '../../scripts/lib/nats.ts';

const SPAWNED_NATS_URL = `nats://127.0.0.1:${SPAWNED_NATS_PORT}`;

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/** The pid `pnpm start` reported for a part when it came up. */
function reportedPid(output: string, part: string): number | undefined {
  const m = new RegExp(`\\[start\\]\\s+${part} is up \\(pid (\\d+)\\)`).exec(output);
  return m ? Number(m[1]) : undefined;
}

describe('pnpm start without NATS_URL', () => {
  let db: TestDatabase;
  let nats: TestNats;
  let receiver: Receiver;
  let base: number;
  let launcher: ChildProcess;
  let output = '';
  let exitCode: number | null | undefined;
  let env: Record<string, string>;

  beforeAll(async () => {
    if (await portOpen(SPAWNED_NATS_PORT))
      throw new Error(`port ${SPAWNED_NATS_PORT} is taken (a \`pnpm start\` running?): this test needs it`);
    [db, receiver, base] = await Promise.all([createTestDatabase(), startReceiver(), freeBasePort()]);
    nats = createTestNats(SPAWNED_NATS_URL);
    // No NATS_URL: `pnpm start` spawns nats-server (Debian installs it in /usr/sbin).
    const { NATS_URL: _, ...common } = testStackEnv(base, db, nats);
    env = {
      ...common,
      PATH: `${process.env.PATH ?? ''}:/usr/sbin`,
      WEBHOOK_ALLOW_HTTP: 'true',
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
    };
    launcher = spawn(process.execPath, ['scripts/start.ts'], {
      cwd: REPO_ROOT,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    launcher.stdout!.on('data', (c: Buffer) => (output += c));
    launcher.stderr!.on('data', (c: Buffer) => (output += c));
    launcher.once('exit', (code) => {
      exitCode = code;
    });
    await until('the stack is up', () => output.includes('mcs is up') || exitCode !== undefined, {
      timeoutMs: 120_000,
      detail: () => output.slice(-4_000),
    });
    expect(exitCode, output).toBeUndefined();
  }, 180_000);

  afterAll(async () => {
    if (launcher && exitCode === undefined) {
      await nats?.drop().catch(() => {});
      const exited = new Promise((r) => launcher.once('exit', r));
      launcher.kill('SIGTERM');
      await exited;
    }
    await receiver?.close();
    await db?.drop().catch(() => {});
  }, 60_000);

  it('spawns nats-server with GOMAXPROCS set, carries the events through it, and stops it on SIGTERM', async () => {
    expect(output).toContain('starting nats-server (.data/nats, port 4229)');
    const pid = reportedPid(output, 'nats');
    expect(pid, output).toBeDefined();
    expect(readFileSync(`/proc/${pid}/cmdline`, 'utf8')).toContain('nats-server');
    const environ = `\0${readFileSync(`/proc/${pid}/environ`, 'utf8')}`;
    const expected = String(Math.max(1, Math.floor(availableParallelism() / 4)));
    expect(natsProcessors({}, availableParallelism())).toBe(expected);
    expect(environ).toContain(`\0GOMAXPROCS=${expected}\0`);

    // An order's event reaches a receiver: the services publish and consume through this server.
    const cli = spawn(
      process.execPath,
      ['packages/cli/src/main.ts', 'accounts', 'create', '--email', 'nats@example.com'],
      { cwd: REPO_ROOT, env, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let out = '';
    cli.stdout.on('data', (c: Buffer) => (out += c));
    await new Promise((r) => cli.once('exit', r));
    const key = (JSON.parse(out) as { secret_key: string }).secret_key;
    const post = (path: string, body: unknown) =>
      fetch(`http://127.0.0.1:${base}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    expect((await post('/v1/webhooks', { url: receiver.url, events: ['order.created'] })).status).toBe(200);
    const res = await post('/v1/orders', {
      customer: { name: 'Ada', phone: '+4915112345678' },
      currency: 'EUR',
      items: [{ name: 'Tea', unit_amount: 450, quantity: 1 }],
    });
    expect(res.status).toBe(200);
    const order = (await res.json()) as { id: string };
    await until(
      'order.created at the receiver',
      () =>
        receiver.received.find((r) => {
          const e = JSON.parse(r.body) as { type: string; data: { id: string } };
          return e.type === 'order.created' && e.data.id === order.id;
        }),
      {
        timeoutMs: 15_000,
        detail: () =>
          `received: ${receiver.received.map((r) => r.body.slice(0, 200)).join('\n')}\n${output.slice(-3_000)}`,
      },
    );

    // SIGTERM: the stack exits 0 and the spawned server is gone with it.
    await nats.drop();
    const exited = new Promise<number | null>((r) => launcher.once('exit', r));
    launcher.kill('SIGTERM');
    expect(await exited).toBe(0);
    exitCode = 0;
    expect(await portOpen(SPAWNED_NATS_PORT)).toBe(false);
    expect(() => readFileSync(`/proc/${pid}/cmdline`)).toThrow();
  }, 120_000);

  it('stops the nats-server a killed `pnpm start` left running, and starts', async () => {
    const start = () => {
      let out = '';
      const p = spawn(process.execPath, ['scripts/start.ts'], {
        cwd: REPO_ROOT,
        env,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      p.stdout!.on('data', (c: Buffer) => (out += c));
      p.stderr!.on('data', (c: Buffer) => (out += c));
      let code: number | null | undefined;
      p.once('exit', (c) => {
        code = c;
      });
      return { p, out: () => out, code: () => code };
    };
    const first = start();
    await until(
      'the first stack is up',
      () => first.out().includes('mcs is up') || first.code() !== undefined,
      {
        timeoutMs: 120_000,
        detail: () => first.out().slice(-4_000),
      },
    );
    const left = reportedPid(first.out(), 'nats');
    expect(left, first.out()).toBeDefined();
    first.p.kill('SIGKILL');
    // The Node parts stop on their own once it is gone; the nats-server does not.
    await until('the parts of the killed stack are gone', async () => !(await portOpen(base)), {
      timeoutMs: 30_000,
    });
    expect(readFileSync(`/proc/${left}/cmdline`, 'utf8')).toContain('nats-server');

    const second = start();
    launcher = second.p;
    exitCode = undefined;
    second.p.once('exit', (c) => {
      exitCode = c;
    });
    await until(
      'the second stack is up',
      () => second.out().includes('mcs is up') || second.code() !== undefined,
      {
        timeoutMs: 120_000,
        detail: () => second.out().slice(-4_000),
      },
    );
    expect(second.out()).toContain(
      `stopped the nats-server (pid ${left}) a killed \`pnpm start\` left running`,
    );
    expect(() => readFileSync(`/proc/${left}/cmdline`)).toThrow();
    await nats.drop();
    const exited = new Promise<number | null>((r) => second.p.once('exit', r));
    second.p.kill('SIGTERM');
    expect(await exited).toBe(0);
    exitCode = 0;
  }, 240_000);
});
