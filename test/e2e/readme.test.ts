// The first five minutes as a new user lives them: `pnpm start` as the README's "Try it" runs
// it, its ready line, and then the README's second block pasted as one into bash, unchanged
// except for the ports (the test's stack and receiver run on free ones instead of 8080 and 3000).
// The verified delivery must come from the first attempt: a refused first attempt would show
// only at the first retry, 30 s later.
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import {
  createTestDatabase,
  createTestNats,
  freeBasePort,
  REPO_ROOT,
  type TestDatabase,
  type TestNats,
} from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let db: TestDatabase;
let nats: TestNats;
let start: ChildProcess;
let port: number;
let startOutput = '';
const running: ChildProcess[] = [];

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

/** Resolves once `text()` matches, or rejects with what was seen. */
async function waitFor(text: () => string, pattern: RegExp, timeoutMs: number, what: string) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const m = text().match(pattern);
    if (m) return m;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${what} did not appear in ${timeoutMs} ms; output so far:\n${text()}`);
}

/**
 * Stops a detached child and everything in its process group, also when the child itself has
 * already exited: the walkthrough's bash ends after its last command while the receiver it
 * started with `&` lives on in the group (left running, every run leaked one).
 */
async function stopGroup(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM') {
  const done = child.exitCode !== null || child.signalCode !== null;
  const exited = done ? Promise.resolve() : new Promise<void>((r) => child.once('exit', () => r()));
  try {
    process.kill(-child.pid!, signal);
  } catch {
    // ESRCH: the group is empty already.
  }
  await exited;
}

/** The README's "Try it" block that a user pastes into the second terminal. */
function tryItBlock(): string {
  const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
  const from = readme.indexOf('in a second terminal');
  expect(from, 'README.md has the "in a second terminal" step').toBeGreaterThan(0);
  const block = readme.slice(from).match(/```sh\n([\s\S]*?)```/);
  expect(block).not.toBeNull();
  return block![1]!;
}

function startCommandEnv(): Record<string, string> {
  const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
  const m = readme.slice(readme.indexOf('## Try it')).match(/```sh\n(.*)pnpm start\n```/);
  expect(m, 'README.md shows the start command of "Try it"').not.toBeNull();
  return Object.fromEntries(
    m![1]!
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map((kv) => kv.split('=') as [string, string]),
  );
}

beforeAll(async () => {
  db = await createTestDatabase();
  nats = createTestNats();
  port = await freeBasePort();
  const readmeEnv = startCommandEnv();
  expect(readmeEnv).toEqual({ WEBHOOK_ALLOW_HTTP: 'true', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' });
  start = spawn('pnpm', ['start'], {
    cwd: REPO_ROOT,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      ...readmeEnv,
      PORT: String(port),
      DATABASE_URL: db.url,
      NATS_URL: nats.url,
      MCS_NATS_PREFIX: nats.prefix,
      MAIL_DIR: join(REPO_ROOT, '.data', 'test-mail', nats.prefix),
      LOG_LEVEL: 'warn',
    },
  });
  start.stdout!.on('data', (c: Buffer) => (startOutput += c));
  start.stderr!.on('data', (c: Buffer) => (startOutput += c));
  await waitFor(() => startOutput, /mcs is up[\s\S]*Unsafe local settings.*\n/, 120_000, 'the ready line');
});

afterAll(async () => {
  for (const child of running) await stopGroup(child, 'SIGKILL');
  if (start) await stopGroup(start, 'SIGINT');
  await nats?.drop();
  await db?.drop();
});

describe('the first five minutes', () => {
  it("pnpm start's ready line names the docs, the dashboard, the CLI and the unsafe settings that are on", () => {
    const base = `http://127.0.0.1:${port}`;
    const ready = startOutput.slice(startOutput.indexOf('mcs is up'));
    expect(ready).toContain(`mcs is up: ${base}`);
    expect(ready).toContain(`API docs:  ${base}/docs`);
    expect(ready).toContain(`Dashboard: ${base}/dashboard`);
    expect(ready).toContain('CLI:       pnpm mcs --help');
    expect(ready).toMatch(
      /Unsafe local settings ON.*WEBHOOK_ALLOW_HTTP \(.*WEBHOOK_ALLOW_PRIVATE_NETWORKS \(/,
    );
  });

  it("runs the README's Try it block as written, and the first attempt is verified", async () => {
    const receiverPort = await freePort();
    const script = tryItBlock()
      .replaceAll('127.0.0.1:8080', `127.0.0.1:${port}`)
      .replaceAll('127.0.0.1:3000', `127.0.0.1:${receiverPort}`)
      .replace('pnpm receiver 3000', `pnpm receiver ${receiverPort}`);
    expect(script).not.toMatch(/\b(8080|3000)\b/);
    let out = '';
    const started = Date.now();
    // A fresh terminal: the user's PATH, and PORT so the CLI finds the stack (as `pnpm start`'s).
    const bash = spawn('bash', ['-c', script], {
      cwd: REPO_ROOT,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/root', PORT: String(port) },
    });
    running.push(bash);
    bash.stdout!.on('data', (c: Buffer) => (out += c));
    bash.stderr!.on('data', (c: Buffer) => (out += c));
    const [, order] = await waitFor(() => out, /"id":"(ord_[A-Za-z0-9]+)"/, 60_000, 'the order');
    const [line] = await waitFor(
      () => out,
      /verified order\.created evt_\S+: .*\n/,
      20_000,
      'the verified delivery',
    );
    expect(line).toContain(`"id":"${order}"`);
    // A refused first attempt would be retried only 30 s after the order.
    expect(Date.now() - started).toBeLessThan(25_000);
    expect(out).not.toContain('rejected');
  });
});
