// Connections whose server vanishes without a word: no FIN, no RST (a host that died, a failover
// behind a stable address, a NAT or conntrack entry dropped). The connections run through a
// network namespace joined to this one by a veth pair; taking the namespace's end of the pair
// down silences them, as such a fault does. The pool's TCP keep-alive (kit/db DB_KEEPALIVE_MS)
// and the NATS client's PINGs (kit/nats NATS_PING_INTERVAL_MS) must notice; without them a query
// waiting for its answer, or the NATS connection the relay and the webhooks consumer use, waits
// forever. Needs root and iproute2 (CI runs as root).
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import type { NatsConnection } from 'nats';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_DATABASE_URL, DEFAULT_NATS_URL } from './config.ts';
import { createDatabase, type Database } from './db.ts';
import { connectNats } from './nats.ts';

const root = process.getuid?.() === 0;

/**
 * A TCP forwarder, run as `node -e FORWARDER listenHost targetHost targetPort`: every connection to
 * it is piped to the target; it prints the port it listens on.
 */
const FORWARDER = `
const net = require('node:net');
const [listenHost, targetHost, targetPort] = process.argv.slice(1);
const server = net.createServer((client) => {
  const upstream = net.connect(Number(targetPort), targetHost);
  client.pipe(upstream).pipe(client);
  for (const [a, b] of [[client, upstream], [upstream, client]]) {
    a.on('error', () => b.destroy());
    a.on('close', () => b.destroy());
  }
});
server.listen(0, listenHost, () => console.log(server.address().port));
`;

const tag = String(process.pid % 100_000);
const ns = `mcs-dead-peer-${tag}`;
const hostIf = `mdp${tag}h`;
const nsIf = `mdp${tag}n`;
const subnet = `10.213.${process.pid % 250}`;
const hostIp = `${subnet}.1`;
const nsIp = `${subnet}.2`;

const ip = (...args: string[]) => execFileSync('ip', args, { stdio: 'pipe' });
const children: ChildProcess[] = [];

/** Starts a forwarder (in `namespace`, if given) and answers the port it listens on. */
async function forward(
  listenHost: string,
  target: string,
  port: number,
  namespace?: string,
): Promise<number> {
  const node = [process.execPath, '-e', FORWARDER, listenHost, target, String(port)];
  const child = namespace
    ? spawn('ip', ['netns', 'exec', namespace, ...node], { stdio: ['ignore', 'pipe', 'inherit'] })
    : spawn(node[0]!, node.slice(1), { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  return new Promise<number>((resolve, reject) => {
    child.stdout!.once('data', (d: Buffer) => resolve(Number(String(d).trim())));
    child.once('exit', (code) => reject(new Error(`a forwarder exited (${code})`)));
  });
}

/** A route through the namespace to `target`: host → namespace's forwarder → host's → target. */
async function throughNamespace(target: URL, defaultPort: number): Promise<{ host: string; port: number }> {
  const hostPort = await forward(hostIp, target.hostname, Number(target.port || defaultPort));
  return { host: nsIp, port: await forward(nsIp, hostIp, hostPort, ns) };
}

/** The namespace's end of the pair goes down: its packets, and the host's to it, are dropped. */
const silence = () => ip('-n', ns, 'link', 'set', nsIf, 'down');
const restore = () => ip('-n', ns, 'link', 'set', nsIf, 'up');

beforeAll(() => {
  if (!root) return;
  ip('netns', 'add', ns);
  ip('link', 'add', hostIf, 'type', 'veth', 'peer', 'name', nsIf);
  ip('link', 'set', nsIf, 'netns', ns);
  ip('addr', 'add', `${hostIp}/30`, 'dev', hostIf);
  ip('link', 'set', hostIf, 'up');
  ip('-n', ns, 'addr', 'add', `${nsIp}/30`, 'dev', nsIf);
  ip('-n', ns, 'link', 'set', 'lo', 'up');
  restore();
});

afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
  if (!root) return;
  try {
    ip('link', 'del', hostIf);
  } catch {}
  try {
    ip('netns', 'del', ns);
  } catch {}
});

describe.skipIf(!root)('a server that goes silent', () => {
  it('fails the query waiting for its answer within seconds, and the pool goes on with a new connection', {
    timeout: 60_000,
  }, async () => {
    const direct = new URL(process.env.DATABASE_URL ?? DEFAULT_DATABASE_URL);
    const route = await throughNamespace(direct, 5432);
    const url = new URL(direct);
    url.hostname = route.host;
    url.port = String(route.port);
    const name = `dead-peer-${tag}`;
    let database: Database | undefined = createDatabase(url.toString(), { name, max: 2, keepAliveMs: 1_000 });
    const admin = new pg.Client({ connectionString: direct.toString() });
    await admin.connect();
    try {
      expect((await database.pool.query('select 1 as one')).rows).toEqual([{ one: 1 }]);
      // The server answers this one in two minutes; its connection is silent until then.
      const waiting = database.pool.query('select pg_sleep(120)').then(
        () => 'answered',
        (err: Error) => err,
      );
      await sleep(300);
      silence();
      const silencedAt = Date.now();
      const outcome = await waiting;
      const failedAfterMs = Date.now() - silencedAt;
      expect(outcome).toBeInstanceOf(Error);
      // 1 s of silence, then ten probes a second apart (libuv), and some slack.
      expect(failedAfterMs).toBeLessThan(20_000);
      restore();
      // The broken connection left the pool; the next query gets a new one (once the link's
      // neighbour entry, failed while it was down, is found again: a moment).
      let rows: unknown[] | undefined;
      for (let tries = 0; !rows; tries++) {
        rows = await database.pool.query('select 2 as two').then(
          (r) => r.rows,
          async (err: Error) => {
            if (tries >= 20) throw err;
            await sleep(250);
            return undefined;
          },
        );
      }
      expect(rows).toEqual([{ two: 2 }]);
    } finally {
      await database?.close().catch(() => {});
      database = undefined;
      await admin.query(
        `select pg_terminate_backend(pid) from pg_stat_activity where application_name = $1`,
        [`mcs-${name}`],
      );
      await admin.end();
    }
  });

  it('makes the NATS connection drop and reconnect instead of waiting for the server forever', {
    timeout: 60_000,
  }, async () => {
    const direct = new URL(process.env.NATS_URL ?? DEFAULT_NATS_URL);
    const route = await throughNamespace(direct, 4222);
    let nc: NatsConnection | undefined;
    try {
      nc = await connectNats(`nats://${route.host}:${route.port}`, `dead-peer-${tag}`, undefined, {
        pingIntervalMs: 1_000,
      });
      const seen: string[] = [];
      const statusSeen = (type: string) =>
        new Promise<void>((resolve) => {
          const poll = setInterval(() => {
            if (seen.includes(type)) {
              clearInterval(poll);
              resolve();
            }
          }, 50);
        });
      void (async () => {
        for await (const s of nc!.status()) seen.push(s.type);
      })();
      await nc.flush();
      silence();
      const silencedAt = Date.now();
      await statusSeen('disconnect');
      // Two PINGs unanswered a second apart, and the third interval: about 3 s.
      expect(Date.now() - silencedAt).toBeLessThan(10_000);
      restore();
      await statusSeen('reconnect');
      await nc.flush();
    } finally {
      await nc?.close().catch(() => {});
    }
  });
});
