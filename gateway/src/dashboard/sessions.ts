// Dashboard sessions: an account owner signs in with e-mail and password, or anyone holding a
// secret API key signs in with it, and gets a random 32-byte token in the `mcs_session` cookie.
// The table keeps only the token's SHA-256, so reading it signs nobody in. A session ends when
// signed out or after 12 hours; a key's session also ends when its key is revoked, an owner's
// when the owner's password is set again. One signer keeps at most MAX_SESSIONS_PER_SIGNER.
import { createHash, randomBytes } from 'node:crypto';
import { type Db, deleteInSlices } from '@mcs/kit/db';
import { and, eq, gt, isNull, lte, sql } from 'drizzle-orm';
import { sessions } from '../db/schema.ts';

export const SESSION_LIFETIME_MS = 12 * 3600 * 1000;

/**
 * Sessions one signer (a key, or an owner's password) keeps at once: signing in again beyond it
 * ends the oldest. A browser per device is far fewer; a script signing in in a loop is bounded.
 */
export const MAX_SESSIONS_PER_SIGNER = 50;

export interface Session {
  /** SHA-256 (hex) of the token. */
  id: string;
  accountId: string;
  livemode: boolean;
  /** The key signed in with; null for an owner's (password) session. */
  keyId: string | null;
  /** An owner's session: the password stamp it signed in with (null for a key's session). */
  passwordStamp: string | null;
  createdAt: Date;
  expiresAt: Date;
}

export interface SignedIn {
  accountId: string;
  livemode: boolean;
  /** The key signed in with; null for an owner who signed in with e-mail and password. */
  keyId: string | null;
  /** The owner's password stamp from the sign-in (accounts' OwnerPasswordStamp); null with a key. */
  passwordStamp: string | null;
}

export interface SessionStore {
  /** A new session for a verified secret key; the token goes to the cookie and nowhere else. */
  create(who: SignedIn, now?: Date): Promise<{ token: string; session: Session }>;
  /** The unexpired session of a token, or undefined for an unknown, malformed or expired one. */
  find(token: string, now?: Date): Promise<Session | undefined>;
  /** Switches an owner's session to test or live mode (key sessions keep their key's mode). */
  setMode(token: string, livemode: boolean): Promise<void>;
  /** Signs out (nothing happens for an unknown token). */
  delete(token: string): Promise<void>;
  /** Ends every session signed in with a key (the key was revoked); returns how many. */
  deleteForKey(keyId: string): Promise<number>;
  /**
   * Ends the sessions an owner signed in with a password (it was replaced); returns how many.
   * With `current`, the account's password stamp now, those signed in with it stay.
   */
  deleteForOwner(accountId: string, current?: string): Promise<number>;
  /** Removes expired sessions; returns how many. */
  sweep(now?: Date): Promise<number>;
}

/** base64url of 32 random bytes. */
const TOKEN_SHAPE = /^[A-Za-z0-9_-]{43}$/;

export function newSessionToken(): string {
  return randomBytes(32).toString('base64url');
}

export function sessionIdOf(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

export function isSessionToken(token: string): boolean {
  return TOKEN_SHAPE.test(token);
}

export function createSessionStore(db: Db): SessionStore {
  return {
    async create(who, now = new Date()) {
      const token = newSessionToken();
      const session: Session = {
        id: sessionIdOf(token),
        accountId: who.accountId,
        livemode: who.livemode,
        keyId: who.keyId,
        passwordStamp: who.keyId === null ? who.passwordStamp : null,
        createdAt: now,
        expiresAt: new Date(now.getTime() + SESSION_LIFETIME_MS),
      };
      await db.insert(sessions).values(session);
      const mine =
        who.keyId === null
          ? and(eq(sessions.accountId, who.accountId), isNull(sessions.keyId))
          : eq(sessions.keyId, who.keyId);
      await db.execute(sql`
        delete from ${sessions} where ${mine} and ${sessions.id} not in (
          select ${sessions.id} from ${sessions} where ${mine}
          order by ${sessions.createdAt} desc limit ${MAX_SESSIONS_PER_SIGNER})`);
      return { token, session };
    },
    async find(token, now = new Date()) {
      if (!isSessionToken(token)) return undefined;
      const [row] = await db
        .select()
        .from(sessions)
        .where(and(eq(sessions.id, sessionIdOf(token)), gt(sessions.expiresAt, now)));
      return row;
    },
    async setMode(token, livemode) {
      if (!isSessionToken(token)) return;
      await db
        .update(sessions)
        .set({ livemode })
        .where(and(eq(sessions.id, sessionIdOf(token)), isNull(sessions.keyId)));
    },
    async delete(token) {
      if (!isSessionToken(token)) return;
      await db.delete(sessions).where(eq(sessions.id, sessionIdOf(token)));
    },
    async deleteForKey(keyId) {
      const gone = await db.delete(sessions).where(eq(sessions.keyId, keyId)).returning({ id: sessions.id });
      return gone.length;
    },
    async deleteForOwner(accountId, current) {
      const gone = await db
        .delete(sessions)
        .where(
          and(
            eq(sessions.accountId, accountId),
            isNull(sessions.keyId),
            current === undefined ? undefined : sql`${sessions.passwordStamp} is distinct from ${current}`,
          ),
        )
        .returning({ id: sessions.id });
      return gone.length;
    },
    sweep(now = new Date()) {
      return deleteInSlices(db, sessions, lte(sessions.expiresAt, now));
    },
  };
}
