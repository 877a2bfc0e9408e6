// API keys (Settings → API → API keys): the keys of the current mode with prefix and last four
// characters, kind, creation and last use; creating one (shown once, with a copy button) and
// revoking one after a confirmation page. Keys live in the accounts service; a revocation there
// ends every dashboard session signed in with that key (announced over NATS).
//
// Only an owner (signed in with e-mail and password) creates and revokes keys: a session signed
// in with a key sees the list, but a leaked key must not be able to mint keys that outlive its
// own revocation, nor revoke the others.
import { timestampDate } from '@bufbuild/protobuf/wkt';
import { accounts } from '@mcs/proto';
import { type Kit, type RouteDef, send } from './context.ts';
import type { Flash } from './flash.ts';
import {
  csrfField,
  flashBox,
  html,
  KEYS,
  layout,
  messagePage,
  type SafeHtml,
  time,
  type Viewer,
} from './views.ts';

export interface KeyView {
  id: string;
  kind: 'secret' | 'publishable';
  prefix: string;
  last4: string;
  createdAt: Date | null;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
}

function keyView(k: accounts.ApiKey): KeyView {
  return {
    id: k.id,
    kind: k.kind === accounts.KeyKind.PUBLISHABLE ? 'publishable' : 'secret',
    prefix: k.prefix,
    last4: k.last4,
    createdAt: k.createdAt ? timestampDate(k.createdAt) : null,
    lastUsedAt: k.lastUsedAt ? timestampDate(k.lastUsedAt) : null,
    revokedAt: k.revokedAt ? timestampDate(k.revokedAt) : null,
  };
}

const masked = (k: KeyView) => `${k.prefix}…${k.last4}`;

function keyRow(k: KeyView, current: string | null, owner: boolean): SafeHtml {
  return html`<tr class="key" id="${k.id}" data-state="${k.revokedAt ? 'revoked' : 'active'}">
<td><code>${masked(k)}</code>${k.id === current ? html` <span class="chip">this session</span>` : ''}</td>
<td>${k.kind}</td><td>${time(k.createdAt)}</td><td>${k.lastUsedAt ? time(k.lastUsedAt) : html`<span class="meta">never</span>`}</td>
<td>${
    k.revokedAt
      ? html`<span class="badge disabled">revoked ${time(k.revokedAt)}</span>`
      : !owner
        ? html`<span class="badge enabled">active</span>`
        : html`<a href="${KEYS}/${encodeURIComponent(k.id)}/revoke" class="revoke" aria-label="Revoke ${masked(k)}">Revoke…</a>`
  }</td></tr>`;
}

export function keysPage(opts: {
  viewer: Viewer;
  keys: KeyView[];
  current: string | null;
  flash?: Flash | undefined;
}): string {
  const { viewer } = opts;
  const mode = viewer.livemode ? 'live' : 'test';
  const body = html`<h1>API keys</h1>
<p class="lead">The ${mode}-mode keys of this account. Secret keys (<code>sk_${mode}_…</code>) can do
everything through the API; publishable keys (<code>pk_${mode}_…</code>) only read the product catalog.
Keys are stored as hashes: a key is shown only when it is created.</p>
${flashBox(opts.flash)}
<div class="card scroll"><table id="keys"><thead><tr><th>Key</th><th>Kind</th><th>Created</th><th>Last used</th><th>Status</th></tr></thead>
<tbody>${opts.keys.length ? opts.keys.map((k) => keyRow(k, opts.current, viewer.owner)) : html`<tr><td colspan="5" class="empty">No keys in ${mode} mode.</td></tr>`}</tbody></table></div>
<h2>Create a key</h2>
${
  viewer.owner
    ? html`<form class="card" method="post" action="${KEYS}" id="create-key">${csrfField(viewer)}
<fieldset><legend>Kind</legend>
<label><input type="radio" name="kind" value="secret" checked> Secret (<code>sk_${mode}_…</code>)</label><br>
<label><input type="radio" name="kind" value="publishable"> Publishable (<code>pk_${mode}_…</code>)</label></fieldset>
<div class="submit"><button type="submit" class="primary">Create ${mode}-mode key</button></div></form>`
    : html`<p class="note off" id="owner-only">Only the account's owner creates and revokes keys: sign in with your
e-mail address and password (a session signed in with a key cannot).</p>`
}`;
  return layout('API keys · mcs', body, viewer);
}

function confirmPage(viewer: Viewer, k: KeyView, current: boolean): string {
  const body = html`<p><a href="${KEYS}">← API keys</a></p><h1>Revoke <code>${masked(k)}</code>?</h1>
<div class="note bad">Every program using this key stops working at once; this cannot be undone.${
    current ? ' You signed in with this key, so you will be signed out too.' : ''
  }</div>
<form method="post" action="${KEYS}/${encodeURIComponent(k.id)}/revoke" class="actions">${csrfField(viewer)}
<button type="submit" class="danger" id="confirm-revoke">Revoke this key</button> <a href="${KEYS}">Cancel</a></form>`;
  return layout('Revoke key · mcs', body, viewer);
}

export function keyRoutes(kit: Kit): RouteDef[] {
  const { deps } = kit;

  async function modeKeys(accountId: string, livemode: boolean): Promise<KeyView[]> {
    const { data } = await deps.accounts.listApiKeys({ accountId }, { timeoutMs: 10_000 });
    return data.filter((k) => k.livemode === livemode).map(keyView);
  }

  const list = kit.page(async (req, res, s) => {
    const flash = kit.takeFlash(req, res, s);
    const viewer = await kit.viewerOf(s, KEYS);
    const keys = await modeKeys(s.session.accountId, s.session.livemode);
    send(res, 200, keysPage({ viewer, keys, current: s.session.keyId, flash }));
  });

  const OWNER_ONLY = 'Only the owner, signed in with e-mail and password, creates and revokes keys.';

  const confirm = kit.page(async (_req, res, s, { id }) => {
    const viewer = await kit.viewerOf(s, KEYS);
    if (!viewer.owner) return send(res, 403, messagePage('Owner only', OWNER_ONLY, viewer));
    const key = (await modeKeys(s.session.accountId, s.session.livemode)).find((k) => k.id === id);
    if (!key || key.revokedAt) {
      return send(res, 404, messagePage('Not found', 'This mode has no such active key.', viewer));
    }
    send(res, 200, confirmPage(viewer, key, key.id === s.session.keyId));
  });

  const create = kit.action(
    async (s, form) => {
      if (s.session.keyId !== null) return { flash: { kind: 'error', text: OWNER_ONLY } };
      const kind =
        form.get('kind') === 'publishable' ? accounts.KeyKind.PUBLISHABLE : accounts.KeyKind.SECRET;
      const made = await deps.accounts.createApiKey(
        { accountId: s.session.accountId, kind, livemode: s.session.livemode },
        { timeoutMs: 10_000 },
      );
      const k = keyView(made.key!);
      return {
        flash: { kind: 'ok', text: `Key ${masked(k)} created.`, key: { id: k.id, value: made.secret } },
      };
    },
    'The key was not created',
    () => KEYS,
  );

  const revoke = kit.action(
    async (s, _form, { id }) => {
      if (s.session.keyId !== null) return { flash: { kind: 'error', text: OWNER_ONLY } };
      const key = (await modeKeys(s.session.accountId, s.session.livemode)).find((k) => k.id === id);
      if (!key) return { flash: { kind: 'error', text: 'This mode has no such key.' } };
      await deps.accounts.revokeApiKey(
        { accountId: s.session.accountId, keyId: key.id },
        { timeoutMs: 10_000 },
      );
      kit.forgetKey(key.id);
      deps.auth.forget(key.id);
      return { flash: { kind: 'ok', text: `Key ${masked(key)} revoked: it no longer works.` } };
    },
    'The key was not revoked',
    () => KEYS,
  );

  const K = ['settings', 'api', 'keys'];
  return [
    { method: 'GET', pattern: K, handler: list },
    { method: 'POST', pattern: K, handler: create },
    { method: 'GET', pattern: [...K, ':id', 'revoke'], handler: confirm },
    { method: 'POST', pattern: [...K, ':id', 'revoke'], handler: revoke },
  ];
}
