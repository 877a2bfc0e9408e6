// A link that can go silent: connections routed through a network namespace joined to this one by
// a veth pair. Taking the namespace's end of the pair down drops every packet both ways, so the
// connections through it stay open with nothing coming back, no FIN and no RST: what a host that
// died, a failover behind a stable address or a dropped NAT entry does to them. (A forwarder in
// this namespace cannot: the kernel would still acknowledge what it is sent, keep-alive probes
// included.) Needs root and iproute2; `canSilenceLinks` says whether this process may.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';

export const canSilenceLinks = process.getuid?.() === 0;

/**
 * A TCP forwarder, run as `node -e FORWARDER listenHost listenPort targetHost targetPort`: every
 * connection to it is piped to the target; it prints the port it listens on, then a line
 * `accepted` for each connection.
 */
const FORWARDER = `
const net = require('node:net');
const [listenHost, listenPort, targetHost, targetPort] = process.argv.slice(1);
const server = net.createServer((client) => {
  console.log('accepted');
  const upstream = net.connect(Number(targetPort), targetHost);
  client.pipe(upstream).pipe(client);
  for (const [a, b] of [[client, upstream], [upstream, client]]) {
    a.on('error', () => b.destroy());
    a.on('close', () => b.destroy());
  }
});
server.listen(Number(listenPort), listenHost, () => console.log(server.address().port));
`;

export interface SilentLink {
  /**
   * A route through the namespace to `host:port`: connect to what it answers instead;
   * `accepted()` counts the connections the namespace's end took (restarts included).
   */
  route(
    host: string,
    port: number,
    listen?: { ip: string; port: number },
  ): Promise<{ host: string; port: number; accepted(): number }>;
  /** The namespace's address on the pair: a host route through it goes `via` this. */
  readonly address: string;
  /**
   * Gives the namespace `ip` too (on its loopback), for a route to listen on: an address that
   * a host route can move from one link to another, as a NAT's new mapping or a failover does.
   */
  addAddress(ip: string): void;
  /** The link goes down: what is sent over it either way is dropped, without a word. */
  silence(): void;
  /** The link is back (its neighbour entry may take a moment to be found again). */
  restore(): void;
  /**
   * The host behind the link reboots: the namespace goes, with every connection's state in it,
   * and comes back with the same addresses, its forwarders on the same ports and the link up.
   * A connection opened before then hears nothing of it until it sends: that is answered with a
   * RST.
   */
  reboot(): Promise<void>;
  /** Removes the namespace, the pair and the forwarders. */
  close(): void;
}

export async function silentLink(): Promise<SilentLink> {
  if (!canSilenceLinks) throw new Error('silentLink needs root (network namespaces)');
  const tag = `${process.pid % 10_000}${Math.floor(Math.random() * 100)}`;
  const ns = `mcs-silent-${tag}`;
  const hostIf = `ms${tag}h`;
  const nsIf = `ms${tag}n`;
  const subnet = `10.${200 + (process.pid % 50)}.${Math.floor(Math.random() * 250)}`;
  const hostIp = `${subnet}.1`;
  const nsIp = `${subnet}.2`;
  const ip = (...args: string[]) => execFileSync('ip', args, { stdio: 'pipe' });
  const outside: ChildProcess[] = [];
  const inside: Array<{ child: ChildProcess; ip: string; port: number; hostPort: number; accepted: number }> =
    [];
  const addresses: string[] = [];

  function forward(
    listenHost: string,
    listenPort: number,
    target: string,
    port: number,
    namespace?: string,
    onAccept: () => void = () => {},
  ): Promise<{ child: ChildProcess; port: number }> {
    const node = [process.execPath, '-e', FORWARDER, listenHost, String(listenPort), target, String(port)];
    const child = namespace
      ? spawn('ip', ['netns', 'exec', namespace, ...node], { stdio: ['ignore', 'pipe', 'inherit'] })
      : spawn(node[0]!, node.slice(1), { stdio: ['ignore', 'pipe', 'inherit'] });
    return new Promise((resolve, reject) => {
      let buffered = '';
      child.stdout!.setEncoding('utf8').on('data', (d: string) => {
        buffered += d;
        for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
          const line = buffered.slice(0, nl);
          buffered = buffered.slice(nl + 1);
          if (line === 'accepted') onAccept();
          else resolve({ child, port: Number(line) });
        }
      });
      child.once('exit', (code) => reject(new Error(`a forwarder exited (${code})`)));
    });
  }

  function setUp(): void {
    ip('netns', 'add', ns);
    try {
      ip('link', 'add', hostIf, 'type', 'veth', 'peer', 'name', nsIf);
      ip('link', 'set', nsIf, 'netns', ns);
      ip('addr', 'add', `${hostIp}/30`, 'dev', hostIf);
      ip('link', 'set', hostIf, 'up');
      ip('-n', ns, 'addr', 'add', `${nsIp}/30`, 'dev', nsIf);
      ip('-n', ns, 'link', 'set', 'lo', 'up');
      ip('-n', ns, 'link', 'set', nsIf, 'up');
    } catch (err) {
      tearDown();
      throw err;
    }
  }
  function tearDown(): void {
    try {
      ip('link', 'del', hostIf);
    } catch {}
    try {
      ip('netns', 'del', ns);
    } catch {}
  }
  async function killInside(): Promise<void> {
    for (const f of inside) {
      if (f.child.exitCode !== null || f.child.signalCode !== null) continue;
      const exited = new Promise((r) => f.child.once('exit', r));
      f.child.kill('SIGKILL');
      await exited;
    }
  }
  setUp();

  return {
    address: nsIp,
    addAddress(extra) {
      addresses.push(extra);
      ip('-n', ns, 'addr', 'add', `${extra}/32`, 'dev', 'lo');
    },
    async route(host, port, listen) {
      // Host → the namespace's forwarder (over the pair) → this namespace's forwarder → target.
      const out = await forward(hostIp, 0, host, port);
      outside.push(out.child);
      const entry = {
        child: undefined as unknown as ChildProcess,
        ip: listen?.ip ?? nsIp,
        port: 0,
        hostPort: out.port,
        accepted: 0,
      };
      const into = await forward(entry.ip, listen?.port ?? 0, hostIp, out.port, ns, () => entry.accepted++);
      entry.child = into.child;
      entry.port = into.port;
      inside.push(entry);
      return { host: entry.ip, port: into.port, accepted: () => entry.accepted };
    },
    silence: () => ip('-n', ns, 'link', 'set', nsIf, 'down'),
    restore: () => ip('-n', ns, 'link', 'set', nsIf, 'up'),
    async reboot() {
      await killInside();
      tearDown();
      setUp();
      for (const f of inside)
        f.child = (await forward(nsIp, f.port, hostIp, f.hostPort, ns, () => f.accepted++)).child;
    },
    close() {
      for (const c of [...outside, ...inside.map((f) => f.child)]) c.kill('SIGKILL');
      tearDown();
    },
  };
}
