// The dashboard's HTTP behaviour against a real database and in-memory stand-ins for the
// accounts and webhooks services (their real behaviour is covered by test/e2e/dashboard.test.ts):
// sign-in rules, cookies, the CSRF and origin checks, redirects, flashes, escaping, revocation.
import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { create } from '@bufbuild/protobuf';
import { timestampNow } from '@bufbuild/protobuf/wkt';
import { createClient, createRouterTransport } from '@connectrpc/connect';
import { apiError } from '@mcs/errors';
import { CALLER_HEADERS } from '@mcs/kit/caller';
import { createLogger } from '@mcs/kit/log';
import { accounts, webhooks } from '@mcs/proto';
import { freshDatabase, type MigratedDatabase } from '@mcs/testkit';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Authenticator, Principal } from '../auth.ts';
import { clientAddressOf } from '../client-address.ts';
import { migrateGateway } from '../db/migrate.ts';
import { csrfTokenFor } from './csrf.ts';
import { createDashboard, type Dashboard } from './handler.ts';
import { ADDRESS_FAILURES, createAddressThrottle } from './login.ts';
import { createSessionStore } from './sessions.ts';
import { COPY_SCRIPT } from './views.ts';

const SECRET = 'sk_test_0123456789abcdefABCDEF';
const OWNER_PASSWORD = 'the owner password';
const PUBLISHABLE = 'pk_test_0123456789abcdefABCDEF';
const LIVE = 'sk_live_0123456789abcdefABCDEF';
const principals: Record<string, Principal> = {
  [SECRET]: { accountId: 'acct_1', livemode: false, secret: true, rateLimit: 100, keyId: 'key_test' },
  [PUBLISHABLE]: { accountId: 'acct_1', livemode: false, secret: false, rateLimit: 100, keyId: 'key_pk' },
  [LIVE]: { accountId: 'acct_1', livemode: true, secret: true, rateLimit: 100, keyId: 'key_live' },
};
const auth: Authenticator = {
  async authenticate(header) {
    const p = principals[header?.replace(/^Bearer /, '') ?? ''];
    if (!p) throw apiError('api_key_invalid');
    return p;
  },
  forget() {},
};

let revoked = new Set<string>();
/** The owner's password stamp at the accounts stand-in; a sign-in answers `signInStamp` if set. */
let ownerStamp = 'stamp-1';
let signInStamp: string | undefined;
let endpoints: webhooks.WebhookEndpoint[] = [];
const calls: Array<{ method: string; account: string | null; livemode: string | null; key: string | null }> =
  [];

const webhooksTransport = createRouterTransport((router) =>
  router.service(webhooks.WebhookEndpointService, {
    listWebhookEndpoints(_req, ctx) {
      const mode = ctx.requestHeader.get(CALLER_HEADERS.livemode) === 'true';
      return { data: endpoints.filter((e) => e.livemode === mode), hasMore: false };
    },
    createWebhookEndpoint(req, ctx) {
      calls.push({
        method: 'create',
        account: ctx.requestHeader.get(CALLER_HEADERS.account),
        livemode: ctx.requestHeader.get(CALLER_HEADERS.livemode),
        key: ctx.requestHeader.get(CALLER_HEADERS.idempotencyKey),
      });
      if (!req.url.startsWith('https://')) {
        throw apiError('invalid_url', { param: 'url', message: 'url must use https://.' });
      }
      const ep = create(webhooks.WebhookEndpointSchema, {
        id: `we_${endpoints.length + 1}`,
        url: req.url,
        events: req.events,
        status: webhooks.EndpointStatus.ENABLED,
        livemode: false,
        createdAt: timestampNow(),
      });
      if (req.description !== undefined) ep.description = req.description;
      endpoints.push(ep);
      return { ...ep, secret: 'whsec_c2VjcmV0LXNob3duLW9uY2Utb25seS0xMjM0' };
    },
    enableWebhookEndpoint(req, ctx) {
      calls.push({
        method: 'enable',
        account: ctx.requestHeader.get(CALLER_HEADERS.account),
        livemode: ctx.requestHeader.get(CALLER_HEADERS.livemode),
        key: null,
      });
      const ep = endpoints.find((e) => e.id === req.id);
      if (!ep) throw apiError('resource_missing');
      ep.status = webhooks.EndpointStatus.ENABLED;
      ep.failingSince = undefined;
      ep.lastError = undefined;
      return ep;
    },
  }),
);
const accountsTransport = createRouterTransport((router) =>
  router.service(accounts.AccountService, {
    listApiKeys(req) {
      return {
        data: Object.values(principals)
          .filter((p) => p.accountId === req.accountId)
          .map((p) =>
            create(accounts.ApiKeySchema, {
              id: p.keyId,
              ...(revoked.has(p.keyId) ? { revokedAt: timestampNow() } : {}),
            }),
          ),
      };
    },
    getOwnerPasswordStamp(req) {
      if (req.id !== 'acct_1') throw apiError('resource_missing');
      return { stamp: ownerStamp };
    },
    getAccount(req) {
      return { id: req.id, email: 'owner@example.com' };
    },
    createApiKey(req) {
      calls.push({
        method: 'createApiKey',
        account: req.accountId,
        livemode: String(req.livemode),
        key: null,
      });
      return {
        key: create(accounts.ApiKeySchema, {
          id: 'key_new',
          kind: req.kind,
          livemode: req.livemode,
          prefix: 'sk_test_',
          last4: 'WXYZ',
        }),
        secret: 'sk_test_newnewnewnewnewnewnewnewnewnewnWXYZ',
      };
    },
    authenticateOwner(req) {
      if (req.email === 'locked@example.com') {
        throw apiError('login_throttled', {
          message: 'Too many failed sign-ins with this e-mail address. Try again in 42 seconds.',
        });
      }
      if (req.email === 'owner@example.com' && req.password === OWNER_PASSWORD)
        return { accountId: 'acct_1', passwordStamp: signInStamp ?? ownerStamp };
      throw apiError('owner_credentials_invalid');
    },
  }),
);

let db: MigratedDatabase;
let dashboard: Dashboard;
let server: http.Server;
let base: string;

beforeAll(async () => {
  db = await freshDatabase(migrateGateway);
  dashboard = createDashboard({
    sessions: createSessionStore(db.db),
    auth,
    accounts: createClient(accounts.AccountService, accountsTransport),
    webhooks: createClient(webhooks.WebhookEndpointService, webhooksTransport),
    events: createClient(webhooks.EventService, webhooksTransport),
    settings: createClient(webhooks.WebhookSettingsService, webhooksTransport),
    docsUrl: 'http://docs.test/docs',
    log: createLogger('dashboard-test', 'silent'),
    keyCheckTtlMs: 0, // ask the accounts stand-in every time
    // As behind an Ingress on this machine: the peer is a proxy, X-Forwarded-For names the client.
    clientAddress: clientAddressOf('127.0.0.1'),
  });
  server = http.createServer((req, res) => {
    res.setHeader('request-id', 'req_test');
    void dashboard.handle(req, res, new URL(req.url ?? '/', 'http://x').pathname);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((r) => server?.close(r));
  await db?.close();
});
beforeEach(() => {
  revoked = new Set();
  ownerStamp = 'stamp-1';
  signInStamp = undefined;
  endpoints = [];
  calls.length = 0;
});

function go(path: string, init: RequestInit = {}) {
  return fetch(`${base}${path}`, { redirect: 'manual', ...init });
}

function post(path: string, fields: Record<string, string | string[]>, headers: Record<string, string> = {}) {
  const body = new URLSearchParams();
  for (const [k, v] of Object.entries(fields)) for (const x of [v].flat()) body.append(k, x);
  return go(path, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body,
  });
}

/** Signs in; returns the session cookie pair and the CSRF token of the session. */
async function signIn(key = SECRET) {
  const res = await post('/dashboard/login', { key });
  expect(res.status).toBe(303);
  const set = res.headers.getSetCookie().find((c) => c.startsWith('mcs_session='))!;
  const token = set.split(';')[0]!.slice('mcs_session='.length);
  return { cookie: `mcs_session=${token}`, csrf: csrfTokenFor(token), setCookie: set };
}

/** A page without the dashboard's one script (allowed by its hash): nothing else may run. */
const ownScriptRemoved = (page: string) => {
  expect(page.split('<script').length).toBeLessThanOrEqual(2);
  return page.replace(`<script>${COPY_SCRIPT}</script>`, '');
};

const cookiesOf = (res: Response) => res.headers.getSetCookie().map((c) => c.split(';')[0]!);

describe('sign-in', () => {
  it('sends the security headers on every answer', async () => {
    for (const path of ['/dashboard/login', '/dashboard/nope', '/dashboard/settings/api']) {
      const res = await go(path);
      expect(res.headers.get('content-security-policy')).toBe(
        `default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-${createHash('sha256').update(COPY_SCRIPT).digest('base64')}'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`,
      );
      expect(res.headers.get('x-frame-options')).toBe('DENY');
      expect(res.headers.get('cache-control')).toBe('no-store');
    }
    expect((await go('/dashboard/nope')).status).toBe(404);
    const wrong = await go('/dashboard/logout');
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get('allow')).toBe('POST');
  });

  it('tells an existing account how to set its password, not only a new one', async () => {
    const page = await (await go('/dashboard/login')).text();
    expect(page).toContain('<code>pnpm mcs accounts set-password --account ACCOUNT_ID</code>');
    expect(page).toContain('<code>pnpm mcs accounts create --email … --password</code>');
  });

  it('redirects to the settings page, and to sign-in without a session', async () => {
    expect((await go('/dashboard')).headers.get('location')).toBe('/dashboard/settings/api');
    const res = await go('/dashboard/settings/api');
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe('/dashboard/login');
    const forged = await go('/dashboard/settings/api', {
      headers: { cookie: `mcs_session=${'A'.repeat(43)}` },
    });
    expect(forged.headers.get('location')).toBe('/dashboard/login');
  });

  it('refuses publishable, unknown and malformed keys with a clear message', async () => {
    const pk = await post('/dashboard/login', { key: PUBLISHABLE });
    expect(pk.status).toBe(403);
    expect(await pk.text()).toContain('Publishable keys (pk_…) are read-only and cannot sign in');
    expect(pk.headers.getSetCookie()).toEqual([]);
    const unknown = await post('/dashboard/login', { key: 'sk_test_unknownunknownunknown' });
    expect(unknown.status).toBe(401);
    expect(await unknown.text()).toContain('This key is not valid');
    const odd = await post('/dashboard/login', { key: '<script>' });
    expect(odd.status).toBe(401);
    expect(ownScriptRemoved(await odd.text())).not.toContain('<script>');
    expect((await post('/dashboard/login', { key: '' })).status).toBe(400);
  });

  it('sets an HttpOnly, SameSite=Lax session cookie scoped to /dashboard, Secure over https', async () => {
    const { setCookie } = await signIn();
    expect(setCookie).toMatch(
      /^mcs_session=[A-Za-z0-9_-]{43}; Path=\/dashboard; Max-Age=43200; HttpOnly; SameSite=Lax$/,
    );
    const https = await post('/dashboard/login', { key: SECRET }, { 'x-forwarded-proto': 'https' });
    expect(https.headers.getSetCookie().find((c) => c.startsWith('mcs_session='))).toMatch(/; Secure$/);
  });

  it('refuses a sign-in posted from another site', async () => {
    const res = await post('/dashboard/login', { key: SECRET }, { origin: 'https://evil.example' });
    expect(res.status).toBe(403);
    expect(res.headers.getSetCookie()).toEqual([]);
  });

  it('signs out: the session no longer works', async () => {
    const s = await signIn();
    const out = await post('/dashboard/logout', { csrf: s.csrf }, { cookie: s.cookie });
    expect(out.status).toBe(303);
    expect(out.headers.get('location')).toBe('/dashboard/login?signed_out=1');
    expect(cookiesOf(out)).toContain('mcs_session=');
    const after = await go('/dashboard/settings/api', { headers: { cookie: s.cookie } });
    expect(after.headers.get('location')).toBe('/dashboard/login');
  });
});

describe('settings page and actions', () => {
  it('lists the mode’s endpoints with health, escaping their data', async () => {
    endpoints.push(
      create(webhooks.WebhookEndpointSchema, {
        id: 'we_sick',
        url: 'https://example.com/hook?a=1&b=<2>',
        events: ['*'],
        description: '<script>alert(1)</script>',
        status: webhooks.EndpointStatus.UNHEALTHY,
        lastError: 'HTTP 500 <b>',
        failingSince: timestampNow(),
        livemode: false,
      }),
      create(webhooks.WebhookEndpointSchema, { id: 'we_live', url: 'https://live.example/', livemode: true }),
    );
    const s = await signIn();
    const res = await go('/dashboard/settings/api', { headers: { cookie: s.cookie } });
    expect(res.status).toBe(200);
    const page = await res.text();
    expect(page).toContain('data-status="unhealthy"');
    expect(page).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(page).toContain('https://example.com/hook?a=1&amp;b=&lt;2&gt;');
    expect(page).toContain('HTTP 500 &lt;b&gt;');
    expect(ownScriptRemoved(page)).not.toContain('<script');
    expect(page).not.toContain('we_live');
    expect(page).toContain('owner@example.com');
    expect(page).toContain('/dashboard/settings/api/webhooks/we_sick/enable');
    // Every form but sign-in carries the CSRF token.
    const forms = page.match(/<form /g)!.length;
    expect(page.split(`name="csrf" value="${s.csrf}"`).length - 1).toBe(forms);

    const live = await signIn(LIVE);
    const livePage = await (await go('/dashboard/settings/api', { headers: { cookie: live.cookie } })).text();
    expect(livePage).toContain('we_live');
    expect(livePage).not.toContain('we_sick');
  });

  it('shows why an endpoint is disabled (410 Gone or by hand), its max_rate, and offers to re-enable it', async () => {
    endpoints.push(
      create(webhooks.WebhookEndpointSchema, {
        id: 'we_gone',
        url: 'https://gone.example/hook',
        events: ['order.created', 'webhook_endpoint.disabled'],
        status: webhooks.EndpointStatus.DISABLED,
        disabledReason: webhooks.DisabledReason.GONE,
        lastError: 'HTTP 410',
        failingSince: timestampNow(),
        maxRate: 25,
        livemode: false,
      }),
      create(webhooks.WebhookEndpointSchema, {
        id: 'we_off',
        url: 'https://off.example/hook',
        events: ['*'],
        status: webhooks.EndpointStatus.DISABLED,
        disabledReason: webhooks.DisabledReason.MANUAL,
        livemode: false,
      }),
    );
    const s = await signIn();
    const page = await (await go('/dashboard/settings/api', { headers: { cookie: s.cookie } })).text();
    const card = (id: string) =>
      page.slice(page.indexOf(`id="${id}"`), page.indexOf('</article>', page.indexOf(`id="${id}"`)));
    expect(card('we_gone')).toContain('Disabled (410 Gone)');
    expect(card('we_gone')).toContain('the receiver answered 410 Gone');
    expect(card('we_gone')).toContain('HTTP 410');
    expect(card('we_gone')).toContain('at most 25/s');
    expect(card('we_gone')).toContain('/dashboard/settings/api/webhooks/we_gone/enable');
    expect(card('we_off')).not.toContain('410');
    expect(card('we_off')).toContain('* (all resource events)');
    expect(card('we_off')).toContain('/dashboard/settings/api/webhooks/we_off/enable');
    // The operational types can be chosen for a new endpoint.
    expect(page).toContain('value="webhook_endpoint.unhealthy"');
  });

  it('refuses a POST without the session’s CSRF token, or from another origin', async () => {
    endpoints.push(
      create(webhooks.WebhookEndpointSchema, { id: 'we_1', status: webhooks.EndpointStatus.UNHEALTHY }),
    );
    const s = await signIn();
    const other = await signIn();
    const path = '/dashboard/settings/api/webhooks/we_1/enable';
    const forged: Array<Record<string, string>> = [{}, { csrf: '' }, { csrf: 'x' }, { csrf: other.csrf }];
    for (const fields of forged) {
      const res = await post(path, fields, { cookie: s.cookie });
      expect(res.status, JSON.stringify(fields)).toBe(403);
    }
    const json = await go(path, {
      method: 'POST',
      headers: { cookie: s.cookie, 'content-type': 'application/json' },
      body: JSON.stringify({ csrf: s.csrf }),
    });
    expect(json.status).toBe(403);
    const crossSite = await post(
      path,
      { csrf: s.csrf },
      { cookie: s.cookie, origin: 'https://evil.example' },
    );
    expect(crossSite.status).toBe(403);
    const fetchMeta = await post(
      path,
      { csrf: s.csrf },
      { cookie: s.cookie, 'sec-fetch-site': 'cross-site' },
    );
    expect(fetchMeta.status).toBe(403);
    expect(calls).toEqual([]);

    // Without a session: sign in first.
    expect((await post(path, { csrf: s.csrf })).headers.get('location')).toBe('/dashboard/login');

    const ok = await post(path, { csrf: s.csrf }, { cookie: s.cookie, origin: base });
    expect(ok.status).toBe(303);
    expect(ok.headers.get('location')).toBe('/dashboard/settings/api');
    expect(calls).toEqual([{ method: 'enable', account: 'acct_1', livemode: 'false', key: null }]);
  });

  it('shows the outcome once, after the redirect, with a new secret only then', async () => {
    const s = await signIn();
    const added = await post(
      '/dashboard/settings/api/webhooks',
      {
        csrf: s.csrf,
        url: 'https://example.com/new',
        events: ['order.created', 'order.updated'],
        description: 'shop',
        idempotency_key: 'dash_AAAAAAAAAAAAAAAAAAAAAA',
      },
      { cookie: s.cookie },
    );
    expect(added.status).toBe(303);
    expect(calls[0]).toMatchObject({ method: 'create', key: 'dash_AAAAAAAAAAAAAAAAAAAAAA' });
    const flash = cookiesOf(added).find((c) => c.startsWith('mcs_flash='))!;
    expect(flash).not.toContain('whsec_');
    const page = await go('/dashboard/settings/api', { headers: { cookie: `${s.cookie}; ${flash}` } });
    const text = await page.text();
    expect(text).toContain('whsec_c2VjcmV0LXNob3duLW9uY2Utb25seS0xMjM0');
    expect(text).toContain('Endpoint https://example.com/new added.');
    expect(cookiesOf(page)).toContain('mcs_flash=');
    // Another session cannot open it.
    const other = await signIn();
    const stolen = await go('/dashboard/settings/api', { headers: { cookie: `${other.cookie}; ${flash}` } });
    expect(await stolen.text()).not.toContain('whsec_');
  });

  it('shows a service error as a message and keeps the form, never a 500', async () => {
    const s = await signIn();
    const res = await post(
      '/dashboard/settings/api/webhooks',
      { csrf: s.csrf, url: 'ftp://example.com/<x>', events: 'order.created', description: 'd"q' },
      { cookie: s.cookie },
    );
    expect(res.status).toBe(303);
    const flash = cookiesOf(res).find((c) => c.startsWith('mcs_flash='))!;
    const page = await go('/dashboard/settings/api', { headers: { cookie: `${s.cookie}; ${flash}` } });
    expect(page.status).toBe(200);
    const text = await page.text();
    expect(text).toContain('The endpoint was not added: url must use https://.');
    expect(text).toContain('value="ftp://example.com/&lt;x&gt;"');
    expect(text).toContain('value="d&quot;q"');
    expect(text).toMatch(/value="order.created" checked/);
  });
});

describe('revocation', () => {
  it('ends the sessions of a revoked key when told, and notices a missed revocation', async () => {
    const a = await signIn();
    expect(await dashboard.keyRevoked('key_test')).toBeGreaterThanOrEqual(1);
    expect(
      (await go('/dashboard/settings/api', { headers: { cookie: a.cookie } })).headers.get('location'),
    ).toBe('/dashboard/login');

    const b = await signIn();
    revoked.add('key_test'); // revoked while this gateway missed the NATS message
    const res = await go('/dashboard/settings/api', { headers: { cookie: b.cookie } });
    expect(res.headers.get('location')).toBe('/dashboard/login');
    const { rows } = await db.pool.query("select 1 from gateway.sessions where key_id = 'key_test'");
    expect(rows).toEqual([]);
  });
});

describe('owner sign-in and the mode switch', () => {
  async function ownerSignIn() {
    const res = await post('/dashboard/login', { email: 'owner@example.com', password: OWNER_PASSWORD });
    expect(res.status).toBe(303);
    const token = res.headers
      .getSetCookie()
      .find((c) => c.startsWith('mcs_session='))!
      .split(';')[0]!
      .slice('mcs_session='.length);
    return { cookie: `mcs_session=${token}`, csrf: csrfTokenFor(token) };
  }

  it('signs an owner in with e-mail and password, in test mode, without a key', async () => {
    const s = await ownerSignIn();
    const { rows } = await db.pool.query(
      'select livemode, key_id from gateway.sessions where account_id = $1',
      ['acct_1'],
    );
    expect(rows).toContainEqual({ livemode: false, key_id: null });
    const page = await (await go('/dashboard/settings/api', { headers: { cookie: s.cookie } })).text();
    expect(page).toContain('id="switch-mode"');
    expect(page).toContain('Switch to live mode');
  });

  it('refuses a wrong password keeping the e-mail, and passes on the per-account throttle with Retry-After', async () => {
    const wrong = await post('/dashboard/login', { email: 'owner@example.com', password: 'not it at all' });
    expect(wrong.status).toBe(401);
    const text = await wrong.text();
    expect(text).toContain('The e-mail address or the password is not right.');
    expect(text).toContain('value="owner@example.com"');
    expect(wrong.headers.getSetCookie()).toEqual([]);
    const locked = await post('/dashboard/login', { email: 'locked@example.com', password: OWNER_PASSWORD });
    expect(locked.status).toBe(429);
    expect(locked.headers.get('retry-after')).toBe('42');
    expect(await locked.text()).toContain('Try again in 42 seconds');
    expect((await post('/dashboard/login', { email: '', password: '' })).status).toBe(400);
  });

  it("switches an owner's session between test and live, and shows the mode's data", async () => {
    endpoints.push(
      create(webhooks.WebhookEndpointSchema, {
        id: 'we_sick',
        url: 'https://test.example/',
        livemode: false,
      }),
      create(webhooks.WebhookEndpointSchema, { id: 'we_live', url: 'https://live.example/', livemode: true }),
    );
    const s = await ownerSignIn();
    const res = await post(
      '/dashboard/mode',
      { csrf: s.csrf, livemode: 'true', back: '/dashboard/events' },
      { cookie: s.cookie },
    );
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe('/dashboard/events');
    const page = await (await go('/dashboard/settings/api', { headers: { cookie: s.cookie } })).text();
    expect(page).toContain('data-mode="live"');
    expect(page).toContain('we_live');
    expect(page).not.toContain('we_sick');
    // Without the CSRF token nothing changes; an outside `back` is not followed.
    expect((await post('/dashboard/mode', { livemode: 'false' }, { cookie: s.cookie })).status).toBe(403);
    const odd = await post(
      '/dashboard/mode',
      { csrf: s.csrf, livemode: 'false', back: 'https://evil.example/' },
      { cookie: s.cookie },
    );
    expect(odd.headers.get('location')).toBe('/dashboard/settings/api');
  });

  it("keeps a key's session in the key's mode", async () => {
    const s = await signIn();
    const page = await (await go('/dashboard/settings/api', { headers: { cookie: s.cookie } })).text();
    expect(page).toContain('set by your key');
    const res = await post('/dashboard/mode', { csrf: s.csrf, livemode: 'true' }, { cookie: s.cookie });
    expect(res.status).toBe(303);
    const { rows } = await db.pool.query("select livemode from gateway.sessions where key_id = 'key_test'");
    expect(rows.every((r) => r.livemode === false)).toBe(true);
  });

  const settings = (s: { cookie: string }) =>
    go('/dashboard/settings/api', { headers: { cookie: s.cookie } });
  const ownerRows = async () =>
    (
      await db.pool.query(
        "select password_stamp from gateway.sessions where account_id = 'acct_1' and key_id is null order by password_stamp",
      )
    ).rows.map((r) => r.password_stamp);

  it('ends an owner session once the password is set again, though this gateway missed the message', async () => {
    await db.pool.query('delete from gateway.sessions');
    const s = await ownerSignIn();
    expect(await ownerRows()).toEqual(['stamp-1']);
    expect((await settings(s)).status).toBe(200);
    ownerStamp = 'stamp-2'; // set with the CLI; the NATS message never came here
    const res = await settings(s);
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe('/dashboard/login');
    expect(await ownerRows()).toEqual([]);
    const again = await ownerSignIn();
    expect((await settings(again)).status).toBe(200);
  });

  it('ends a sign-in that raced the new password, and a session from before stamps existed', async () => {
    await db.pool.query('delete from gateway.sessions');
    signInStamp = 'stamp-0'; // checked against the old password as the new one was stored
    const raced = await ownerSignIn();
    expect((await settings(raced)).headers.get('location')).toBe('/dashboard/login');
    signInStamp = undefined;
    const old = await ownerSignIn();
    await db.pool.query("update gateway.sessions set password_stamp = null where account_id = 'acct_1'");
    expect((await settings(old)).headers.get('location')).toBe('/dashboard/login');
    expect(await ownerRows()).toEqual([]);
  });

  it('keeps the sessions signed in with the new password when the message comes late', async () => {
    await db.pool.query('delete from gateway.sessions');
    const before = await ownerSignIn();
    ownerStamp = 'stamp-2';
    const after = await ownerSignIn(); // with the new password, before the message came
    expect(await dashboard.ownerPasswordSet('acct_1')).toBe(1);
    expect(await ownerRows()).toEqual(['stamp-2']);
    expect((await settings(before)).headers.get('location')).toBe('/dashboard/login');
    expect((await settings(after)).status).toBe(200);
  });
});

describe('sign-in throttling per address', () => {
  it('refuses an address after its failures in a window, until the window ends', () => {
    let now = 1_000_000;
    const t = createAddressThrottle(() => now);
    for (let i = 0; i < ADDRESS_FAILURES; i++) expect(t.take('203.0.113.5')).toBe(0);
    expect(t.take('203.0.113.5')).toBe(15 * 60);
    expect(t.take('198.51.100.1')).toBe(0);
    now += 15 * 60_000;
    expect(t.take('203.0.113.5')).toBe(0);
  });

  it('counts an IPv6 client by its /64, and a flood of new addresses does not free a blocked one', () => {
    let now = 1_000_000;
    const t = createAddressThrottle(() => now, 1_000);
    for (let i = 0; i < ADDRESS_FAILURES; i++)
      expect(t.take(`2001:db8:1:2::${i.toString(16)}`)).toBeGreaterThanOrEqual(0);
    // Another address of the same /64, written another way: the same client.
    expect(t.take('2001:0db8:0001:0002:ffff::1')).toBe(15 * 60);
    expect(t.take('::ffff:203.0.113.9')).toBe(0); // an IPv4 client seen over IPv6
    for (let i = 0; i < ADDRESS_FAILURES; i++) t.take('203.0.113.6');
    // Thousands of new addresses: the oldest windows make room one by one, never all at once.
    now += 60_000;
    for (let i = 0; i < 500; i++) t.take(`198.51.${i >> 8}.${i & 255}`);
    expect(t.take('203.0.113.6')).toBeGreaterThan(0);
    expect(t.take('2001:db8:1:2::77')).toBeGreaterThan(0);
  });

  it('throttles the client a trusted proxy names, not the proxy', async () => {
    const from = (client: string) => ({ 'x-forwarded-for': `203.0.113.1, ${client}` });
    for (let i = 0; i < ADDRESS_FAILURES; i++) {
      const res = await post('/dashboard/login', { key: `sk_test_wrong${i}` }, from('198.51.100.20'));
      expect(res.status).toBe(401);
    }
    expect((await post('/dashboard/login', { key: SECRET }, from('198.51.100.20'))).status).toBe(429);
    // Another client behind the same proxy is not locked out by it.
    expect((await post('/dashboard/login', { key: SECRET }, from('198.51.100.21'))).status).toBe(303);
  });

  it('counts attempts as they start, so parallel ones cannot pass together; what did not fail is given back', () => {
    const t = createAddressThrottle(() => 1_000_000);
    // A burst: every attempt is taken before any is checked.
    const admitted = Array.from({ length: 100 }, () => t.take('203.0.113.7')).filter((w) => w === 0);
    expect(admitted).toHaveLength(ADDRESS_FAILURES);
    // Sign-ins that succeed give their attempt back.
    const ok = createAddressThrottle(() => 1_000_000);
    for (let i = 0; i < ADDRESS_FAILURES * 3; i++) {
      expect(ok.take('198.51.100.9')).toBe(0);
      ok.giveBack('198.51.100.9');
    }
  });
});

describe('API keys page', () => {
  it('lets an owner create a key, shown once; a key session sees the list but cannot create or revoke', async () => {
    const viaKey = await signIn();
    const page = await (
      await go('/dashboard/settings/api/keys', { headers: { cookie: viaKey.cookie } })
    ).text();
    expect(page).toContain('id="owner-only"');
    expect(page).not.toContain('id="create-key"');
    const refused = await post(
      '/dashboard/settings/api/keys',
      { csrf: viaKey.csrf, kind: 'secret' },
      { cookie: viaKey.cookie },
    );
    expect(refused.status).toBe(303);
    expect(calls.filter((c) => c.method === 'createApiKey')).toEqual([]);
    expect(
      (await go('/dashboard/settings/api/keys/key_test/revoke', { headers: { cookie: viaKey.cookie } }))
        .status,
    ).toBe(403);

    const res = await post('/dashboard/login', { email: 'owner@example.com', password: OWNER_PASSWORD });
    const token = res.headers
      .getSetCookie()
      .find((c) => c.startsWith('mcs_session='))!
      .split(';')[0]!
      .slice(12);
    const owner = { cookie: `mcs_session=${token}`, csrf: csrfTokenFor(token) };
    const made = await post(
      '/dashboard/settings/api/keys',
      { csrf: owner.csrf, kind: 'secret' },
      { cookie: owner.cookie },
    );
    expect(made.headers.get('location')).toBe('/dashboard/settings/api/keys');
    expect(calls.filter((c) => c.method === 'createApiKey')).toEqual([
      { method: 'createApiKey', account: 'acct_1', livemode: 'false', key: null },
    ]);
    const flash = cookiesOf(made).find((c) => c.startsWith('mcs_flash='))!;
    const shown = await (
      await go('/dashboard/settings/api/keys', { headers: { cookie: `${owner.cookie}; ${flash}` } })
    ).text();
    expect(shown).toContain('sk_test_newnewnewnewnewnewnewnewnewnewnWXYZ');
    expect(shown).toContain('data-copy="new-key"');
    const again = await (
      await go('/dashboard/settings/api/keys', { headers: { cookie: owner.cookie } })
    ).text();
    expect(again).not.toContain('sk_test_newnewnewnewnewnewnewnewnewnewnWXYZ');
  });
});
