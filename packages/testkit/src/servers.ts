// Private PostgreSQL and NATS servers for fault tests: the test may stop, kill or freeze them
// without disturbing the shared servers other test files use in parallel.
import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { waitForPort } from './stack.ts';

const run = promisify(execFile);

async function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/**
 * A free port below the ephemeral range whose last digit is 5–9: startStack's parts take
 * base+0…base+4 with base a multiple of 10, so no stack can take this port while our server is down.
 */
export async function privatePort(): Promise<number> {
  for (let i = 0; i < 100; i++) {
    const port = 20_005 + Math.floor(Math.random() * 1_000) * 10 + Math.floor(Math.random() * 5);
    if (await portFree(port)) return port;
  }
  throw new Error('no free port for a private server');
}

export interface PrivateNats {
  url: string;
  start(): Promise<void>;
  /** kill -9, and wait for the exit. */
  kill(): Promise<void>;
  /** SIGSTOP / SIGCONT: freeze and thaw it (its connections stay open, nothing answers). */
  signal(sig: NodeJS.Signals): void;
  running(): boolean;
  /** Kills it (if running) and removes its store. */
  remove(): Promise<void>;
}

/**
 * `nats-server -js` on a private port with a store of its own (not started yet); `args` go to
 * the server too (e.g. `--user u --pass p`: `url` then carries no credentials).
 */
export async function privateNats(opts: { args?: string[] } = {}): Promise<PrivateNats> {
  const dir = mkdtempSync(join(tmpdir(), 'mcs-nats-'));
  const port = await privatePort();
  let child: ChildProcess | undefined;
  let log = '';
  const alive = () => child !== undefined && child.exitCode === null && child.signalCode === null;
  const nats: PrivateNats = {
    url: `nats://127.0.0.1:${port}`,
    async start() {
      const binary =
        ['/usr/sbin/nats-server', '/usr/local/bin/nats-server'].find(existsSync) ?? 'nats-server';
      const args = ['-js', '-a', '127.0.0.1', '-p', String(port), '-sd', dir, ...(opts.args ?? [])];
      const c = spawn(binary, args, {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      child = c;
      c.stdout!.on('data', (b: Buffer) => (log = (log + b).slice(-20_000)));
      c.stderr!.on('data', (b: Buffer) => (log = (log + b).slice(-20_000)));
      try {
        await waitForPort(port, 30_000, alive);
      } catch (err) {
        throw new Error(`private nats-server did not start: ${(err as Error).message}\n${log}`);
      }
    },
    async kill() {
      const c = child;
      if (!c || !alive()) return;
      const exited = new Promise<void>((r) => c.once('exit', () => r()));
      c.kill('SIGKILL');
      await exited;
    },
    signal(sig) {
      if (alive()) child!.kill(sig);
    },
    running: alive,
    async remove() {
      nats.signal('SIGCONT');
      await nats.kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return nats;
}

export interface PrivatePostgres {
  /** Server URL (database `postgres`); startStack makes its own database on it. */
  url: string;
  start(): Promise<void>;
  /** `pg_ctl stop -m fast` (sessions end, clean shutdown) or `immediate` (like a crash). */
  stop(mode?: 'fast' | 'immediate'): Promise<void>;
  running(): Promise<boolean>;
  /** Stops it (if running) and removes its data directory. */
  remove(): Promise<void>;
}

/** A PostgreSQL cluster of the Debian binaries, run as the postgres user, trust auth (initialised, not started). */
export async function privatePostgres(): Promise<PrivatePostgres> {
  const bin = ['/usr/lib/postgresql/17/bin', '/usr/lib/postgresql/16/bin', '/usr/lib/postgresql/15/bin'].find(
    (d) => existsSync(`${d}/pg_ctl`),
  );
  if (!bin) throw new Error('no PostgreSQL binaries under /usr/lib/postgresql');
  const dir = mkdtempSync(join(tmpdir(), 'mcs-pg-'));
  const data = join(dir, 'data');
  const port = await privatePort();
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
  chownSync(dir, uid, gid);
  const as = { uid, gid, cwd: dir, env: { PATH: process.env.PATH ?? '', LC_ALL: 'C' } };
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=off`;
  await run(`${bin}/initdb`, ['-D', data, '-U', 'postgres', '-A', 'trust', '-N', '--no-instructions'], as);
  const pg: PrivatePostgres = {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    async start() {
      await run(
        `${bin}/pg_ctl`,
        ['-D', data, '-l', join(dir, 'log'), '-o', options, '-w', '-t', '60', 'start'],
        as,
      );
    },
    async stop(mode = 'fast') {
      await run(`${bin}/pg_ctl`, ['-D', data, '-m', mode, '-w', 'stop'], as);
    },
    running: () =>
      run(`${bin}/pg_ctl`, ['-D', data, 'status'], as).then(
        () => true,
        () => false,
      ),
    async remove() {
      if (await pg.running()) await pg.stop('immediate').catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return pg;
}
