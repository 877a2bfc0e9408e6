// Owner sign-in for the dashboard: an account's e-mail address and password. Throttling per
// e-mail address, whether an owner has it or not (so the throttle tells nobody which addresses
// have owners): after FREE_FAILURES failed sign-ins in a row, each further one blocks sign-in for
// twice as long as the one before (30 s, 1 min, 2 min … up to 15 min); a blocked address
// answers login_throttled without the password even being checked, so guessing gains nothing
// while blocked. An attempt is counted when it starts, before the (slow) password check, so
// parallel guesses cannot each find the count from before the others; a successful sign-in
// clears it. (The gateway throttles per network address as well.)
import { apiError } from '@mcs/errors';
import { deleteInSlices, type Tx } from '@mcs/kit/db';
import { and, eq, isNotNull, isNull, lt, lte, or, sql } from 'drizzle-orm';
import { accounts, signInFailures } from '../db/schema.ts';
import { checkPasswordRules, decoyHash, hashPassword, passwordStamp, verifyPassword } from './passwords.ts';

export const FREE_FAILURES = 5;
const FIRST_BLOCK_MS = 30_000;
const MAX_BLOCK_MS = 15 * 60_000;

/** How long sign-in stays blocked after the `failures`-th failure in a row (0: not blocked). */
export function blockAfter(failures: number): number {
  if (failures < FREE_FAILURES) return 0;
  return Math.min(MAX_BLOCK_MS, FIRST_BLOCK_MS * 2 ** Math.min(failures - FREE_FAILURES, 20));
}

function throttled(until: Date, now: Date): never {
  const seconds = Math.max(1, Math.ceil((until.getTime() - now.getTime()) / 1000));
  throw apiError('login_throttled', {
    message: `Too many failed sign-ins with this e-mail address. Try again in ${seconds} seconds.`,
  });
}

/** How long the throttle remembers an address nobody tried since (domain/owners.ts sweep). */
const FORGET_AFTER_MS = 24 * 3600_000;

/** Whether a database error is the unique index on owners' e-mail addresses. */
export function isOwnerEmailTaken(err: unknown): boolean {
  const e = err as { code?: string; constraint?: string; cause?: { code?: string; constraint?: string } };
  const pgErr = e?.code ? e : e?.cause;
  return pgErr?.code === '23505' && pgErr.constraint === 'accounts_owner_email_idx';
}

export async function setOwnerPassword(
  tx: Tx,
  input: { accountId: string; password: string },
): Promise<typeof accounts.$inferSelect> {
  if (input.accountId === '') {
    throw apiError('missing_required_field', {
      param: 'account_id',
      message: 'Missing required parameter: account_id.',
    });
  }
  checkPasswordRules(input.password);
  const passwordHash = await hashPassword(input.password);
  try {
    const [row] = await tx
      .update(accounts)
      .set({ passwordHash })
      .where(eq(accounts.id, input.accountId))
      .returning();
    if (!row) {
      throw apiError('resource_missing', {
        param: 'account_id',
        message: `No such account: ${input.accountId}.`,
      });
    }
    return row;
  } catch (err) {
    if (isOwnerEmailTaken(err)) throw apiError('email_taken', { param: 'email' });
    throw err;
  }
}

/**
 * Counts an attempt with `email` as it starts, in one statement with the block check: answers
 * the time the address is blocked until when it is (the attempt is then not counted), else null.
 */
async function takeAttempt(tx: Tx, email: string, now: Date): Promise<Date | null> {
  // The first attempt (FREE_FAILURES > 1) never blocks; the n-th of a row blocks from the
  // FREE_FAILURES-th on. A blocked address's row is left alone (setWhere): not counted.
  const failures = sql`${signInFailures.failures} + 1`;
  const blockMs = sql`least(${MAX_BLOCK_MS}, ${FIRST_BLOCK_MS} * power(2, least(${failures} - ${FREE_FAILURES}, 20)))`;
  const taken = await tx
    .insert(signInFailures)
    .values({ email, failures: 1, blockedUntil: null, lastAt: now })
    .onConflictDoUpdate({
      target: signInFailures.email,
      set: {
        failures,
        blockedUntil: sql`case when ${failures} >= ${FREE_FAILURES}
          then ${now}::timestamptz + ${blockMs} * interval '1 millisecond' end`,
        lastAt: now,
      },
      setWhere: or(isNull(signInFailures.blockedUntil), lte(signInFailures.blockedUntil, now)),
    })
    .returning({ failures: signInFailures.failures });
  if (taken.length > 0) return null;
  const [row] = await tx
    .select({ blockedUntil: signInFailures.blockedUntil })
    .from(signInFailures)
    .where(eq(signInFailures.email, email));
  return row?.blockedUntil ?? null;
}

/** Forgets addresses nobody tried for a day (and not blocked): answers how many. */
export async function sweepSignInFailures(tx: Tx, now = new Date()): Promise<number> {
  const cutoff = new Date(now.getTime() - FORGET_AFTER_MS);
  return deleteInSlices(
    tx,
    signInFailures,
    and(
      lt(signInFailures.lastAt, cutoff),
      or(isNull(signInFailures.blockedUntil), lt(signInFailures.blockedUntil, now)),
    )!,
  );
}

/** The account whose owner this is, or owner_credentials_invalid / login_throttled. */
export async function authenticateOwner(
  tx: Tx,
  input: { email: string; password: string },
  now = new Date(),
): Promise<{ accountId: string; passwordStamp: string }> {
  const email = input.email.trim().toLowerCase();
  if (email === '' || email.length > 254) {
    await verifyPassword(input.password, await decoyHash());
    throw apiError('owner_credentials_invalid');
  }
  const blockedUntil = await takeAttempt(tx, email, now);
  if (blockedUntil) throttled(blockedUntil, now);
  const [row] = await tx
    .select({ id: accounts.id, passwordHash: accounts.passwordHash })
    .from(accounts)
    .where(and(sql`lower(${accounts.email}) = lower(${email})`, isNotNull(accounts.passwordHash)));
  // Without an owner, as slow as a real check, so the answer's timing does not tell either.
  const ok = await verifyPassword(input.password.slice(0, 1024), row?.passwordHash ?? (await decoyHash()));
  if (!row || !ok) throw apiError('owner_credentials_invalid');
  await tx.delete(signInFailures).where(eq(signInFailures.email, email));
  return { accountId: row.id, passwordStamp: passwordStamp(row.passwordHash) };
}

/** The account's current owner password stamp ('' without a password), or resource_missing. */
export async function ownerPasswordStamp(db: Tx, accountId: string): Promise<string> {
  if (accountId === '') {
    throw apiError('missing_required_field', { param: 'id', message: 'Missing required parameter: id.' });
  }
  const [row] = await db
    .select({ passwordHash: accounts.passwordHash })
    .from(accounts)
    .where(eq(accounts.id, accountId));
  if (!row) {
    throw apiError('resource_missing', { param: 'id', message: `No such account: ${accountId}.` });
  }
  return passwordStamp(row.passwordHash);
}
