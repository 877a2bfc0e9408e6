// What every dashboard page shares: its dependencies, the signed-in request, reading forms,
// answering, and the two kinds of handler — `page` (GET, needs a session) and `action` (a form
// POST: session, CSRF token, the call, then a redirect with a flash: POST/redirect/GET).
// Each page module (login.ts, endpoints.ts, keys.ts, events.ts) exports its routes built on these.
import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { CallOptions, Client } from '@connectrpc/connect';
import { renderConnectError } from '@mcs/errors';
import { callerHeaders, type IdempotencyClaim } from '@mcs/kit/caller';
import type { Logger } from '@mcs/kit/log';
import type { accounts, webhooks } from '@mcs/proto';
import type { Authenticator } from '../auth.ts';
import type { ClientAddress } from '../client-address.ts';
import { cookie, FLASH_COOKIE, readCookies, SESSION_COOKIE } from './cookies.ts';
import { checkCsrf, csrfTokenFor } from './csrf.ts';
import { FLASH_MAX_AGE, type Flash, openFlash, sealFlash } from './flash.ts';
import type { Session, SessionStore } from './sessions.ts';
import { BASE, COPY_SCRIPT, messagePage, SETTINGS, type Viewer } from './views.ts';

export interface DashboardDeps {
  sessions: SessionStore;
  auth: Authenticator;
  accounts: Client<typeof accounts.AccountService>;
  webhooks: Client<typeof webhooks.WebhookEndpointService>;
  events: Client<typeof webhooks.EventService>;
  settings: Client<typeof webhooks.WebhookSettingsService>;
  docsUrl: string;
  log: Logger;
  /**
   * How long a session's key, once seen unrevoked, and an owner's password stamp are trusted
   * before asking the accounts service again. Revocations and new passwords end sessions at once
   * over NATS; this bounds a missed message.
   */
  keyCheckTtlMs: number;
  /** The client behind a request, for the sign-in throttle per address (client-address.ts). */
  clientAddress?: ClientAddress;
}

/** Headers of every dashboard answer: one known script, no framing, no caching of pages with secrets. */
export const SECURITY_HEADERS: Record<string, string> = {
  'content-security-policy': `default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-${createHash(
    'sha256',
  )
    .update(COPY_SCRIPT)
    .digest('base64')}'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`,
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'same-origin',
  'cache-control': 'no-store',
};

const MAX_FORM = 64 * 1024;
export const ID = /^[A-Za-z0-9_]{1,64}$/;

export class FormTooLarge extends Error {}

export async function readForm(req: IncomingMessage): Promise<URLSearchParams> {
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

export function send(
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

export function redirect(res: ServerResponse, to: string, cookies: string[] = []) {
  const headers: Record<string, string | string[]> = { location: to, 'content-length': '0' };
  if (cookies.length) headers['set-cookie'] = cookies;
  res.writeHead(303, headers).end();
}

/** A signed-in request: the session, its token (for CSRF and the flash) and the caller metadata. */
export interface SignedIn {
  token: string;
  session: Session;
  requestId: string;
  call: CallOptions;
}

export function callOptions(
  session: Session,
  requestId: string,
  idempotency?: IdempotencyClaim,
): CallOptions {
  const caller = { accountId: session.accountId, livemode: session.livemode, idempotency };
  return { headers: callerHeaders(caller, requestId || undefined), timeoutMs: 30_000 };
}

export type Params = Record<string, string>;
export type Handler = (req: IncomingMessage, res: ServerResponse, params: Params, url: URL) => Promise<void>;
export interface RouteDef {
  method: 'GET' | 'POST';
  pattern: string[];
  handler: Handler;
}

export interface Outcome {
  flash: Flash;
  to?: string;
}

export interface Kit {
  deps: DashboardDeps;
  /** The request's live session, or undefined (none, expired, signed out, key revoked). */
  signedIn(req: IncomingMessage, res: ServerResponse): Promise<SignedIn | undefined>;
  viewerOf(s: SignedIn, path: string): Promise<Viewer>;
  /** The flash left by the last POST, if any; the cookie is deleted by the page that shows it. */
  takeFlash(req: IncomingMessage, res: ServerResponse, s: SignedIn): Flash | undefined;
  /** A readable sentence for a failed call; unexpected failures are logged, never shown. */
  explain(err: unknown, requestId: string, what: string): string;
  /** A GET page that needs a session: without one, go sign in. */
  page(
    render: (
      req: IncomingMessage,
      res: ServerResponse,
      s: SignedIn,
      params: Params,
      url: URL,
    ) => Promise<void>,
  ): Handler;
  /**
   * A form POST that changes something: origin checked by the router, then session (else sign
   * in), CSRF token (else 403), the call, and a redirect carrying the outcome as a flash.
   */
  action(
    run: (s: SignedIn, form: URLSearchParams, params: Params) => Promise<Outcome>,
    what: string,
    back?: (params: Params, form: URLSearchParams) => string,
  ): Handler;
  forbidden(res: ServerResponse): void;
  /** A key just seen valid: trusted for keyCheckTtlMs. */
  rememberKey(keyId: string): void;
  forgetKey(keyId: string): void;
  /** An owner's password was set again: its stamp now (asked for), or undefined if unknown. */
  refreshStamp(accountId: string): Promise<string | undefined>;
}

export function createKit(deps: DashboardDeps): Kit {
  const { log, sessions } = deps;
  /** keyId → until when it counts as not revoked without asking again. */
  const liveKeys = new Map<string, number>();
  /** accountId → its e-mail address, for the header, with the same lifetime. */
  const emails = new Map<string, { email: string; until: number }>();

  function rememberKey(keyId: string) {
    if (liveKeys.size > 100_000) liveKeys.clear();
    liveKeys.set(keyId, Date.now() + deps.keyCheckTtlMs);
  }

  /** accountId → the owner's password stamp as last asked, and until when it is trusted. */
  const stamps = new Map<string, { stamp: string; until: number }>();

  /** The account's password stamp: remembered, or (`fresh`, or none remembered) asked for. */
  async function currentStamp(accountId: string, fresh = false): Promise<string> {
    const hit = stamps.get(accountId);
    if (!fresh && hit && hit.until > Date.now()) return hit.stamp;
    const { stamp } = await deps.accounts.getOwnerPasswordStamp({ id: accountId }, { timeoutMs: 10_000 });
    if (stamps.size > 100_000) stamps.clear();
    stamps.set(accountId, { stamp, until: Date.now() + deps.keyCheckTtlMs });
    return stamp;
  }

  /**
   * Whether what signed the session in still holds: its key is not revoked, or the owner's
   * password is the one signed in with. Both end sessions at once over NATS; this catches a
   * missed message (and a sign-in that raced a new password) within keyCheckTtlMs.
   */
  async function signerHolds(s: Session): Promise<boolean> {
    if (s.keyId === null) {
      if (s.passwordStamp === null) return false;
      if ((await currentStamp(s.accountId)) === s.passwordStamp) return true;
      // The remembered stamp may be the older one (this session is from a newer sign-in).
      return (await currentStamp(s.accountId, true)) === s.passwordStamp;
    }
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

  async function signedIn(req: IncomingMessage, res: ServerResponse): Promise<SignedIn | undefined> {
    const token = readCookies(req).get(SESSION_COOKIE);
    if (!token) return undefined;
    const session = await sessions.find(token);
    if (!session) return undefined;
    if (!(await signerHolds(session))) {
      if (session.keyId) {
        const ended = await sessions.deleteForKey(session.keyId);
        log.info({ keyId: session.keyId, sessions: ended }, 'dashboard sessions of a revoked key ended');
      } else {
        const current = stamps.get(session.accountId)?.stamp;
        const ended = await sessions.deleteForOwner(session.accountId, current);
        log.info(
          { accountId: session.accountId, sessions: ended },
          "dashboard sessions of an owner's replaced password ended",
        );
      }
      return undefined;
    }
    const requestId = String(res.getHeader('request-id') ?? '');
    return { token, session, requestId, call: callOptions(session, requestId) };
  }

  function explain(err: unknown, requestId: string, what: string): string {
    const rendered = renderConnectError(err, deps.docsUrl);
    const { type, message } = rendered.body.error;
    if (type === 'api_error') {
      log.error({ err, requestId, what }, 'dashboard call failed');
      return `${what}: ${message} (Request-Id ${requestId})`;
    }
    return `${what}: ${message}`;
  }

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

  return {
    deps,
    signedIn,
    rememberKey,
    forgetKey: (keyId) => liveKeys.delete(keyId),
    async refreshStamp(accountId) {
      stamps.delete(accountId);
      try {
        return await currentStamp(accountId, true);
      } catch (err) {
        log.warn({ err, accountId }, "the owner's password stamp could not be asked for");
        return undefined;
      }
    },
    explain,
    forbidden,
    async viewerOf(s, path) {
      return {
        accountId: s.session.accountId,
        livemode: s.session.livemode,
        email: await emailOf(s.session.accountId),
        csrf: csrfTokenFor(s.token),
        owner: s.session.keyId === null,
        path,
      };
    },
    takeFlash(req, res, s) {
      const sealed = readCookies(req).get(FLASH_COOKIE);
      if (sealed === undefined) return undefined;
      res.setHeader('set-cookie', cookie(req, FLASH_COOKIE, '', 0));
      return openFlash(s.token, sealed);
    },
    page(render) {
      return async (req, res, params, url) => {
        const s = await signedIn(req, res);
        if (!s) {
          // A cookie of an ended session is of no more use: drop it.
          const stale = readCookies(req).has(SESSION_COOKIE) ? [cookie(req, SESSION_COOKIE, '', 0)] : [];
          return redirect(res, `${BASE}/login`, stale);
        }
        await render(req, res, s, params, url);
      };
    },
    action(run, what, back = () => SETTINGS) {
      return async (req, res, params) => {
        const form = await readForm(req);
        const s = await signedIn(req, res);
        if (!s) return redirect(res, `${BASE}/login`);
        if (!checkCsrf(s.token, form.get('csrf'))) return forbidden(res);
        let outcome: Outcome;
        try {
          outcome = await run(s, form, params);
        } catch (err) {
          outcome = { flash: { kind: 'error', text: explain(err, s.requestId, what) } };
        }
        redirect(res, outcome.to ?? back(params, form), [
          cookie(req, FLASH_COOKIE, sealFlash(s.token, outcome.flash), FLASH_MAX_AGE),
        ]);
      };
    },
  };
}

/** A same-site path to go back to after a POST (never another origin). */
export function localPath(given: string | null, fallback: string): string {
  return given && /^\/dashboard(\/[A-Za-z0-9_/-]*)?(\?[A-Za-z0-9_.=&%-]*)?$/.test(given) ? given : fallback;
}
