// The dashboard (Settings → API, spec 1 and 3.1): owners sign in with e-mail and password (or
// anyone with a secret API key, for automation), and see and manage the webhook endpoints of the
// current mode with their health, each endpoint's chart and deliveries, the events with every
// delivery attempt, and the API keys. Transport only, like http.ts: every change is a call to
// the accounts or webhooks service on behalf of the session's account and mode, through the same
// Connect clients the /v1 API uses; the gateway's own table holds only the sessions.
//
// This file routes; each page lives with its handler and view in its own module (login.ts,
// endpoints.ts + endpoint-page.ts, events.ts, keys.ts) on the helpers of context.ts.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Code, ConnectError } from '@connectrpc/connect';
import {
  createKit,
  type DashboardDeps,
  FormTooLarge,
  ID,
  type Params,
  type RouteDef,
  redirect,
  SECURITY_HEADERS,
  send,
} from './context.ts';
import { sameOrigin } from './csrf.ts';
import { endpointRoutes } from './endpoints.ts';
import { eventRoutes } from './events.ts';
import { keyRoutes } from './keys.ts';
import { loginRoutes } from './login.ts';
import { messagePage, SETTINGS } from './views.ts';

export type { DashboardDeps } from './context.ts';

export interface Dashboard {
  /** Serves a path under /dashboard; never throws. */
  handle(req: IncomingMessage, res: ServerResponse, path: string): Promise<void>;
  /** An owner's password was replaced: end the sessions it signed in. Returns how many ended. */
  ownerPasswordSet(accountId: string): Promise<number>;
  /** A key was revoked: end its sessions now. Returns how many ended. */
  keyRevoked(keyId: string): Promise<number>;
}

export function createDashboard(deps: DashboardDeps): Dashboard {
  const kit = createKit(deps);
  const toSettings: RouteDef['handler'] = async (_q, res) => redirect(res, SETTINGS);
  const routes: RouteDef[] = [
    { method: 'GET', pattern: [], handler: toSettings },
    { method: 'GET', pattern: ['settings'], handler: toSettings },
    ...loginRoutes(kit),
    ...endpointRoutes(kit),
    ...keyRoutes(kit),
    ...eventRoutes(kit),
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
      if (method === 'POST' && !sameOrigin(req)) return kit.forbidden(res);
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
      deps.log.error({ err, requestId, path }, 'dashboard request failed');
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
    async ownerPasswordSet(accountId) {
      // Sessions signed in with the new password already (the message can come late) stay.
      return deps.sessions.deleteForOwner(accountId, await kit.refreshStamp(accountId));
    },
    async keyRevoked(keyId) {
      kit.forgetKey(keyId);
      return deps.sessions.deleteForKey(keyId);
    },
  };
}
