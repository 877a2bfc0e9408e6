// Payment rules: one payment pays one pending order in full; a provider opens it; its outcome
// settles it (succeeded: the order becomes paid in the same transaction; failed: the order stays
// pending and may be paid again). At most one payment per order ever succeeds: the order's row
// lock orders the settlements, and a partial unique index backs it in the database.
import { apiError } from '@mcs/errors';
import type { Caller } from '@mcs/kit/caller';
import type { Tx } from '@mcs/kit/db';
import { isId, newId } from '@mcs/kit/ids';
import { changedAt, ownedBy, ownedRow, pageLimit, pageStart } from '@mcs/kit/resources';
import { optionalText, requireInteger, requireText } from '@mcs/kit/validate';
import { desc, eq, lt, sql } from 'drizzle-orm';
import { payments } from '../db/schema.ts';
import type {
  PaymentOutcome,
  PaymentProvider,
  SandboxPaymentProvider,
} from '../providers/payment-provider.ts';
import { lockOrder, type Order, transitionOrder } from './orders.ts';
import { MAX_AMOUNT } from './products.ts';

export type PaymentStatus = 'pending' | 'succeeded' | 'failed';
export type Payment = typeof payments.$inferSelect & { status: PaymentStatus };

export interface CreatePaymentInput {
  order?: string | undefined;
  amount?: number | undefined;
}

/**
 * Opens a pending payment of the order's total. The order is read under a share lock, so it
 * cannot leave `pending` between the check and the insert. Creating a payment emits no event.
 */
export async function createPayment(
  tx: Tx,
  caller: Caller,
  input: CreatePaymentInput,
  provider: PaymentProvider,
  now = new Date(),
): Promise<Payment> {
  const orderId = requireText(input.order, 'order', 64);
  const amountGiven =
    input.amount === undefined
      ? undefined
      : requireInteger(input.amount, 'amount', { min: 0, max: MAX_AMOUNT });
  const order = await lockOrder(tx, caller, orderId, 'share');
  if (!order) throw apiError('invalid_value', { param: 'order', message: `No such order: ${orderId}.` });
  if (order.status !== 'pending') {
    throw apiError('invalid_state_transition', {
      param: 'order',
      message: `Order ${order.id} is ${order.status}: only pending orders take payments.`,
    });
  }
  if (amountGiven !== undefined && amountGiven !== order.total) {
    throw apiError('invalid_value', {
      param: 'amount',
      message: `amount must equal the order's total (${order.total}); partial payments are not supported.`,
    });
  }
  const id = newId('pay', now.getTime());
  const { reference } = await provider.open({
    paymentId: id,
    orderId: order.id,
    amount: order.total,
    currency: order.currency,
    livemode: caller.livemode,
  });
  const [inserted] = await tx
    .insert(payments)
    .values({
      id,
      accountId: caller.accountId,
      livemode: caller.livemode,
      orderId: order.id,
      amount: order.total,
      currency: order.currency,
      status: 'pending',
      failureMessage: null,
      provider: provider.name,
      providerReference: reference,
      createdAt: now,
      updatedAt: now,
    })
    .returning();
  return inserted as Payment;
}

function missing(id: string) {
  return apiError('resource_missing', { param: 'id', message: `No such payment: ${id}.` });
}

export async function getPayment(tx: Tx, caller: Caller, id: string): Promise<Payment> {
  if (!isId('pay', id)) throw missing(id);
  const [row] = await tx
    .select()
    .from(payments)
    .where(ownedRow(payments, caller, id));
  if (!row) throw missing(id);
  return row as Payment;
}

export async function listPayments(
  tx: Tx,
  caller: Caller,
  opts: { limit?: number; startingAfter?: string; order?: string },
): Promise<{ data: Payment[]; hasMore: boolean }> {
  const limit = pageLimit(opts.limit);
  const after = pageStart('pay', opts.startingAfter);
  if (opts.order !== undefined && !isId('ord', opts.order)) {
    throw apiError('invalid_value', { param: 'order', message: 'order must be the id of an order.' });
  }
  const rows = await tx
    .select()
    .from(payments)
    .where(
      ownedBy(
        payments,
        caller,
        opts.order ? eq(payments.orderId, opts.order) : undefined,
        after ? lt(payments.id, after) : undefined,
      ),
    )
    .orderBy(desc(payments.id))
    .limit(limit + 1);
  return { data: rows.slice(0, limit) as Payment[], hasMore: rows.length > limit };
}

/**
 * Applies the provider's outcome to a pending payment. Succeeded: the order goes pending → paid
 * in the same transaction (and if it cannot, e.g. it was cancelled or another payment paid it,
 * nothing changes and the error says why). Failed: the order is untouched. Returns the order
 * when it changed.
 */
export async function settlePayment(
  tx: Tx,
  caller: Caller,
  id: string,
  outcomeOf: (payment: Payment) => PaymentOutcome,
  now?: Date,
): Promise<{ payment: Payment; order: Order | undefined }> {
  // Payment first, then its order: every path that locks both takes them in this order.
  if (!isId('pay', id)) throw missing(id);
  const [current] = (await tx
    .select()
    .from(payments)
    .where(ownedRow(payments, caller, id))
    .for('update')) as Payment[];
  if (!current) throw missing(id);
  const outcome = outcomeOf(current);
  if (current.status !== 'pending') {
    throw apiError('invalid_state_transition', {
      message: `Payment ${id} cannot go from ${current.status} to ${outcome.status}: only pending payments settle.`,
    });
  }
  const at = changedAt(current.updatedAt, now);
  const order =
    outcome.status === 'succeeded'
      ? await transitionOrder(tx, caller, current.orderId, 'pay', at)
      : undefined;
  const [row] = await tx
    .update(payments)
    .set({
      status: outcome.status,
      failureMessage: outcome.status === 'failed' ? outcome.failureMessage : null,
      updatedAt: at,
      // Its payment.completed or payment.failed is the payment's next version (schema.ts `version`).
      version: sql`${payments.version} + 1`,
    })
    .where(eq(payments.id, current.id))
    .returning();
  return { payment: row as Payment, order };
}

function requireTestMode(caller: Caller): void {
  if (caller.livemode) throw apiError('test_mode_only');
}

function sandboxHeld(payment: Payment, sandbox: SandboxPaymentProvider): string {
  if (payment.provider !== sandbox.name) {
    throw apiError('invalid_value', {
      param: 'id',
      message: `Payment ${payment.id} is not held by the sandbox provider.`,
    });
  }
  return payment.providerReference;
}

/** Test helper: the sandbox confirms the payment. */
export function completeTestPayment(
  tx: Tx,
  caller: Caller,
  id: string,
  sandbox: SandboxPaymentProvider,
  now = new Date(),
) {
  requireTestMode(caller);
  return settlePayment(tx, caller, id, (p) => sandbox.complete(sandboxHeld(p, sandbox)), now);
}

/** Test helper: the sandbox declines the payment, with `failureMessage` or its default. */
export function failTestPayment(
  tx: Tx,
  caller: Caller,
  id: string,
  sandbox: SandboxPaymentProvider,
  failureMessage: string | undefined,
  now = new Date(),
) {
  requireTestMode(caller);
  const message = optionalText(failureMessage, 'failure_message', 500);
  return settlePayment(tx, caller, id, (p) => sandbox.fail(sandboxHeld(p, sandbox), message), now);
}
