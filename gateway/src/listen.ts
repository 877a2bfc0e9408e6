// The gateway's half of `mcs listen` (the design: packages/kit/src/listen.ts, gateway README).
//
//   GET  /v1/webhooks/{id}/listen       a long-lived NDJSON stream: one `ready` line, then one
//                                       `delivery` line per attempt, `ping` every 15 s
//                                       (LISTEN_PING_INTERVAL)
//   POST /v1/webhooks/{id}/listen/ack   {ack, status_code, error, latency_ms, response_excerpt}:
//                                       what the local server answered to that delivery
//
// Both take a secret key of the endpoint's account and mode. While a stream is open this replica
// is subscribed to the endpoint's listen subject; each attempt the webhooks service sends there
// becomes a delivery line with a random `ack` token, and the matching ack answers the attempt's
// NATS request, so the delivery records the local server's status honestly. An ack that reaches
// another replica is passed on over NATS to the one holding the token. A stream that closes
// answers its unanswered attempts as failed at once, so none waits for its time-out.
//
// One stream per endpoint: a second one is refused (`listen_endpoint_in_use`), unless it carries
// the same `Mcs-Listen-Session` token as the open one: that is the same CLI run reconnecting
// after its connection died without a word (a laptop's sleep, a new network), while this side
// still holds the dead one, which may take TCP a quarter of an hour to give up. The open one ends
// and the new one takes over.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Client } from '@connectrpc/connect';
import { apiError } from '@mcs/errors';
import { callerHeaders } from '@mcs/kit/caller';
import { isId } from '@mcs/kit/ids';
import {
  LISTEN_URL,
  type ListenAttempt,
  type ListenFrame,
  type ListenResult,
  listenAckSubject,
  listenPresenceSubject,
  listenSubject,
} from '@mcs/kit/listen';
import type { Logger } from '@mcs/kit/log';
import { webhooks } from '@mcs/proto';
import { render } from '@mcs/rest';
import type { Msg, NatsConnection, Subscription } from 'nats';
import type { Principal } from './auth.ts';
import { nestedDeeperThan, TOO_DEEP } from './json-depth.ts';

export type ListenRoute = { kind: 'stream' | 'ack'; id: string };

export interface Listen {
  /** The listen route of a path, or null; wrong methods answer 405 through `allow`. */
  match(method: string, path: string): (ListenRoute & { allow?: undefined }) | { allow: string } | null;
  handle(
    route: ListenRoute,
    req: IncomingMessage,
    res: ServerResponse,
    who: Principal,
    requestId: string,
  ): Promise<void>;
  /** Ends every stream (shutdown: the server cannot close while they are open). */
  close(): void;
}

interface Pending {
  msg: Msg;
  accountId: string;
  livemode: boolean;
  endpointId: string;
  delivery: string;
  session: Session;
  timer: NodeJS.Timeout;
}

interface Session {
  end(): void;
}

interface AckForward {
  ack: string;
  account_id: string;
  livemode: boolean;
  result: ListenResult;
}

const PATH = /^\/v1\/webhooks\/([^/]+)\/listen(\/ack)?$/;
/** A CLI run's session token (header `mcs-listen-session`): random, base64url. */
const SESSION_TOKEN = /^[A-Za-z0-9_-]{16,128}$/;
const RELEASED = 'released';

/** Whether a presence request carries `token` (compared in constant time). */
function sameToken(data: Uint8Array, token: string): boolean {
  const mine = Buffer.from(token);
  return data.length === mine.length && timingSafeEqual(data, mine);
}
const MAX_ACK_BODY = 128 * 1024;
const EXCERPT_KEEP = 2048;

export function createListen(deps: {
  nc: NatsConnection;
  prefix: string;
  webhooks: Client<typeof webhooks.WebhookEndpointService>;
  log: Logger;
  /** How long an unanswered token is kept (the webhooks service gives up at WEBHOOK_TIMEOUT). */
  tokenTtlMs?: number;
  heartbeatMs?: number;
}): Listen {
  const { nc, prefix, log } = deps;
  const tokenTtlMs = deps.tokenTtlMs ?? 60_000;
  const heartbeatMs = deps.heartbeatMs ?? 15_000;
  const pending = new Map<string, Pending>();
  const sessions = new Set<Session>();
  /** Ack subscriptions by endpoint, shared by this replica's sessions of that endpoint. */
  const ackSubs = new Map<string, { sub: Subscription; sessions: number }>();

  /** Answers the attempt behind `token` if `who` may; returns its delivery id. */
  function answer(
    token: string,
    endpointId: string,
    accountId: string,
    livemode: boolean,
    result: ListenResult,
  ) {
    const p = pending.get(token);
    if (!p || p.endpointId !== endpointId || p.accountId !== accountId || p.livemode !== livemode)
      return null;
    pending.delete(token);
    clearTimeout(p.timer);
    p.msg.respond(JSON.stringify(result));
    return p.delivery;
  }

  function holdAcks(endpointId: string): void {
    const known = ackSubs.get(endpointId);
    if (known) {
      known.sessions++;
      return;
    }
    const sub = nc.subscribe(listenAckSubject(prefix, endpointId), {
      callback: (err, msg) => {
        if (err) return;
        try {
          const f = msg.json<AckForward>();
          const delivery = answer(f.ack, endpointId, f.account_id, f.livemode, f.result);
          // Only the holder answers: with several replicas, the others stay silent.
          if (delivery) msg.respond(JSON.stringify({ delivery }));
        } catch (e) {
          log.warn({ err: (e as Error).message }, 'bad listen ack forward');
        }
      },
    });
    ackSubs.set(endpointId, { sub, sessions: 1 });
  }

  function releaseAcks(endpointId: string): void {
    const known = ackSubs.get(endpointId);
    if (!known) return;
    if (--known.sessions === 0) {
      known.sub.unsubscribe();
      ackSubs.delete(endpointId);
    }
  }

  /**
   * Whether a session of `id` is open on any replica: it answers its presence subject at once.
   * One with the same session `token` ends and answers that it let go.
   */
  async function streamedElsewhere(id: string, token: string): Promise<boolean> {
    try {
      const answer = await nc.request(listenPresenceSubject(prefix, id), token, { timeout: 500 });
      return answer.string() !== RELEASED;
    } catch {
      return false; // no responders (answered at once by the server), or none within the wait
    }
  }

  async function stream(
    id: string,
    req: IncomingMessage,
    res: ServerResponse,
    who: Principal,
    requestId: string,
  ) {
    // Only an endpoint id can name one (and a NUL or other junk never reaches the database).
    if (!isId('we', id))
      throw apiError('resource_missing', { param: 'id', message: `No such webhook endpoint: ${id}.` });
    const headers = callerHeaders({ accountId: who.accountId, livemode: who.livemode }, requestId);
    const endpoint = await deps.webhooks.getWebhookEndpoint({ id }, { headers, timeoutMs: 15_000 });
    if (endpoint.url !== LISTEN_URL) {
      throw apiError('not_a_listen_endpoint', {
        param: 'id',
        message: `${id} delivers to ${endpoint.url}; only endpoints with url "${LISTEN_URL}" can be listened to.`,
      });
    }
    const raw = req.headers['mcs-listen-session'];
    const token = typeof raw === 'string' && SESSION_TOKEN.test(raw) ? raw : '';
    if (await streamedElsewhere(id, token)) {
      throw apiError('listen_endpoint_in_use', {
        param: 'id',
        message: `Another mcs listen session is streaming ${id}; stop it, or listen with another endpoint.`,
      });
    }
    res.writeHead(200, {
      'content-type': 'application/x-ndjson; charset=utf-8',
      'cache-control': 'no-store',
      'x-accel-buffering': 'no', // proxies: pass each line on at once
    });
    const write = (frame: ListenFrame) => {
      if (!res.writableEnded && !res.destroyed) res.write(`${JSON.stringify(frame)}\n`);
    };
    let ended = false;
    const session: Session = { end: () => res.end() };
    sessions.add(session);
    const sub = nc.subscribe(listenSubject(prefix, id), {
      callback: (err, msg) => {
        if (err || ended) return;
        let attempt: ListenAttempt;
        try {
          attempt = msg.json<ListenAttempt>();
        } catch {
          return;
        }
        const ack = randomBytes(16).toString('base64url');
        const timer = setTimeout(() => pending.delete(ack), tokenTtlMs);
        timer.unref();
        pending.set(ack, {
          msg,
          accountId: who.accountId,
          livemode: who.livemode,
          endpointId: id,
          delivery: attempt.delivery,
          session,
          timer,
        });
        write({ type: 'delivery', ack, ...attempt });
      },
    });
    // Tells a session opening on this endpoint, through any replica, that this one holds it.
    const presence = nc.subscribe(listenPresenceSubject(prefix, id), {
      callback: (err, msg) => {
        if (err || ended) return;
        if (token !== '' && sameToken(msg.data, token)) {
          log.info({ endpoint: id, requestId }, 'mcs listen session taken over by its reconnection');
          done();
          res.destroy();
          msg.respond(RELEASED);
          return;
        }
        msg.respond();
      },
    });
    holdAcks(id);
    const heartbeat = setInterval(() => write({ type: 'ping' }), heartbeatMs);
    write({
      type: 'ready',
      endpoint: render(webhooks.WebhookEndpointSchema, endpoint),
      ping_interval_ms: heartbeatMs,
    });
    log.info({ endpoint: id, requestId }, 'mcs listen session started');

    let resolveSession = () => {};
    function done() {
      if (ended) return;
      ended = true;
      clearInterval(heartbeat);
      sub.unsubscribe();
      presence.unsubscribe();
      releaseAcks(id);
      sessions.delete(session);
      for (const [ack, p] of pending) {
        if (p.session !== session) continue;
        pending.delete(ack);
        clearTimeout(p.timer);
        const result: ListenResult = {
          status_code: null,
          error: 'the mcs listen session ended before the local server answered',
          latency_ms: 0,
          response_excerpt: null,
        };
        p.msg.respond(JSON.stringify(result));
      }
      log.info({ endpoint: id, requestId }, 'mcs listen session ended');
      resolveSession();
    }
    await new Promise<void>((resolve) => {
      resolveSession = resolve;
      if (ended) return resolve();
      res.once('close', done);
      req.once('close', () => {
        if (req.destroyed && !res.writableEnded) res.end();
      });
    });
  }

  async function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req) {
      size += (chunk as Buffer).length;
      if (size > MAX_ACK_BODY) throw apiError('body_too_large');
      chunks.push(chunk as Buffer);
    }
    const raw = Buffer.concat(chunks);
    const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
    if (raw.length > 0 && type !== 'application/json') {
      throw apiError('unsupported_media_type', {
        message: 'Acks are JSON sent with "Content-Type: application/json".',
      });
    }
    if (nestedDeeperThan(raw)) throw apiError('invalid_json', { message: TOO_DEEP });
    let json: unknown;
    try {
      json = JSON.parse(raw.toString('utf8') || '{}');
    } catch {
      throw apiError('invalid_json');
    }
    if (json === null || typeof json !== 'object' || Array.isArray(json)) {
      throw apiError('invalid_json', { message: 'The request body must be a JSON object.' });
    }
    return json as Record<string, unknown>;
  }

  function resultOf(body: Record<string, unknown>): ListenResult {
    const bad = (param: string, what: string) =>
      apiError('invalid_type', { param, message: `${param} must be ${what}.` });
    const { status_code, error, latency_ms, response_excerpt } = body;
    if (status_code !== undefined && status_code !== null) {
      if (!Number.isInteger(status_code) || (status_code as number) < 100 || (status_code as number) > 599)
        throw bad('status_code', 'an HTTP status (100–599) or null');
    }
    if (error !== undefined && error !== null && typeof error !== 'string')
      throw bad('error', 'a string or null');
    if (latency_ms !== undefined && (!Number.isInteger(latency_ms) || (latency_ms as number) < 0))
      throw bad('latency_ms', 'a whole number of milliseconds');
    if (response_excerpt !== undefined && response_excerpt !== null && typeof response_excerpt !== 'string')
      throw bad('response_excerpt', 'a string or null');
    return {
      status_code: (status_code as number | null | undefined) ?? null,
      error: typeof error === 'string' ? error.slice(0, 500) : null,
      latency_ms: (latency_ms as number | undefined) ?? 0,
      response_excerpt: typeof response_excerpt === 'string' ? response_excerpt.slice(0, EXCERPT_KEEP) : null,
    };
  }

  async function ack(id: string, req: IncomingMessage, res: ServerResponse, who: Principal) {
    // Only an endpoint id can name one; anything else would also become part of a NATS subject.
    if (!isId('we', id))
      throw apiError('resource_missing', { param: 'id', message: `No such webhook endpoint: ${id}.` });
    const body = await readJson(req);
    const token = body.ack;
    if (token === undefined || token === null || token === '')
      throw apiError('missing_required_field', { param: 'ack', message: 'Missing required parameter: ack.' });
    if (typeof token !== 'string')
      throw apiError('invalid_type', { param: 'ack', message: 'ack must be a string.' });
    const result = resultOf(body);
    let delivery = answer(token, id, who.accountId, who.livemode, result);
    if (!delivery) {
      // Held by another replica, if by anyone.
      const forward: AckForward = { ack: token, account_id: who.accountId, livemode: who.livemode, result };
      try {
        const reply = await nc.request(listenAckSubject(prefix, id), JSON.stringify(forward), {
          timeout: 2_000,
        });
        delivery = reply.json<{ delivery: string }>().delivery;
      } catch {
        delivery = null;
      }
    }
    if (!delivery) {
      throw apiError('resource_missing', {
        param: 'ack',
        message: 'No delivery is waiting for this ack: it was answered already, or its time ran out.',
      });
    }
    const text = JSON.stringify({ object: 'listen_ack', ack: token, delivery });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  }

  return {
    match(method, path) {
      const m = PATH.exec(path);
      if (!m) return null;
      let id: string;
      try {
        id = decodeURIComponent(m[1]!);
      } catch {
        return null;
      }
      const kind = m[2] ? 'ack' : 'stream';
      const wanted = kind === 'ack' ? 'POST' : 'GET';
      if (method !== wanted) return { allow: wanted };
      return { kind, id };
    },
    handle(route, req, res, who, requestId) {
      return route.kind === 'stream'
        ? stream(route.id, req, res, who, requestId)
        : ack(route.id, req, res, who);
    },
    close() {
      for (const s of sessions) s.end();
    },
  };
}
