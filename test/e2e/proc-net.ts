// Which connections a process holds, read from the kernel (/proc), so a test can tell how two
// parts of a stack talk: over TCP to a port, over a Unix domain socket, or not at all.
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/** TCP states in /proc/net/tcp. */
export const LISTEN = '0A';
export const ESTABLISHED = '01';

/** Every TCP socket of the machine (both address families): ports, state, inode. */
export function tcpSockets(): Array<{ local: number; remote: number; state: string; inode: string }> {
  const out = [];
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(file, 'utf8').split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 10) continue;
      const port = (addr: string) => Number.parseInt(addr.split(':').pop()!, 16);
      out.push({ local: port(f[1]!), remote: port(f[2]!), state: f[3]!, inode: f[9]! });
    }
  }
  return out;
}

/**
 * Every Unix domain stream socket bound to a path: its listener (state 01) and each connection it
 * accepted (state 03, the same path). A client's end has no path.
 */
export function unixSockets(): Array<{ path: string; connected: boolean; inode: string }> {
  const out = [];
  for (const line of readFileSync('/proc/net/unix', 'utf8').split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 8) continue;
    out.push({ path: f[7]!, connected: f[5] === '03', inode: f[6]! });
  }
  return out;
}

/** Inodes of the sockets a process holds open. */
export function socketInodes(pid: number): Set<string> {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]!);
    } catch {} // closed meanwhile
  }
  return inodes;
}

/** Established TCP connections of process `pid` to `port`. */
export function tcpConnectionsTo(pid: number, port: number): number {
  const mine = socketInodes(pid);
  return tcpSockets().filter((s) => s.state === ESTABLISHED && s.remote === port && mine.has(s.inode)).length;
}

/** Connections process `pid` accepted on the Unix domain socket at `path`. */
export function acceptedOn(pid: number, path: string): number {
  const mine = socketInodes(pid);
  return unixSockets().filter((s) => s.path === path && s.connected && mine.has(s.inode)).length;
}
