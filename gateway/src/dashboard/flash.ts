// The one-shot message a POST leaves for the page it redirects to (POST/redirect/GET). It can
// hold a signing secret that must be shown exactly once, so it travels in a short-lived cookie
// sealed with AES-256-GCM under a key derived from the session token: neither the database nor
// a log nor a URL ever holds it, only the browser that owns the session can have it opened,
// and the page that shows it deletes the cookie.
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

export interface Flash {
  kind: 'ok' | 'error';
  text: string;
  /** A new signing secret, shown once (creation, rotation). */
  secret?: { endpoint: string; value: string };
  /** A new API key, shown once. */
  key?: { id: string; value: string };
  /** The add-endpoint form as submitted, to fill it again after an error. */
  form?: { url: string; events: string[]; description: string };
}

/** Seconds a flash waits for its page: the redirect follows at once. */
export const FLASH_MAX_AGE = 60;

function flashKey(sessionToken: string): Buffer {
  return Buffer.from(hkdfSync('sha256', sessionToken, 'mcs dashboard', 'mcs dashboard flash v1', 32));
}

export function sealFlash(sessionToken: string, flash: Flash): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', flashKey(sessionToken), iv);
  const data = Buffer.concat([cipher.update(JSON.stringify(flash), 'utf8'), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), data]).toString('base64url');
}

/** The flash sealed for this session, or undefined if it is not one (another session's, tampered). */
export function openFlash(sessionToken: string, sealed: string): Flash | undefined {
  try {
    const buf = Buffer.from(sealed, 'base64url');
    if (buf.length < 29) return undefined;
    const decipher = createDecipheriv('aes-256-gcm', flashKey(sessionToken), buf.subarray(0, 12));
    decipher.setAuthTag(buf.subarray(12, 28));
    const text = Buffer.concat([decipher.update(buf.subarray(28)), decipher.final()]).toString('utf8');
    const flash = JSON.parse(text) as Flash;
    return flash.kind === 'ok' || flash.kind === 'error' ? flash : undefined;
  } catch {
    return undefined;
  }
}
