// The public HTTP face: every /v1 request goes through here. Transport only: authenticate,
// rate-limit, decode REST into the RPC's request message, guard Idempotency-Key, call the
// owning service over Connect, render the answer or the spec's error envelope. No business
// rules, no SQL of another part.
import { isUtf8 } from 'node:buffer';
import { type IncomingMessage, type ServerResponse, STATUS_CODES } from 'node:http';
import { create, type DescMessage, type Message } from '@bufbuild/protobuf';
import { type CallOptions, ConnectError } from '@connectrpc/connect';
import { apiError, type ErrorCode, type RenderedError, renderConnectError, renderError } from '@mcs/errors';
import { CALLER_HEADERS, callerHeaders } from '@mcs/kit/caller';
import type { Logger } from '@mcs/kit/log';
import { observeHttp } from '@mcs/kit/metrics';
import { pooledRandomBytes } from '@mcs/kit/random';
import {
  context,
  endSpan,
  extractContext,
  injectHeaders,
  nodeHeadersGetter,
  SpanKind,
  SpanStatusCode,
  trace,
  tracer,
  tracing,
} from '@mcs/kit/tracing';
import { DecodeError, decodeObject, decodeParams, isListResponse, render, renderList } from '@mcs/rest';
import type { Authenticator } from './auth.ts';
import { ServiceDown } from './circuit.ts';
import { createInFlight, createRecentAnswers, fingerprint, type KeyScope } from './idempotency.ts';
import { nestedDeeperThan, TOO_DEEP } from './json-depth.ts';
import type { Listen } from './listen.ts';
import type { RateLimiter } from './rate-limit.ts';
import type { Match, Route } from './routes.ts';

export const MAX_BODY = 1024 * 1024;

export type UnaryCall = (request: Message, options: CallOptions) => Promise<Message>;

export interface GatewayDeps {
  match: (method: string, path: string) => Match;
  /** The Connect client of the route's service, its unary methods by local name. */
  clientFor: (route: Route) => Record<string, UnaryCall>;
  auth: Authenticator;
  limiter: RateLimiter;
  docsUrl: string;
  log: Logger;
  /** Non-/v1 pages (docs, OpenAPI); returns false when it does not serve the path. */
  pages?: (req: IncomingMessage, res: ServerResponse, path: string) => boolean | { allow: string };
  /** The dashboard (HTML, cookies, form POSTs): serves every path under /dashboard itself. */
  dashboard?: (req: IncomingMessage, res: ServerResponse, path: string) => Promise<void>;
  /** `mcs listen`: the stream of a listen endpoint and its acks (listen.ts). */
  listen?: Listen;
  /** The client's address (TRUSTED_PROXIES): unknown keys are throttled per address (auth.ts). */
  clientAddress?: (req: IncomingMessage) => string;
  /** Fault injection for crash tests: `gateway.after_call` dies after a write's answer came back. */
  failpoint?: string | undefined;
}

class BodyTooLarge extends Error {}

/** Thrown inside the pipeline to answer with a catalog error (and extra headers). */
class Answer extends Error {
  readonly rendered: RenderedError;
  readonly headers: Record<string, string>;
  constructor(rendered: RenderedError, headers: Record<string, string> = {}) {
    super(rendered.body.error.message);
    this.rendered = rendered;
    this.headers = headers;
  }
}

/** A request id: 12 random bytes (from kit's pool: one getrandom call per id showed in the profile). */
function newRequestId(): string {
  return `req_${pooledRandomBytes(12).toString('base64url')}`;
}

function sendBytes(
  res: ServerResponse,
  status: number,
  body: string | Buffer,
  extra: Record<string, string> = {},
): void {
  const bytes = typeof body === 'string' ? Buffer.from(body) : body;
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': bytes.length, ...extra });
  res.end(res.req.method === 'HEAD' ? undefined : bytes);
}

/**
 * A browser's CORS preflight for a path publishable keys may read: any origin may send the key
 * in Authorization (no cookies are involved, so `*` exposes nothing). Secret-key routes get no
 * preflight answer, so browsers never send them.
 */
function preflight(res: ServerResponse, methods: string[]): void {
  res.writeHead(204, {
    allow: [...methods, 'OPTIONS'].join(', '),
    'access-control-allow-origin': '*',
    'access-control-allow-methods': methods.join(', '),
    'access-control-allow-headers': 'Authorization',
    'access-control-max-age': '7200',
  });
  res.end();
}

/**
 * The request's body, up to MAX_BODY. With 'data' and 'end' listeners rather than `for await`:
 * the stream's async iterator allocated 3.7 KB per request, a fourteenth of all the gateway
 * allocated per keyed order.
 */
function readBody(req: IncomingMessage): Promise<Buffer> {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > MAX_BODY) return Promise.reject(new BodyTooLarge());
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (err?: Error) => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
      if (err) reject(err);
      else resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY) {
        // Stop reading; the answer says `Connection: close`.
        req.pause();
        done(new BodyTooLarge());
      } else chunks.push(chunk);
    };
    const onEnd = () => done();
    const onError = (err: Error) => done(err);
    // The client went away before the body ended.
    const onClose = () => done(new Error('the request was aborted before its body ended'));
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}

/**
 * A publishable key reads the catalog: active products. It is public (in a web page's code), so
 * a product the merchant archived is not readable with it: a list asks for active products only
 * (and asking for archived ones is refused), and an archived product is not found.
 */
function catalogOnly(route: Route, request: Message): void {
  if (route.method.input.typeName !== 'mcs.commerce.v1.ListProductsRequest') return;
  const list = request as Message & { active?: boolean };
  if (list.active === false)
    throw new DecodeError('invalid_value', 'active', 'A publishable key lists active products only.');
  list.active = true;
}

function catalogAnswer(answer: Message, id: string | undefined): void {
  if (
    answer.$typeName === 'mcs.commerce.v1.Product' &&
    (answer as Message & { active: boolean }).active === false
  )
    throw apiError('resource_missing', { param: 'id', message: `No such product: ${id ?? ''}.` });
}

/** 403 for a publishable key outside the product catalog, naming the route it tried. */
function publishableRefused(route: string) {
  return apiError('secret_key_required', {
    message: `Publishable keys (pk_) can only read the product catalog (GET /v1/products, GET /v1/products/{id}). Use a secret key (sk_) for ${route}.`,
  });
}

/**
 * Whether a request target's path holds a `.` or `..` segment, plain or percent-encoded (which URL
 * parsing would resolve away). A target without a `.` or `%` (nearly all) is one check.
 */
export function hasDotSegment(target: string): boolean {
  const end = target.indexOf('?');
  const path = end === -1 ? target : target.slice(0, end);
  if (!path.includes('.') && !path.includes('%')) return false;
  return /(?:^|\/)(?:\.|%2e){1,2}(?:\/|$)/i.test(path);
}

/**
 * The path as routes name it: `/v1//products` and `/v1/products/` are `/v1/products` (the
 * router skips empty segments), so a list's `url` and an idempotency key's fingerprint are the
 * same for all three.
 */
export function canonicalPath(path: string): string {
  if (!path.includes('//') && (path.length === 1 || !path.endsWith('/'))) return path;
  const segments = path.split('/').filter(Boolean);
  return `/${segments.join('/')}`;
}

/**
 * The whole answer (head and body, `Connection: close`) to a request Node's HTTP parser refused
 * before any handler saw it, in the error envelope with a Request-Id like every other; null when
 * there is no one to answer (the client reset the connection).
 */
export function clientErrorResponse(err: NodeJS.ErrnoException, docsUrl: string): string | null {
  if (err.code === 'ECONNRESET' || err.code === 'EPIPE') return null;
  const code: ErrorCode =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? 'headers_too_large'
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? 'request_timeout'
        : 'malformed_request';
  const requestId = newRequestId();
  const rendered = renderError(code, docsUrl);
  const body = JSON.stringify(rendered.body);
  return [
    `HTTP/1.1 ${rendered.status} ${STATUS_CODES[rendered.status] ?? ''}`,
    'Content-Type: application/json',
    `Content-Length: ${Buffer.byteLength(body)}`,
    `Request-Id: ${requestId}`,
    'Connection: close',
    '',
    body,
  ].join('\r\n');
}

export function createHandler(deps: GatewayDeps) {
  const { log, docsUrl } = deps;
  const inFlight = createInFlight();
  const recent = createRecentAnswers();
  const fail = (
    code: ErrorCode,
    opts?: { param?: string; message?: string },
    headers?: Record<string, string>,
  ) => new Answer(renderError(code, docsUrl, opts), headers);

  /** Decodes the request message from body, path and query; invalid input throws before anything is stored. */
  async function decode(req: IncomingMessage, route: Route, params: Record<string, string>, url: URL) {
    if (!route.body) {
      const query: Record<string, string> = {};
      for (const [k, v] of url.searchParams) {
        // Given twice, one value would be silently dropped (`?status=pending&status=paid`).
        if (Object.hasOwn(query, k)) {
          throw new DecodeError(
            'invalid_value',
            k,
            `${k.slice(0, 100)} is given more than once; give it once.`,
          );
        }
        query[k] = v;
      }
      return { init: decodeParams(route.method.input, withPath(query, params)), json: {} as unknown };
    }
    // A route with a body takes its parameters there: one in the query would be silently lost.
    const stray = url.search.length > 1 ? url.searchParams.keys().next().value : undefined;
    if (stray !== undefined) {
      throw new DecodeError(
        'unknown_parameter',
        stray,
        `Unknown query parameter: ${stray.slice(0, 100)}. ${route.httpMethod} ${route.path} takes its parameters in the JSON body.`,
      );
    }
    let raw: Buffer;
    try {
      raw = await readBody(req);
    } catch (err) {
      if (err instanceof BodyTooLarge) throw fail('body_too_large', undefined, { connection: 'close' });
      throw err;
    }
    let json: unknown = {};
    if (raw.length > 0) {
      // A body in another format (a form post, text/plain from a bare fetch) is refused by name
      // rather than parsed and reported as bad JSON.
      const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
      if (type !== 'application/json') {
        throw fail('unsupported_media_type', {
          message:
            type === ''
              ? 'The request has a body but no Content-Type. Send JSON with "Content-Type: application/json".'
              : `Request bodies must be JSON sent with "Content-Type: application/json", not ${JSON.stringify(type.slice(0, 100))}.`,
        });
      }
      if (nestedDeeperThan(raw)) throw fail('invalid_json', { message: TOO_DEEP });
      // JSON is exchanged as UTF-8 (RFC 8259 8.1). Decoded leniently, other bytes (Latin-1 sent
      // as is) would be stored as U+FFFD in place of what the client wrote, and answered 200.
      if (!isUtf8(raw)) {
        throw fail('invalid_json', {
          message: 'The request body is not valid UTF-8; send JSON encoded as UTF-8.',
        });
      }
      try {
        // A byte order mark before the JSON is ignored, as RFC 8259 lets a parser do.
        const text = raw.toString('utf8');
        json = JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
      } catch {
        throw fail('invalid_json');
      }
    }
    if (json === null || typeof json !== 'object' || Array.isArray(json)) {
      throw fail('invalid_json', { message: 'The request body must be a JSON object.' });
    }
    return {
      init: decodeObject(route.method.input, withPath(json as Record<string, unknown>, params), '', {
        update: route.update,
      }),
      json,
    };
  }

  /**
   * The request's parameters with the path's: a body or query naming a path parameter must say
   * the same (another id there would be silently ignored).
   */
  function withPath<T>(given: Record<string, T>, params: Record<string, string>): Record<string, T | string> {
    for (const [name, value] of Object.entries(params)) {
      if (Object.hasOwn(given, name) && given[name] !== value) {
        throw new DecodeError(
          'invalid_value',
          name,
          `${name} is taken from the path (${value}); leave it out of the request or give the same value.`,
        );
      }
    }
    return { ...given, ...params };
  }

  /**
   * The caller's key, then its rate limit: every /v1 request passes both before anything else,
   * but for the ack of a listen delivery (`limited` false), which answers a request mcs sent:
   * refused, the local server's answer would be lost, the delivery recorded as timed out and
   * sent again.
   */
  async function admit(req: IncomingMessage, limited = true) {
    const principal = await deps.auth.authenticate(
      req.headers.authorization,
      deps.clientAddress ? deps.clientAddress(req) : (req.socket.remoteAddress ?? 'unknown'),
    );
    if (!limited) return principal;
    // Publishable keys draw on a bucket of their own at the same rate: they are public by design,
    // and whoever copies one from a web page must not be able to throttle the account's server.
    const bucket = principal.secret ? principal.accountId : `${principal.accountId}/publishable`;
    const taken = deps.limiter.take(bucket, principal.rateLimit);
    const rate = taken instanceof Promise ? await taken : taken;
    if (!rate.ok) throw fail('rate_limited', undefined, { 'retry-after': String(rate.retryAfter) });
    return principal;
  }

  const handle = async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const requestId = newRequestId();
    res.setHeader('request-id', requestId);
    const started = performance.now();
    const method = req.method ?? 'GET';
    let path = '/';
    let held: { scope: KeyScope; key: string } | undefined;
    /** The metrics' route label: a template or a group name, never the raw path. */
    let routeLabel = 'unmatched';
    try {
      // Origin-form (`/v1/…`) read under a fixed origin, so a leading `//` stays part of the path
      // rather than naming a host; absolute-form (from a proxy) as it is.
      const target = req.url ?? '/';
      const url = new URL(target.charCodeAt(0) === 47 ? `http://gateway${target}` : target, 'http://gateway');
      // URL parsing resolves dot segments (`/v1/../dashboard`, `/v1/%2e%2e/dashboard`): a path a
      // proxy in front matched by its prefix would reach another part. Such a path names no
      // route of ours as written, so it is not served as the one it resolves to.
      if (hasDotSegment(target)) {
        path = url.pathname;
        throw fail('route_not_found', { message: 'No route for a path with "." or ".." segments.' });
      }
      path = canonicalPath(url.pathname);
      // HTTP/1.1 requires Host (RFC 9112 3.2). The server leaves the check to us (part.ts:
      // requireHostHeader false) so that the refusal is in the envelope, with a Request-Id.
      if (req.headers.host === undefined && req.httpVersionMajor === 1 && req.httpVersionMinor >= 1) {
        throw fail(
          'malformed_request',
          { message: 'An HTTP/1.1 request must carry a Host header.' },
          { connection: 'close' },
        );
      }
      if (deps.dashboard && (path === '/dashboard' || path.startsWith('/dashboard/'))) {
        routeLabel = 'dashboard';
        return await deps.dashboard(req, res, path);
      }
      const page = deps.pages?.(req, res, path);
      if (page === true) {
        routeLabel = 'pages';
        return;
      }
      if (page) {
        throw fail(
          'method_not_allowed',
          { message: `${method} is not allowed on ${path}. Allowed: ${page.allow}.` },
          { allow: page.allow },
        );
      }
      const listen = deps.listen?.match(method, path);
      if (listen) {
        if (listen.allow !== undefined) {
          throw fail(
            'method_not_allowed',
            { message: `${method} is not allowed on ${path}. Allowed: ${listen.allow}.` },
            { allow: listen.allow },
          );
        }
        const who = await admit(req, listen.kind !== 'ack');
        if (!who.secret) {
          const template = `/v1/webhooks/{id}/listen${listen.kind === 'ack' ? '/ack' : ''}`;
          throw publishableRefused(`${method} ${template}`);
        }
        // Neither listen route takes a query parameter: one would be silently ignored.
        const stray = url.search.length > 1 ? url.searchParams.keys().next().value : undefined;
        if (stray !== undefined) {
          throw new DecodeError(
            'unknown_parameter',
            stray,
            `Unknown query parameter: ${stray.slice(0, 100)}. ${method} ${path} takes none.`,
          );
        }
        routeLabel = 'listen';
        return await deps.listen!.handle(listen, req, res, who, requestId);
      }
      const match = deps.match(method, path);
      if (match.kind === 'not_found') throw fail('route_not_found', { message: `No route for ${path}.` });
      if (match.kind === 'method_not_allowed') {
        // A preflight for a method publishable keys may call; any other (a POST, which browsers
        // send unasked once a preflight passes) is refused by the 405 below, which carries no CORS.
        const wants = req.headers['access-control-request-method'];
        if (method === 'OPTIONS' && wants !== undefined && match.browser.includes(wants))
          return preflight(res, match.browser);
        const allow = match.allow.join(', ');
        throw fail(
          'method_not_allowed',
          { message: `${method} is not allowed on ${path}. Allowed: ${allow}.` },
          { allow },
        );
      }
      const { route, params } = match;
      routeLabel = route.path;
      // A storefront's page reads the catalog with its publishable key; its answers, errors
      // included, are readable cross-origin. Keys travel in Authorization, never in cookies.
      // Sent whatever the request's Origin, so a cache between never serves one without them.
      if (route.publishable) {
        res.setHeader('access-control-allow-origin', '*');
        res.setHeader('access-control-expose-headers', 'Request-Id, Retry-After');
      }

      const principal = await admit(req);
      if (!principal.secret && !route.publishable)
        throw publishableRefused(`${route.httpMethod} ${route.path}`);
      if (route.testHelper && principal.livemode) throw apiError('test_mode_only');

      const rawKey = req.headers['idempotency-key'];
      // PATCH is an update's other form (routes.ts): its retry is held to the key as a POST's is.
      const key =
        (method === 'POST' || method === 'PATCH') && typeof rawKey === 'string' ? rawKey : undefined;
      if (key !== undefined && (key.length === 0 || key.length > 255))
        throw apiError('invalid_idempotency_key');
      const { init, json } = await decode(req, route, params, url);
      const request = create(route.method.input, init);
      if (!principal.secret) catalogOnly(route, request);

      const fp = key === undefined ? undefined : fingerprint(method, path, json);
      if (key !== undefined) {
        const scope = { accountId: principal.accountId, livemode: principal.livemode };
        if (!inFlight.take(scope, key)) throw apiError('idempotency_key_in_use');
        held = { scope, key };
        const known = recent.get(scope, key);
        if (known) {
          if (known.fingerprint !== fp) throw apiError('idempotency_key_reused');
          return sendBytes(res, 200, known.body, { 'idempotent-replayed': 'true' });
        }
      }

      const call = deps.clientFor(route)[route.method.localName];
      if (!call) throw new Error(`no client method for ${route.method.name}`);
      const headers = callerHeaders(
        {
          accountId: principal.accountId,
          livemode: principal.livemode,
          idempotency: key === undefined || fp === undefined ? undefined : { key, fingerprint: fp },
        },
        requestId,
      );
      // The owning service stores a keyed answer with the write and replays it (kit/idempotency).
      let replayed = false;
      let keyExpires: number | undefined;
      const options: CallOptions = {
        headers,
        timeoutMs: 30_000,
        onHeader: (h) => {
          replayed = h.get(CALLER_HEADERS.idempotentReplayed) === 'true';
          if (replayed) keyExpires = Number(h.get(CALLER_HEADERS.idempotencyExpires) ?? Number.NaN);
        },
      };
      const answer = tracing.enabled
        ? await tracedCall(call, request, options, route, headers)
        : await call(request, options);
      if (!principal.secret) catalogAnswer(answer, params.id);
      const output: DescMessage = route.method.output;
      const body = JSON.stringify(
        isListResponse(output) ? renderList(output, answer, path) : render(output, answer),
      );
      if (deps.failpoint === 'gateway.after_call' && route.write) process.kill(process.pid, 'SIGKILL');
      const bytes = Buffer.from(body);
      // Kept once the service replayed it: a key retried once is likely retried again (a client's
      // retry loop), while most keys are never retried, and keeping every keyed answer cost each
      // write a copy that outlived the young generation.
      // Never past the key's own expiry: a service without the header gives NaN, i.e. not kept.
      if (replayed && held && fp !== undefined) recent.set(held.scope, held.key, fp, bytes, keyExpires);
      sendBytes(res, 200, bytes, replayed ? { 'idempotent-replayed': 'true' } : undefined);
    } catch (err) {
      let rendered: RenderedError;
      let extra: Record<string, string> = {};
      if (err instanceof Answer) {
        rendered = err.rendered;
        extra = err.headers;
      } else if (err instanceof DecodeError) {
        rendered = renderError(err.code, docsUrl, { param: err.param, message: err.message });
      } else {
        rendered = renderConnectError(err, docsUrl);
        // A service's rate_limit_error says when to come back (e.g. a bulk resend still running).
        if (rendered.status === 429) {
          const after = ConnectError.from(err).metadata.get('retry-after');
          extra = { 'retry-after': after && /^\d+$/.test(after) ? after : '1' };
        }
      }
      if (rendered.body.error.type === 'api_error') {
        // A client that hung up mid-request is not our fault; anything else is.
        // (Not req.destroyed: a request whose body was read is destroyed, its socket is not.)
        if (req.socket.destroyed) log.info({ requestId, method, path }, 'client went away');
        // Refused by the circuit of a service known to be down: logged when it opened and closed.
        else if (err instanceof ServiceDown)
          log.debug({ requestId, method, path, service: err.service }, 'service down');
        // A service down or restarting: one short line per request, not a stack each.
        else if (rendered.code === 'service_unavailable')
          log.warn({ requestId, method, path, err: (err as Error).message }, 'service unavailable');
        else log.error({ err, requestId, method, path }, 'request failed');
        rendered.body.error.message = `${rendered.body.error.message} (Request-Id ${requestId})`;
      }
      if (!res.headersSent) sendBytes(res, rendered.status, JSON.stringify(rendered.body), extra);
      else res.destroy();
    } finally {
      if (held) inFlight.release(held.scope, held.key);
      if (tracing.enabled) {
        const span = trace.getActiveSpan();
        span?.updateName(`${method} ${routeLabel}`);
        span?.setAttribute('http.route', routeLabel);
        span?.setAttribute('mcs.request_id', requestId);
      }
      observeHttp(routeLabel, method, res.statusCode, (performance.now() - started) / 1000);
      // Skip building the record on the hot path unless someone reads it.
      if (log.isLevelEnabled('debug')) {
        log.debug(
          { requestId, method, path, status: res.statusCode, ms: performance.now() - started },
          'request',
        );
      }
    }
  };
  if (!tracing.enabled) return handle;
  // A server span per request, child of the client's `traceparent` when it sent one.
  return (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const parent = extractContext(req.headers, nodeHeadersGetter);
    const span = tracer().startSpan(
      `${req.method ?? 'GET'}`,
      { kind: SpanKind.SERVER, attributes: { 'http.request.method': req.method ?? 'GET' } },
      parent,
    );
    return context.with(trace.setSpan(parent, span), async () => {
      try {
        await handle(req, res);
      } finally {
        span.setAttribute('http.response.status_code', res.statusCode);
        if (res.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
        span.end();
      }
    });
  };
}

/** The Connect call in a client span whose context travels in the call's metadata. */
async function tracedCall(
  call: UnaryCall,
  request: Message,
  options: CallOptions,
  route: Route,
  headers: Record<string, string>,
): Promise<Message> {
  const span = tracer().startSpan(`${route.service.typeName}/${route.method.name}`, {
    kind: SpanKind.CLIENT,
    attributes: {
      'rpc.system': 'connect_rpc',
      'rpc.service': route.service.typeName,
      'rpc.method': route.method.name,
    },
  });
  injectHeaders(headers, trace.setSpan(context.active(), span));
  try {
    const answer = await call(request, options);
    endSpan(span);
    return answer;
  } catch (err) {
    endSpan(span, err);
    throw err;
  }
}
