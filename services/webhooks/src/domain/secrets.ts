// Signing secrets are needed in clear to sign, so they are sealed (AES-256-GCM) rather than
// hashed: a database dump alone does not reveal them.
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

export interface SecretBox {
  seal(secret: string): Uint8Array;
  open(sealed: Uint8Array): string;
}

/**
 * Opened secrets kept in memory (never written anywhere), by their sealed bytes: every delivery
 * attempt needs its endpoint's secret in clear, and opening it each time (a fresh AES key
 * schedule per call) took 12 % of the webhooks service's CPU under load (pnpm bench ingest).
 * A sealed value never changes meaning, so the cache needs no invalidation; rotating a secret
 * seals a new value. Bounded: cleared when full (a few endpoints per account are the norm).
 */
const OPENED_MAX = 10_000;

export function createSecretBox(key: Buffer): SecretBox {
  if (key.length !== 32) throw new Error('WEBHOOK_SECRETS_KEY must be 32 bytes (base64 or hex)');
  const opened = new Map<string, string>();
  return {
    seal(secret) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      const data = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
      return Buffer.concat([iv, cipher.getAuthTag(), data]);
    },
    open(sealed) {
      const buf = Buffer.from(sealed.buffer, sealed.byteOffset, sealed.byteLength);
      const id = buf.toString('base64');
      const known = opened.get(id);
      if (known !== undefined) return known;
      const decipher = createDecipheriv('aes-256-gcm', key, buf.subarray(0, 12));
      decipher.setAuthTag(buf.subarray(12, 28));
      const secret = Buffer.concat([decipher.update(buf.subarray(28)), decipher.final()]).toString('utf8');
      if (opened.size >= OPENED_MAX) opened.clear();
      opened.set(id, secret);
      return secret;
    },
  };
}

export function parseKey(text: string): Buffer {
  const t = text.trim();
  return /^[0-9a-f]{64}$/i.test(t) ? Buffer.from(t, 'hex') : Buffer.from(t, 'base64');
}

/**
 * The key from the environment, or for a local stack without one, a key kept in `file`
 * (created on first use, readable by its owner only).
 */
export function loadSecretsKey(
  fromEnv: string | undefined,
  file: string,
): { key: Buffer; generated: boolean } {
  if (fromEnv) return { key: parseKey(fromEnv), generated: false };
  if (!existsSync(file)) {
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, randomBytes(32).toString('base64'), { mode: 0o600, flag: 'wx' });
  }
  return { key: parseKey(readFileSync(file, 'utf8')), generated: true };
}

/** `whsec_` + base64 of 32 random bytes (docs/api.md: at least 24). */
export function newSigningSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}
