// Cross-site request forgery defences for the dashboard's form POSTs, in two layers:
// 1. Every form of a signed-in page carries a token derived from the session token:
//    HMAC-SHA256(key = session token, "mcs dashboard csrf v1"). Another site can neither read it
//    nor compute it without the cookie. Deriving it from the session (rather than from a random
//    per-process key) keeps it valid on every gateway replica and across restarts, with nothing
//    stored; it dies with its session.
// 2. A POST a browser marks as cross-site (Sec-Fetch-Site) or from another origin (Origin) is
//    refused before anything else, which also covers the sign-in form (login CSRF).
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

const LABEL = 'mcs dashboard csrf v1';

export function csrfTokenFor(sessionToken: string): string {
  return createHmac('sha256', sessionToken).update(LABEL).digest('base64url');
}

/** Whether `given` is the CSRF token of this session, compared in constant time. */
export function checkCsrf(sessionToken: string, given: unknown): boolean {
  if (typeof given !== 'string') return false;
  const expected = Buffer.from(csrfTokenFor(sessionToken));
  const actual = Buffer.from(given);
  // Lengths are public (every token has the same one); only the content is compared in constant time.
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

function first(v: string | string[] | undefined): string | undefined {
  return (Array.isArray(v) ? v[0] : v)?.split(',')[0]?.trim();
}

/**
 * False when a browser tells us the POST comes from another site. Clients that send neither
 * header (curl, tests) pass here and still need the session's CSRF token.
 */
export function sameOrigin(req: IncomingMessage): boolean {
  const site = first(req.headers['sec-fetch-site']);
  if (site !== undefined && site !== 'same-origin' && site !== 'none') return false;
  const origin = first(req.headers.origin);
  if (origin === undefined) return true;
  const host = first(req.headers['x-forwarded-host']) ?? req.headers.host;
  try {
    return origin !== 'null' && host !== undefined && new URL(origin).host === host.toLowerCase();
  } catch {
    return false;
  }
}
