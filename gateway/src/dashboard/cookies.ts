// Reading and writing the dashboard's cookies. Every cookie is HttpOnly (no script reads it),
// scoped to /dashboard (the /v1 API never sees it) and SameSite=Lax: a link followed from
// elsewhere arrives signed in, but another site's POST, frame or fetch carries no cookie.
// Secure whenever the browser came over HTTPS.
import type { IncomingMessage } from 'node:http';

export const SESSION_COOKIE = 'mcs_session';
export const FLASH_COOKIE = 'mcs_flash';
const PATH = '/dashboard';

/** The request's cookies by name; the first of duplicates wins. */
export function readCookies(req: IncomingMessage): Map<string, string> {
  const out = new Map<string, string>();
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    const name = part.slice(0, eq).trim();
    if (name && !out.has(name)) out.set(name, part.slice(eq + 1).trim());
  }
  return out;
}

/** Whether the browser reached us over HTTPS (directly, or through a TLS-terminating proxy). */
export function overHttps(req: IncomingMessage): boolean {
  const proto = req.headers['x-forwarded-proto'];
  const first = (Array.isArray(proto) ? proto[0] : proto)?.split(',')[0]?.trim().toLowerCase();
  return first === 'https' || (req.socket as { encrypted?: boolean }).encrypted === true;
}

/**
 * A Set-Cookie value. Values are base64url (tokens, sealed flashes), so they need no quoting.
 * `maxAgeSeconds` 0 deletes the cookie.
 */
export function cookie(req: IncomingMessage, name: string, value: string, maxAgeSeconds: number): string {
  const attrs = [`${name}=${value}`, `Path=${PATH}`, `Max-Age=${maxAgeSeconds}`, 'HttpOnly', 'SameSite=Lax'];
  if (overHttps(req)) attrs.push('Secure');
  return attrs.join('; ');
}
