// Signing in and out, and the test/live switch. Owners sign in with e-mail and password (checked
// by the accounts service, which also throttles each e-mail address); anyone with a secret API key can
// sign in with it, for automation, to that key's mode. Failed sign-ins are also throttled per
// client address here, so one address cannot try many accounts.
import type { IncomingMessage } from 'node:http';
import { isIPv6 } from 'node:net';
import { renderConnectError } from '@mcs/errors';
import type { Authenticator } from '../auth.ts';
import { type Kit, localPath, type RouteDef, readForm, redirect, send } from './context.ts';
import { cookie, FLASH_COOKIE, readCookies, SESSION_COOKIE } from './cookies.ts';
import { checkCsrf } from './csrf.ts';
import { SESSION_LIFETIME_MS, type SignedIn } from './sessions.ts';
import { BASE, html, layout, SETTINGS } from './views.ts';

/** Failed sign-ins one address may make per window before it must wait for the window's end. */
export const ADDRESS_FAILURES = 20;
const WINDOW_MS = 15 * 60_000;

/**
 * Failed sign-ins per client address, in fixed windows (per gateway replica). An attempt is
 * counted when it starts, before its credentials are checked (which takes a while: scrypt, a
 * call), and given back when it did not fail: counted only at its end, a burst of parallel
 * attempts would each find the address below its limit and all be checked.
 */
export function createAddressThrottle(now: () => number = Date.now, maxTracked = 100_000) {
  // In the order the windows opened (a renewed one is inserted again), which is the order they end.
  const failures = new Map<string, { count: number; until: number }>();
  /**
   * Room for one more window: ended ones go, then, while still full, the oldest (the nearest to
   * ending). Never all at once: a flood of new addresses would otherwise wipe every address's
   * count. Each entry is dropped once, so this costs O(1) per window opened.
   */
  function makeRoom(t: number) {
    for (const [k, f] of failures) {
      if (f.until > t && failures.size < maxTracked) return;
      failures.delete(k);
    }
  }
  return {
    /** Counts an attempt from `address`; or, over its limit, the seconds to wait (not counted). */
    take(address: string): number {
      const unit = throttleUnit(address);
      const t = now();
      const f = failures.get(unit);
      if (f && f.until > t) {
        if (f.count >= ADDRESS_FAILURES) return Math.ceil((f.until - t) / 1000);
        f.count++;
        return 0;
      }
      failures.delete(unit);
      makeRoom(t);
      failures.set(unit, { count: 1, until: t + WINDOW_MS });
      return 0;
    },
    /** Gives back an attempt that did not fail (signed in, or refused before any check). */
    giveBack(address: string): void {
      const f = failures.get(throttleUnit(address));
      if (f && f.until > now() && f.count > 0) f.count--;
    },
  };
}

/**
 * What the throttle counts a client by: an IPv4 address, or the /64 an IPv6 address is in (one
 * subscriber gets a whole /64, so counting single IPv6 addresses would count nothing).
 */
export function throttleUnit(address: string): string {
  const bare = address.split('%')[0]!;
  if (!isIPv6(bare)) return bare;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(bare);
  if (mapped) return mapped[1]!;
  const [head = '', tail] = bare.split('::');
  const headGroups = head ? head.split(':') : [];
  const tailGroups = tail === undefined ? [] : tail ? tail.split(':') : [];
  const groups = [
    ...headGroups,
    ...Array(Math.max(0, 8 - headGroups.length - tailGroups.length)).fill('0'),
    ...tailGroups,
  ];
  return `${groups
    .slice(0, 4)
    .map((g) => Number.parseInt(g, 16).toString(16))
    .join(':')}::/64`;
}

export function loginRoutes(kit: Kit): RouteDef[] {
  const { deps } = kit;
  const throttle = createAddressThrottle();
  const addressOf = deps.clientAddress ?? ((req: IncomingMessage) => req.socket.remoteAddress ?? 'unknown');
  const publishable =
    'Publishable keys (pk_…) are read-only and cannot sign in. Use a secret key (sk_test_… or sk_live_…).';

  const loginForm: RouteDef['handler'] = async (req, res, _params, url) => {
    if (await kit.signedIn(req, res)) return redirect(res, SETTINGS);
    const notice = url.searchParams.has('signed_out') ? 'You have signed out.' : undefined;
    send(res, 200, loginPage(notice ? { notice } : {}));
  };

  /** Starts a new session (no fixation: a previous one of this browser ends). */
  async function startSession(req: IncomingMessage, res: Parameters<RouteDef['handler']>[1], who: SignedIn) {
    const previous = readCookies(req).get(SESSION_COOKIE);
    if (previous) await deps.sessions.delete(previous);
    const { token } = await deps.sessions.create(who);
    if (who.keyId) kit.rememberKey(who.keyId);
    deps.log.info(
      { accountId: who.accountId, livemode: who.livemode, with: who.keyId ? 'key' : 'password' },
      'dashboard sign-in',
    );
    redirect(res, SETTINGS, [
      cookie(req, SESSION_COOKIE, token, SESSION_LIFETIME_MS / 1000),
      cookie(req, FLASH_COOKIE, '', 0),
    ]);
  }

  const login: RouteDef['handler'] = async (req, res) => {
    const form = await readForm(req);
    const address = addressOf(req);
    const requestId = String(res.getHeader('request-id') ?? '');
    const email = (form.get('email') ?? '').trim();
    const refuse = (status: number, error: string, failed = true) => {
      if (!failed) throttle.giveBack(address);
      send(res, status, loginPage({ error, ...(form.has('key') ? {} : { email }) }));
    };
    const wait = throttle.take(address);
    if (wait > 0) {
      return send(
        res,
        429,
        loginPage({
          error: `Too many failed sign-ins from your network address. Try again in ${wait} seconds.`,
        }),
        { 'retry-after': String(wait) },
      );
    }

    if (form.has('key')) {
      const key = (form.get('key') ?? '').trim();
      if (!key) return refuse(400, 'Enter a secret API key.', false);
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
        return refuse(503, kit.explain(err, requestId, 'The key could not be checked right now'), false);
      }
      if (!principal.secret) return refuse(403, publishable);
      throttle.giveBack(address);
      return startSession(req, res, {
        accountId: principal.accountId,
        livemode: principal.livemode,
        keyId: principal.keyId,
        passwordStamp: null,
      });
    }

    const password = form.get('password') ?? '';
    if (!email || !password) return refuse(400, 'Enter your e-mail address and your password.', false);
    try {
      const who = await deps.accounts.authenticateOwner({ email, password }, { timeoutMs: 15_000 });
      throttle.giveBack(address);
      // Owners start in test mode; the switch in the header changes it.
      return startSession(req, res, {
        accountId: who.accountId,
        livemode: false,
        keyId: null,
        passwordStamp: who.passwordStamp,
      });
    } catch (err) {
      const rendered = renderConnectError(err, deps.docsUrl);
      const { code, message } = rendered.body.error;
      if (code === 'owner_credentials_invalid') {
        return refuse(401, 'The e-mail address or the password is not right.');
      }
      if (code === 'login_throttled') {
        throttle.giveBack(address); // the account's throttle answered: nothing was checked
        const seconds = /(\d+) seconds/.exec(message)?.[1];
        return send(
          res,
          429,
          loginPage({ error: message, email }),
          seconds ? { 'retry-after': seconds } : {},
        );
      }
      return refuse(503, kit.explain(err, requestId, 'You could not be signed in right now'), false);
    }
  };

  const logout: RouteDef['handler'] = async (req, res) => {
    const form = await readForm(req);
    const token = readCookies(req).get(SESSION_COOKIE);
    if (token && (await deps.sessions.find(token))) {
      if (!checkCsrf(token, form.get('csrf'))) return kit.forbidden(res);
      await deps.sessions.delete(token);
    }
    redirect(res, `${BASE}/login?signed_out=1`, [
      cookie(req, SESSION_COOKIE, '', 0),
      cookie(req, FLASH_COOKIE, '', 0),
    ]);
  };

  const mode = kit.action(async (s, form) => {
    const live = form.get('livemode') === 'true';
    const to = localPath(form.get('back'), SETTINGS);
    if (s.session.keyId !== null) {
      return {
        flash: {
          kind: 'error',
          text: `This session was signed in with a ${s.session.livemode ? 'live' : 'test'} key and stays in its mode. Sign in with your e-mail and password, or with a ${live ? 'live' : 'test'} secret key.`,
        },
        to,
      };
    }
    await deps.sessions.setMode(s.token, live);
    return { flash: { kind: 'ok', text: `You are in ${live ? 'live' : 'test'} mode.` }, to };
  }, 'The mode was not switched');

  return [
    { method: 'GET', pattern: ['login'], handler: loginForm },
    { method: 'POST', pattern: ['login'], handler: login },
    { method: 'POST', pattern: ['logout'], handler: logout },
    { method: 'POST', pattern: ['mode'], handler: mode },
  ];
}

export function loginPage(
  opts: { error?: string; notice?: string; email?: string; status?: number } = {},
): string {
  const body = html`<div class="login"><h1>Sign in</h1>
<p class="lead">Settings → API of your account: webhooks, events and API keys.</p>
${opts.notice ? html`<div class="flash ok" role="status">${opts.notice}</div>` : ''}
${opts.error ? html`<div class="flash error" role="alert">${opts.error}</div>` : ''}
<form class="card" method="post" action="${BASE}/login" id="password-login">
<label class="field" for="email">E-mail address</label>
<input type="email" id="email" name="email" required autocomplete="username" value="${opts.email ?? ''}">
<label class="field" for="password">Password</label>
<input type="password" id="password" name="password" required autocomplete="current-password">
<div class="submit"><button type="submit" class="primary">Sign in</button></div>
<p class="meta">Set the owner's password with <code>pnpm mcs accounts set-password --account ACCOUNT_ID</code>,
or create a new account with one: <code>pnpm mcs accounts create --email … --password</code>.</p>
</form>
<details class="card" id="key-login-box"${opts.error && !opts.email ? ' open' : ''}><summary>Sign in with a secret API key instead</summary>
<form method="post" action="${BASE}/login" id="key-login">
<p class="meta">For automation and scripts: a secret key (<code>sk_test_…</code> for test mode,
<code>sk_live_…</code> for live mode) signs in to its own mode.</p>
<label class="field" for="key">Secret API key</label>
<input type="password" id="key" name="key" required autocomplete="off" spellcheck="false" placeholder="sk_test_…">
<div class="submit"><button type="submit" class="primary">Sign in with key</button></div>
</form></details></div>`;
  return layout('Sign in · mcs', body);
}
