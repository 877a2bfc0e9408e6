// Chaos: kill -9 of each part, in turn, 5 rounds in `pnpm test:chaos` (1 in `pnpm test`), under a
// steady load of writes, with `pnpm start` as the supervisor (scripts/start.ts restarts a crashed
// part). Between kills the part must be back; the API keeps answering (503 api_error for what is
// down) and every resource it accepted is delivered once. The stack runs on its own database and
// JetStream prefix on the shared servers, which are never stopped.
import { type ChildProcess, spawn } from 'node:child_process';
import net from 'node:net';
import {
  createTestDatabase,
  createTestNats,
  REPO_ROOT,
  type Receiver,
  type Stack,
  startReceiver,
  type TestDatabase,
  type TestNats,
  testStackEnv,
  until,
} from '@mcs/testkit';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { sleep, startLoad } from '../e2e/load.ts';
import { pick, setUp, verdict } from './lib.ts';

const ROUNDS = pick(1, 5);
const PARTS = ['accounts', 'commerce', 'messaging', 'webhooks', 'gateway'] as const;
type Part = (typeof PARTS)[number];
const PROBE: Record<Part, string> = {
  accounts: '/v1/orders?limit=1',
  commerce: '/v1/orders?limit=1',
  messaging: '/v1/conversations?limit=1',
  webhooks: '/v1/webhooks?limit=1',
  gateway: '/v1/orders?limit=1',
};

let db: TestDatabase;
let nats: TestNats;
let receiver: Receiver;
let launcher: ChildProcess;
let output = '';
let exited: number | null | undefined;
let stack: Stack;

async function freeBase(): Promise<number> {
  const free = (port: number) =>
    new Promise<boolean>((resolve) => {
      const s = net.createServer();
      s.once('error', () => resolve(false));
      s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
    });
  for (;;) {
    const base = 20_000 + Math.floor(Math.random() * 1_000) * 10;
    if ((await Promise.all([0, 1, 2, 3, 4].map((d) => free(base + d)))).every(Boolean)) return base;
  }
}

/** The pid the launcher last reported for a part. */
function pidOf(part: Part): number | undefined {
  let pid: number | undefined;
  for (const m of output.matchAll(
    new RegExp(`\\[start\\]\\s+${part} (?:is up|restarted) \\(pid (\\d+)\\)`, 'g'),
  ))
    pid = Number(m[1]);
  return pid;
}

beforeAll(async () => {
  [db, receiver] = await Promise.all([createTestDatabase(), startReceiver()]);
  nats = createTestNats();
  const base = await freeBase();
  const env: Record<string, string> = {
    ...testStackEnv(base, db, nats),
    WEBHOOK_ALLOW_HTTP: 'true',
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
    WEBHOOK_TIMEOUT: '2s',
    WEBHOOK_LEASE_MARGIN: '1s',
    WEBHOOK_RETRY_SCHEDULE: '500ms,1s,1s,2s,2s',
    WEBHOOK_ACK_WAIT: '5s',
    AUTH_CACHE_TTL: '1s',
  };
  launcher = spawn(process.execPath, ['scripts/start.ts'], {
    cwd: REPO_ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  launcher.stdout!.on('data', (c: Buffer) => (output = (output + c).slice(-200_000)));
  launcher.stderr!.on('data', (c: Buffer) => (output = (output + c).slice(-200_000)));
  launcher.once('exit', (code) => {
    exited = code;
  });
  await until('mcs is up', () => output.includes('mcs is up') || exited !== undefined, {
    timeoutMs: 120_000,
    everyMs: 50,
  });
  expect(exited, output).toBeUndefined();
  const url = `http://127.0.0.1:${base}`;
  // What the load and the checks use of a Stack: the gateway, the database, the stream, the CLI.
  stack = {
    baseUrl: url,
    gatewayUrls: [url],
    db,
    nats,
    env,
    async api(key, method, path, body, opts = {}) {
      const res = await fetch(`${url}${path}`, {
        method,
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...opts.headers },
        body: body === undefined ? undefined : JSON.stringify(body),
        ...(opts.signal ? { signal: opts.signal } : {}),
      });
      const text = await res.text();
      let json = null;
      try {
        json = JSON.parse(text);
      } catch {}
      return { status: res.status, headers: res.headers, text, json };
    },
    async cli(args) {
      const child = spawn(process.execPath, ['packages/cli/src/main.ts', ...args], {
        cwd: REPO_ROOT,
        env,
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      let out = '';
      child.stdout.on('data', (c: Buffer) => (out += c));
      await new Promise((r) => child.once('exit', r));
      return out;
    },
  } as Stack;
}, 180_000);

afterAll(async () => {
  if (launcher && exited === undefined) {
    const gone = new Promise((r) => launcher.once('exit', r));
    launcher.kill('SIGTERM');
    await gone;
  }
  await receiver?.close();
  await nats?.drop().catch(() => {});
  await db?.drop().catch(() => {});
}, 60_000);

it(
  `kill -9 of each part, ${ROUNDS} round(s), under load: the API stays up, 0 lost`,
  async () => {
    const keys = await setUp(stack, receiver);
    const load = startLoad(stack, keys.secret_key, {
      lanes: 3,
      pauseMs: 20,
      conversations: true,
      retryDelayMs: 100,
    });
    const back: number[] = [];
    try {
      await sleep(1_000);
      for (let round = 0; round < ROUNDS; round++) {
        for (const part of PARTS) {
          const pid = await until(`${part}'s pid`, () => pidOf(part), { timeoutMs: 5_000, everyMs: 20 });
          const killedAt = Date.now();
          process.kill(pid, 'SIGKILL');
          await until(`${part} restarted`, () => pidOf(part) !== pid, { timeoutMs: 30_000, everyMs: 20 });
          await until(
            `${part}'s route answers again`,
            async () =>
              (await stack.api(keys.secret_key, 'GET', PROBE[part]).catch(() => ({ status: 0 }))).status ===
              200,
            { timeoutMs: 30_000, everyMs: 20 },
          );
          back.push(Date.now() - killedAt);
          await sleep(500);
        }
      }
    } finally {
      await sleep(1_000);
    }
    const report = await load.stop();
    back.sort((a, b) => a - b);
    await verdict(`kill -9 of each part ×${ROUNDS}`, stack, receiver, keys, report, {
      recoveryMs: back.at(-1) ?? 0,
      extra: `${back.length} kills, back (route answering 200) in median ${back[Math.floor(back.length / 2)]} ms, max ${back.at(-1)} ms`,
    });
    expect(exited, output.slice(-4_000)).toBeUndefined();
    expect(back.at(-1)).toBeLessThan(5_000 * 3);
  },
  pick(240_000, 900_000),
);
