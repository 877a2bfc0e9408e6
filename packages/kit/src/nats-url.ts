// NATS_URL: one server or a cluster's, comma separated, each `nats://host:port` (or `tls://…`
// to require TLS; `host:port` alone is nats://, the port 4222 when left out), with the
// credentials the servers ask for written in the URL as NATS's own tools take them:
// `nats://user:password@host:4222` or `nats://token@host:4222`.
//
// nats.js takes a list of servers but drops anything before the host: a URL's credentials were
// never sent (the server answered "Authorization Violation" and the part waited forever), a
// second server after a comma was read as a port, and an http:// URL was quietly taken for
// NATS. Parsed here, once, for config.ts (a bad value stops every part with one line) and
// nats.ts (the connect options).

export interface NatsServers {
  /** `host:port` of each server, in the order given. */
  servers: string[];
  /** From `user:password@`. */
  user?: string;
  pass?: string;
  /** From `token@` (a user name without a password). */
  token?: string;
  /** Some server was given as tls://: the connection must use TLS. */
  tls: boolean;
}

/** Parses NATS_URL; throws an Error whose message says what is wrong. */
export function parseNatsUrl(value: string): NatsServers {
  const parts = value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (parts.length === 0) throw new Error('names no server');
  const out: NatsServers = { servers: [], tls: false };
  let auth: string | undefined;
  for (const part of parts) {
    let url: URL;
    try {
      url = new URL(part.includes('://') ? part : `nats://${part}`);
    } catch {
      throw new Error(`"${redact(part)}" is not a URL`);
    }
    if (url.protocol !== 'nats:' && url.protocol !== 'tls:') {
      throw new Error(`"${redact(part)}" must be a nats:// or tls:// URL`);
    }
    if (!url.hostname) throw new Error(`"${redact(part)}" names no host`);
    if ((url.pathname !== '' && url.pathname !== '/') || url.search || url.hash) {
      throw new Error(`"${redact(part)}" must be only a host and a port`);
    }
    if (url.protocol === 'tls:') out.tls = true;
    out.servers.push(`${url.hostname}:${url.port || '4222'}`);
    if (url.username || url.password) {
      const user = decodeURIComponent(url.username);
      const pass = decodeURIComponent(url.password);
      const these = `${user}\0${pass}`;
      if (auth !== undefined && auth !== these) {
        throw new Error('gives different credentials for different servers');
      }
      auth = these;
      if (url.password) {
        out.user = user;
        out.pass = pass;
      } else out.token = user;
    }
  }
  return out;
}

/** A URL or a list of them without their credentials, fit for a log line or an error. */
export function redact(url: string): string {
  return url.replace(/(^|\/\/|,\s*)[^@/,]*@/g, '$1');
}

/** nats.js connect options for NATS_URL: its servers, credentials and TLS. */
export function natsConnectOptions(url: string): {
  servers: string[];
  user?: string;
  pass?: string;
  token?: string;
  tls?: Record<string, never>;
} {
  const { servers, user, pass, token, tls } = parseNatsUrl(url);
  return {
    servers,
    ...(user !== undefined ? { user, pass } : {}),
    ...(token !== undefined ? { token } : {}),
    ...(tls ? { tls: {} } : {}),
  };
}
