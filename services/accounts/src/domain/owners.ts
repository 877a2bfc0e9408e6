// Owner sign-in for the dashboard: an account's e-mail address and password. Throttling per
// account: after FREE_FAILURES failed sign-ins in a row, each further one blocks sign-in for
// twice as long as the one before (30 s, 1 min, 2 min … up to 15 min); a blocked account answers
// login_throttled without the password even being checked, so guessing gains nothing while
// blocked. A successful sign-in resets the count. (The gateway throttles per network address.)
import { apiError } from '@mcs/errors';
import type { Tx } from '@mcs/kit/db';
import { and, eq, isNotNull, sql } from 'drizzle-orm';
import { accounts } from '../db/schema.ts';
import { checkPasswordRules, decoyHash, hashPassword, verifyPassword } from './passwords.ts';

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
    message: `Too many failed sign-ins for this account. Try again in ${seconds} seconds.`,
  });
}

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
      .set({ passwordHash, failedLogins: 0, loginBlockedUntil: null })
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

/** The account whose owner this is, or owner_credentials_invalid / login_throttled. */
export async function authenticateOwner(
  tx: Tx,
  input: { email: string; password: string },
  now = new Date(),
): Promise<{ accountId: string }> {
  const email = input.email.trim();
  const [row] =
    email === '' || email.length > 254
      ? []
      : await tx
          .select({
            id: accounts.id,
            passwordHash: accounts.passwordHash,
            loginBlockedUntil: accounts.loginBlockedUntil,
          })
          .from(accounts)
          .where(and(sql`lower(${accounts.email}) = lower(${email})`, isNotNull(accounts.passwordHash)));
  if (!row?.passwordHash) {
    // As slow as a real check, so the answer's timing does not tell which addresses have owners.
    await verifyPassword(input.password, await decoyHash());
    throw apiError('owner_credentials_invalid');
  }
  if (row.loginBlockedUntil && row.loginBlockedUntil > now) throttled(row.loginBlockedUntil, now);
  if (await verifyPassword(input.password.slice(0, 1024), row.passwordHash)) {
    await tx
      .update(accounts)
      .set({ failedLogins: 0, loginBlockedUntil: null })
      .where(eq(accounts.id, row.id));
    return { accountId: row.id };
  }
  // Counted and blocked in one statement, so concurrent guesses cannot each see the old count.
  const failures = sql`${accounts.failedLogins} + 1`;
  const blockMs = sql`least(${MAX_BLOCK_MS}, ${FIRST_BLOCK_MS} * power(2, least(${failures} - ${FREE_FAILURES}, 20)))`;
  await tx
    .update(accounts)
    .set({
      failedLogins: failures,
      loginBlockedUntil: sql`case when ${failures} >= ${FREE_FAILURES}
        then ${now}::timestamptz + ${blockMs} * interval '1 millisecond'
        else ${accounts.loginBlockedUntil} end`,
    })
    .where(eq(accounts.id, row.id));
  throw apiError('owner_credentials_invalid');
}
