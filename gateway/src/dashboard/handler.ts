// The dashboard (Settings → API, spec 1 and 3.1): sign-in with a secret API key, the account
// and mode's webhook endpoints with their health, adding one, re-enabling, disabling, deleting,
// rotating a secret, and each endpoint's deliveries. Transport only, like http.ts: every change
// is a call to the webhooks service on behalf of the session's account and mode, through the
// same Connect clients the /v1 API uses; the gateway's own table holds only the sessions.
//
// Every change is an HTML form POST that passes the origin check and the session's CSRF token,
// then answers with a redirect and a one-shot flash message (POST/redirect/GET).
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { type Timestamp, timestampDate } from '@bufbuild/protobuf/wkt';
import { type CallOptions, type Client, Code, ConnectError } from '@connectrpc/connect';
import { renderConnectError } from '@mcs/errors';
import { callerHeaders, type IdempotencyClaim } from '@mcs/kit/caller';
import type { Logger } from '@mcs/kit/log';
import { EVENT_TYPES } from '@mcs/kit/outbox';
import { type accounts, events, webhooks } from '@mcs/proto';
import { enumValueName } from '@mcs/rest';
import type { Authenticator } from '../auth.ts';
import { fingerprint } from '../idempotency.ts';
import { cookie, FLASH_COOKIE, readCookies, SESSION_COOKIE } from './cookies.ts';
import { checkCsrf, csrfTokenFor, sameOrigin } from './csrf.ts';
import { FLASH_MAX_AGE, type Flash, openFlash, sealFlash } from './flash.ts';
import { SESSION_LIFETIME_MS, type Session, type SessionStore } from './sessions.ts';
import {
  BASE,
  type DeliveryStatus,
  type DeliveryView,
  deliveriesPage,
  type EndpointStatus,
  type EndpointView,
  endpointPath,
  loginPage,
  messagePage,
  SETTINGS,
  settingsPage,
  type Viewer,
} from './views.ts';

export interface DashboardDeps {
  sessions: SessionStore;
  auth: Authenticator;
  accounts: Client<typeof accounts.AccountService>;
  webhooks: Client<typeof webhooks.WebhookEndpointService>;
  docsUrl: string;
  log: Logger;
  /**
   * How long a session's key, once seen unrevoked, is trusted before asking the accounts service
   * again. Revocations end sessions at once over NATS; this bounds a missed message.
   */
  keyCheckTtlMs: number;
}

export interface Dashboard {
  /** Serves a path under /dashboard; never throws. */
  handle(req: IncomingMessage, res: ServerResponse, path: string): Promise<void>;
  /** A key was revoked: end its sessions now. Returns how many ended. */
  keyRevoked(keyId: string): Promise<number>;
}

/** Headers of every dashboard answer: no scripts, no framing, no caching of pages with secrets. */
const SECURITY_HEADERS: Record<string, string> = {
  'content-security-policy':
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'same-origin',
  'cache-control': 'no-store',
};

const MAX_FORM = 64 * 1024;
const ID = /^[A-Za-z0-9_]{1,64}$/;
const FORM_IDEMPOTENCY_KEY = /^dash_[A-Za-z0-9_-]{22}$/;
const ENDPOINT_PAGE = 100;
const ENDPOINT_PAGES_MAX = 10;
const DELIVERY_PAGE = 20;
/** Characters of the add form (url + description) a failed attempt fills in again. */
const MAX_REFILL = 1_500;

class FormTooLarge extends Error {}

// Status words exactly as the REST API renders them (the enums' REST names).
const endpointStatus = (s: webhooks.EndpointStatus) =>
  (enumValueName(webhooks.EndpointStatusSchema, s) ?? 'unknown') as EndpointStatus;
const deliveryStatus = (s: webhooks.DeliveryStatus) =>
  (enumValueName(webhooks.DeliveryStatusSchema, s) ?? 'unknown') as DeliveryStatus;

const dateOf = (t: Timestamp | undefined) => (t ? timestampDate(t) : null);

function endpointView(ep: webhooks.WebhookEndpoint): EndpointView {
  return {
    id: ep.id,
    url: ep.url,
    events: ep.events,
    description: ep.description ?? null,
    status: endpointStatus(ep.status),
    disabledReason:
      ep.disabledReason === undefined
        ? null
        : enumValueName(webhooks.DisabledReasonSchema, ep.disabledReason),
    failingSince: dateOf(ep.failingSince),
    lastError: ep.lastError ?? null,
    maxRate: ep.maxRate ?? null,
    createdAt: dateOf(ep.createdAt),
  };
}

function deliveryView(d: webhooks.WebhookDelivery): DeliveryView {
  return {
    id: d.id,
    event: d.event,
    eventType: enumValueName(events.EventTypeSchema, d.eventType),
    status: deliveryStatus(d.status),
    attemptCount: d.attemptCount,
    nextAttemptAt: dateOf(d.nextAttemptAt),
    createdAt: dateOf(d.createdAt),
    attempts: d.attempts.map((a) => ({
      number: a.number,
      at: dateOf(a.at),
      statusCode: a.statusCode ?? null,
      error: a.error ?? null,
      latencyMs: a.latencyMs,
      responseExcerpt: a.responseExcerpt ?? null,
    })),
  };
}

async function readForm(req: IncomingMessage): Promise<URLSearchParams> {
  if (Number(req.headers['content-length'] ?? 0) > MAX_FORM) throw new FormTooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_FORM) throw new FormTooLarge();
    chunks.push(chunk as Buffer);
  }
  const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  // Forms post urlencoded; any other body carries no fields (and so no CSRF token).
  if (type !== 'application/x-www-form-urlencoded') return new URLSearchParams();
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

function send(
  res: ServerResponse,
  status: number,
  body: string,
  headers: Record<string, string | string[]> = {},
) {
  const bytes = Buffer.from(body);
  res.writeHead(status, {
    'content-type': 'text/html; charset=utf-8',
    'content-length': bytes.length,
    ...headers,
  });
  res.end(res.req.method === 'HEAD' ? undefined : bytes);
}

function redirect(res: ServerResponse, to: string, cookies: string[] = []) {
  const headers: Record<string, string | string[]> = { location: to, 'content-length': '0' };
  if (cookies.length) headers['set-cookie'] = cookies;
  res.writeHead(303, headers).end();
}

/** A signed-in request: the session, its token (for CSRF and the flash) and the caller metadata. */
interface SignedIn {
  token: string;
  session: Session;
  requestId: string;
  call: CallOptions;
}

function callOptions(session: Session, requestId: string, idempotency?: IdempotencyClaim): CallOptions {
  const caller = { accountId: session.accountId, livemode: session.livemode, idempotency };
  return { headers: callerHeaders(caller, requestId || undefined), timeoutMs: 30_000 };
}

type Params = Record<string, string>;
type Handler = (req: IncomingMessage, res: ServerResponse, params: Params, url: URL) => Promise<void>;
interface RouteDef {
  method: 'GET' | 'POST';
  pattern: string[];
  handler: Handler;
}

export function createDashboard(deps: DashboardDeps): Dashboard {
  const { log, sessions } = deps;
  /** keyId → until when it counts as not revoked without asking again. */
  const liveKeys = new Map<string, number>();
  /** accountId → its e-mail address, for the header, with the same lifetime. */
  const emails = new Map<string, { email: string; until: number }>();

  function rememberKey(keyId: string) {
    if (liveKeys.size > 100_000) liveKeys.clear();
    liveKeys.set(keyId, Date.now() + deps.keyCheckTtlMs);
  }

  async function keyAlive(s: Session): Promise<boolean> {
    const until = liveKeys.get(s.keyId);
    if (until !== undefined && until > Date.now()) return true;
    const { data } = await deps.accounts.listApiKeys({ accountId: s.accountId }, { timeoutMs: 10_000 });
    const key = data.find((k) => k.id === s.keyId);
    if (key && !key.revokedAt) {
      rememberKey(s.keyId);
      return true;
    }
    liveKeys.delete(s.keyId);
    return false;
  }

  async function emailOf(accountId: string): Promise<string | null> {
    const hit = emails.get(accountId);
    if (hit && hit.until > Date.now()) return hit.email;
    try {
      const account = await deps.accounts.getAccount({ id: accountId }, { timeoutMs: 5_000 });
      if (emails.size > 100_000) emails.clear();
      emails.set(accountId, { email: account.email, until: Date.now() + deps.keyCheckTtlMs });
      return account.email;
    } catch {
      return null; // only decoration: the page works without it
    }
  }

  /** The request's live session, or undefined (none, expired, signed out, key revoked). */
  async function signedIn(req: IncomingMessage, res: ServerResponse): Promise<SignedIn | undefined> {
    const token = readCookies(req).get(SESSION_COOKIE);
    if (!token) return undefined;
    const session = await sessions.find(token);
    if (!session) return undefined;
    if (!(await keyAlive(session))) {
      const ended = await sessions.deleteForKey(session.keyId);
      log.info({ keyId: session.keyId, sessions: ended }, 'dashboard sessions of a revoked key ended');
      return undefined;
    }
    const requestId = String(res.getHeader('request-id') ?? '');
    return { token, session, requestId, call: callOptions(session, requestId) };
  }

  async function viewerOf(s: SignedIn): Promise<Viewer> {
    return {
      accountId: s.session.accountId,
      livemode: s.session.livemode,
      email: await emailOf(s.session.accountId),
      csrf: csrfTokenFor(s.token),
    };
  }

  /** The flash left by the last POST, if any; the cookie is deleted by the page that shows it. */
  function takeFlash(req: IncomingMessage, res: ServerResponse, s: SignedIn): Flash | undefined {
    const sealed = readCookies(req).get(FLASH_COOKIE);
    if (sealed === undefined) return undefined;
    res.setHeader('set-cookie', cookie(req, FLASH_COOKIE, '', 0));
    return openFlash(s.token, sealed);
  }

  /** A readable sentence for a failed call; unexpected failures are logged, never shown. */
  function explain(err: unknown, requestId: string, what: string): string {
    const rendered = renderConnectError(err, deps.docsUrl);
    const { type, message } = rendered.body.error;
    if (type === 'api_error') {
      log.error({ err, requestId, what }, 'dashboard call failed');
      return `${what}: ${message} (Request-Id ${requestId})`;
    }
    return `${what}: ${message}`;
  }

  // Pages -----------------------------------------------------------------------------------

  /** GET pages that need a session: without one, go sign in. */
  function page(
    render: (
      req: IncomingMessage,
      res: ServerResponse,
      s: SignedIn,
      params: Params,
      url: URL,
    ) => Promise<void>,
  ): Handler {
    return async (req, res, params, url) => {
      const s = await signedIn(req, res);
      if (!s) {
        // A cookie of an ended session is of no more use: drop it.
        const stale = readCookies(req).has(SESSION_COOKIE) ? [cookie(req, SESSION_COOKIE, '', 0)] : [];
        return redirect(res, `${BASE}/login`, stale);
      }
      await render(req, res, s, params, url);
    };
  }

  async function listEndpoints(s: SignedIn): Promise<EndpointView[]> {
    const out: EndpointView[] = [];
    let startingAfter = '';
    for (let i = 0; i < ENDPOINT_PAGES_MAX; i++) {
      const page = await deps.webhooks.listWebhookEndpoints({ limit: ENDPOINT_PAGE, startingAfter }, s.call);
      out.push(...page.data.map(endpointView));
      if (!page.hasMore || page.data.length === 0) break;
      startingAfter = page.data.at(-1)!.id;
    }
    return out;
  }

  const settings = page(async (req, res, s) => {
    const flash = takeFlash(req, res, s);
    const viewer = await viewerOf(s);
    let endpoints: EndpointView[] = [];
    let loadError: string | undefined;
    let status = 200;
    try {
      endpoints = await listEndpoints(s);
    } catch (err) {
      loadError = explain(err, s.requestId, 'The webhook endpoints could not be loaded');
      status = 503;
    }
    const idempotencyKey = `dash_${randomBytes(16).toString('base64url')}`;
    send(
      res,
      status,
      settingsPage({ viewer, endpoints, eventTypes: EVENT_TYPES, flash, loadError, idempotencyKey }),
    );
  });

  const deliveries = page(async (req, res, s, params, url) => {
    const flash = takeFlash(req, res, s);
    const viewer = await viewerOf(s);
    const startingAfter = url.searchParams.get('starting_after') ?? '';
    try {
      const [endpoint, list] = await Promise.all([
        deps.webhooks.getWebhookEndpoint({ id: params.id! }, s.call),
        deps.webhooks.listWebhookDeliveries(
          {
            id: params.id!,
            limit: DELIVERY_PAGE,
            startingAfter: ID.test(startingAfter) ? startingAfter : '',
          },
          s.call,
        ),
      ]);
      const last = list.data.at(-1);
      const older =
        list.hasMore && last
          ? `${endpointPath(endpoint.id)}/deliveries?starting_after=${encodeURIComponent(last.id)}`
          : undefined;
      send(
        res,
        200,
        deliveriesPage({
          viewer,
          endpoint: endpointView(endpoint),
          deliveries: list.data.map(deliveryView),
          older,
          flash,
        }),
      );
    } catch (err) {
      const rendered = renderConnectError(err, deps.docsUrl);
      if (rendered.status === 404) {
        return send(res, 404, messagePage('Not found', 'This account has no such webhook endpoint.', viewer));
      }
      send(
        res,
        rendered.status >= 500 ? 503 : rendered.status,
        messagePage(
          'Deliveries unavailable',
          explain(err, s.requestId, 'The deliveries could not be loaded'),
          viewer,
        ),
      );
    }
  });

  // Sign-in and sign-out ---------------------------------------------------------------------

  const loginForm: Handler = async (req, res, _params, url) => {
    if (await signedIn(req, res)) return redirect(res, SETTINGS);
    const notice = url.searchParams.has('signed_out') ? 'You have signed out.' : undefined;
    send(res, 200, loginPage(notice ? { notice } : {}));
  };

  const login: Handler = async (req, res) => {
    const form = await readForm(req);
    const key = (form.get('key') ?? '').trim();
    const refuse = (status: number, error: string) => send(res, status, loginPage({ error }));
    const publishable =
      'Publishable keys (pk_…) are read-only and cannot sign in. Use a secret key (sk_test_… or sk_live_…).';
    if (!key) return refuse(400, 'Enter a secret API key.');
    if (key.startsWith('pk_')) return refuse(403, publishable);
    if (!key.startsWith('sk_')) {
      return refuse(401, 'That is not a secret API key: secret keys start with sk_test_ or sk_live_.');
    }
    let principal: Awaited<ReturnType<Authenticator['authenticate']>>;
    try {
      principal = await deps.auth.authenticate(`Bearer ${key}`);
    } catch (err) {
      const rendered = renderConnectError(err, deps.docsUrl);
      if (rendered.body.error.type === 'authentication_error') {
        return refuse(401, 'This key is not valid: it is unknown, mistyped or revoked.');
      }
      return refuse(
        503,
        explain(err, String(res.getHeader('request-id') ?? ''), 'The key could not be checked right now'),
      );
    }
    if (!principal.secret) return refuse(403, publishable);
    // A new session on every sign-in (no fixation); a previous one of this browser ends.
    const previous = readCookies(req).get(SESSION_COOKIE);
    if (previous) await sessions.delete(previous);
    const { token } = await sessions.create({
      accountId: principal.accountId,
      livemode: principal.livemode,
      keyId: principal.keyId,
    });
    rememberKey(principal.keyId);
    log.info({ accountId: principal.accountId, livemode: principal.livemode }, 'dashboard sign-in');
    redirect(res, SETTINGS, [
      cookie(req, SESSION_COOKIE, token, SESSION_LIFETIME_MS / 1000),
      cookie(req, FLASH_COOKIE, '', 0),
    ]);
  };

  // Actions ----------------------------------------------------------------------------------

  /**
   * A form POST that changes something: origin checked by the caller, then session (else sign
   * in), CSRF token (else 403), the call, and a redirect carrying the outcome as a flash.
   */
  function action(
    run: (s: SignedIn, form: URLSearchParams, params: Params) => Promise<{ flash: Flash; to?: string }>,
    what: string,
    back: (params: Params) => string = () => SETTINGS,
  ): Handler {
    return async (req, res, params) => {
      const form = await readForm(req);
      const s = await signedIn(req, res);
      if (!s) return redirect(res, `${BASE}/login`);
      if (!checkCsrf(s.token, form.get('csrf'))) return forbidden(res);
      let outcome: { flash: Flash; to?: string };
      try {
        outcome = await run(s, form, params);
      } catch (err) {
        outcome = { flash: { kind: 'error', text: explain(err, s.requestId, what) } };
      }
      redirect(res, outcome.to ?? back(params), [
        cookie(req, FLASH_COOKIE, sealFlash(s.token, outcome.flash), FLASH_MAX_AGE),
      ]);
    };
  }

  const logout: Handler = async (req, res) => {
    const form = await readForm(req);
    const token = readCookies(req).get(SESSION_COOKIE);
    if (token && (await sessions.find(token))) {
      if (!checkCsrf(token, form.get('csrf'))) return forbidden(res);
      await sessions.delete(token);
    }
    redirect(res, `${BASE}/login?signed_out=1`, [
      cookie(req, SESSION_COOKIE, '', 0),
      cookie(req, FLASH_COOKIE, '', 0),
    ]);
  };

  const createEndpoint = action(async (s, form) => {
    const url = (form.get('url') ?? '').trim();
    const chosen = form.getAll('events');
    const description = (form.get('description') ?? '').trim();
    const key = form.get('idempotency_key') ?? '';
    const input = { url, events: chosen, ...(description ? { description } : {}) };
    // The form's own idempotency key: a double submit adds one endpoint, not two.
    const idempotency = FORM_IDEMPOTENCY_KEY.test(key)
      ? { key, fingerprint: fingerprint('POST', '/dashboard/endpoints', input) }
      : undefined;
    try {
      const ep = await deps.webhooks.createWebhookEndpoint(
        input,
        callOptions(s.session, s.requestId, idempotency),
      );
      return {
        flash: {
          kind: 'ok',
          text: `Endpoint ${ep.url} added.`,
          ...(ep.secret ? { secret: { endpoint: ep.id, value: ep.secret } } : {}),
        },
      };
    } catch (err) {
      return {
        flash: {
          kind: 'error',
          text: explain(err, s.requestId, 'The endpoint was not added'),
          // Browsers drop cookies over 4 KiB: a huge form is not filled again.
          ...(url.length + description.length <= MAX_REFILL
            ? { form: { url, events: chosen.slice(0, 20), description } }
            : {}),
        },
      };
    }
  }, 'The endpoint was not added');

  const enable = action(async (s, _form, { id }) => {
    const ep = await deps.webhooks.enableWebhookEndpoint({ id: id! }, s.call);
    return { flash: { kind: 'ok', text: `Endpoint ${ep.url} re-enabled: new events are sent to it again.` } };
  }, 'The endpoint was not re-enabled');

  const disable = action(async (s, _form, { id }) => {
    const ep = await deps.webhooks.updateWebhookEndpoint({ id: id!, disabled: true }, s.call);
    return { flash: { kind: 'ok', text: `Endpoint ${ep.url} disabled.` } };
  }, 'The endpoint was not disabled');

  const remove = action(async (s, _form, { id }) => {
    const gone = await deps.webhooks.deleteWebhookEndpoint({ id: id! }, s.call);
    return { flash: { kind: 'ok', text: `Endpoint ${gone.id} deleted.` } };
  }, 'The endpoint was not deleted');

  const rotate = action(async (s, _form, { id }) => {
    const ep = await deps.webhooks.rotateWebhookEndpointSecret({ id: id! }, s.call);
    return {
      flash: {
        kind: 'ok',
        text: `New signing secret for ${ep.url}: the old one no longer signs.`,
        ...(ep.secret ? { secret: { endpoint: ep.id, value: ep.secret } } : {}),
      },
    };
  }, 'The secret was not rotated');

  const resend = action(
    async (s, _form, { id, delivery }) => {
      const d = await deps.webhooks.retryWebhookDelivery({ id: id!, delivery: delivery! }, s.call);
      return { flash: { kind: 'ok', text: `Delivery ${d.id} is being sent again.` } };
    },
    'The delivery was not resent',
    ({ id }) => `${endpointPath(id!)}/deliveries`,
  );

  function forbidden(res: ServerResponse) {
    send(
      res,
      403,
      messagePage(
        'Request refused',
        'This form was not sent from this dashboard, or it has expired. Reload the page and try again.',
      ),
    );
  }

  // Routing ----------------------------------------------------------------------------------

  const routes: RouteDef[] = [
    { method: 'GET', pattern: [], handler: async (_q, res) => redirect(res, SETTINGS) },
    { method: 'GET', pattern: ['settings'], handler: async (_q, res) => redirect(res, SETTINGS) },
    { method: 'GET', pattern: ['login'], handler: loginForm },
    { method: 'POST', pattern: ['login'], handler: login },
    { method: 'POST', pattern: ['logout'], handler: logout },
    { method: 'GET', pattern: ['settings', 'api'], handler: settings },
    { method: 'POST', pattern: ['settings', 'api', 'webhooks'], handler: createEndpoint },
    { method: 'POST', pattern: ['settings', 'api', 'webhooks', ':id', 'enable'], handler: enable },
    { method: 'POST', pattern: ['settings', 'api', 'webhooks', ':id', 'disable'], handler: disable },
    { method: 'POST', pattern: ['settings', 'api', 'webhooks', ':id', 'delete'], handler: remove },
    { method: 'POST', pattern: ['settings', 'api', 'webhooks', ':id', 'rotate_secret'], handler: rotate },
    { method: 'GET', pattern: ['settings', 'api', 'webhooks', ':id', 'deliveries'], handler: deliveries },
    {
      method: 'POST',
      pattern: ['settings', 'api', 'webhooks', ':id', 'deliveries', ':delivery', 'retry'],
      handler: resend,
    },
  ];

  function match(segments: string[]): Array<{ route: RouteDef; params: Params }> {
    const found: Array<{ route: RouteDef; params: Params }> = [];
    for (const route of routes) {
      if (route.pattern.length !== segments.length) continue;
      const params: Params = {};
      const ok = route.pattern.every((p, i) => {
        const seg = segments[i]!;
        if (p.startsWith(':')) {
          params[p.slice(1)] = seg;
          return ID.test(seg);
        }
        return p === seg;
      });
      if (ok) found.push({ route, params });
    }
    return found;
  }

  async function handle(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    for (const [k, v] of Object.entries(SECURITY_HEADERS)) res.setHeader(k, v);
    try {
      const url = new URL(req.url ?? '/', 'http://gateway');
      const method = req.method === 'HEAD' ? 'GET' : (req.method ?? 'GET');
      const segments = path.split('/').filter(Boolean).slice(1);
      const candidates = match(segments);
      const hit = candidates.find((c) => c.route.method === method);
      if (!hit) {
        if (candidates.length === 0)
          return send(res, 404, messagePage('Not found', 'There is no such page.'));
        const allow = [...new Set(candidates.map((c) => c.route.method))].join(', ');
        return send(res, 405, messagePage('Not allowed', `Use ${allow} here.`), { allow });
      }
      if (method === 'POST' && !sameOrigin(req)) return forbidden(res);
      await hit.route.handler(req, res, hit.params, url);
    } catch (err) {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      if (err instanceof FormTooLarge) {
        return send(res, 413, messagePage('Too large', 'The form is too large.'), { connection: 'close' });
      }
      const requestId = String(res.getHeader('request-id') ?? '');
      const unavailable =
        err instanceof ConnectError && (err.code === Code.Unavailable || err.code === Code.DeadlineExceeded);
      log.error({ err, requestId, path }, 'dashboard request failed');
      send(
        res,
        unavailable ? 503 : 500,
        messagePage(
          unavailable ? 'Temporarily unavailable' : 'Something went wrong',
          `${unavailable ? 'A service is not reachable right now; try again shortly.' : 'The request failed.'} (Request-Id ${requestId})`,
        ),
      );
    }
  }

  return {
    handle,
    async keyRevoked(keyId) {
      liveKeys.delete(keyId);
      return sessions.deleteForKey(keyId);
    },
  };
}
