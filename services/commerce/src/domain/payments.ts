// Payment rules: one payment pays one pending order in full; a provider opens it; its outcome
// settles it (succeeded: the order becomes paid in the same transaction; failed: the order stays
// pending and may be paid again). At most one payment per order ever succeeds: the order's row
// lock orders the settlements, and a partial unique index backs it in the database. A payment
// that can no longer settle, because its order was cancelled or paid by another payment, fails
// in the same transaction with a message saying why: no payment stays pending for ever.
//
// Locks: every path that locks an order's payments and the order takes the order's pending
// payments first, in id order (lockPendingPayments), then the order.
import { apiError } from '@mcs/errors';
import type { Caller } from '@mcs/kit/caller';
import type { Tx } from '@mcs/kit/db';
import { isId, newId } from '@mcs/kit/ids';
import { changedAt, ownedBy, ownedRow, pageLimit, pageStart } from '@mcs/kit/resources';
import { optionalText, requireInteger, requireText } from '@mcs/kit/validate';
import { and, asc, desc, eq, lt, sql } from 'drizzle-orm';
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

/** The failure message of a pending payment whose order was cancelled. */
export function orderCancelledMessage(orderId: string): string {
  return `Order ${orderId} was cancelled before the payment settled.`;
}

/** The failure message of a pending payment whose order another payment paid. */
export function paidByAnotherMessage(orderId: string, paymentId: string): string {
  return `Order ${orderId} was paid by payment ${paymentId} before this payment settled.`;
}

/**
 * Locks the order's pending payments until `tx` ends, in id order: the first lock of every path
 * that settles or voids payments, so two of them never wait for each other in a cycle.
 */
function lockPendingPayments(tx: Tx, caller: Caller, orderId: string): Promise<Payment[]> {
  return tx
    .select()
    .from(payments)
    .where(ownedBy(payments, caller, and(eq(payments.orderId, orderId), eq(payments.status, 'pending'))))
    .orderBy(asc(payments.id))
    .for('update') as Promise<Payment[]>;
}

/** Fails locked pending payments whose order's change means they can never settle. */
async function voidPayments(tx: Tx, locked: Payment[], failureMessage: string, now?: Date) {
  const voided: Payment[] = [];
  for (const p of locked) {
    const [row] = await tx
      .update(payments)
      .set({
        status: 'failed',
        failureMessage,
        updatedAt: changedAt(p.updatedAt, now),
        // Its payment.failed is the payment's next version (schema.ts `version`).
        version: sql`${payments.version} + 1`,
      })
      .where(eq(payments.id, p.id))
      .returning();
    voided.push(row as Payment);
  }
  return voided;
}

/**
 * Cancels a pending order (pending → cancelled). Its pending payments fail with a message saying
 * so, as nothing can settle them now; each owes a payment.failed.
 */
export async function cancelOrder(
  tx: Tx,
  caller: Caller,
  id: string,
  now?: Date,
): Promise<{ order: Order; voided: Payment[] }> {
  const pending = await lockPendingPayments(tx, caller, id);
  const order = await transitionOrder(tx, caller, id, 'cancel', now);
  // Payments opened while this waited for the order's lock committed before it was granted.
  const opened = await lockPendingPayments(tx, caller, id);
  const all = [...pending, ...opened.filter((p) => !pending.some((q) => q.id === p.id))];
  return { order, voided: await voidPayments(tx, all, orderCancelledMessage(id), now) };
}

/**
 * Applies the provider's outcome to a pending payment. Succeeded: the order goes pending → paid
 * in the same transaction (and if it cannot, e.g. it was cancelled or another payment paid it,
 * nothing changes and the error says why), and the order's other pending payments fail (`voided`).
 * Failed: the order is untouched. Returns the order when it changed.
 */
export async function settlePayment(
  tx: Tx,
  caller: Caller,
  id: string,
  outcomeOf: (payment: Payment) => PaymentOutcome,
  now?: Date,
): Promise<{ payment: Payment; order: Order | undefined; voided: Payment[] }> {
  if (!isId('pay', id)) throw missing(id);
  const [found] = (await tx
    .select()
    .from(payments)
    .where(ownedRow(payments, caller, id))) as Payment[];
  if (!found) throw missing(id);
  const outcome = outcomeOf(found);
  const pending = await lockPendingPayments(tx, caller, found.orderId);
  const current = pending.find((p) => p.id === id);
  if (!current) {
    const [settled] = await tx.select().from(payments).where(eq(payments.id, id));
    throw apiError('invalid_state_transition', {
      message: `Payment ${id} cannot go from ${settled?.status ?? found.status} to ${outcome.status}: only pending payments settle.`,
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
  // The order's other pending payments, those opened while this waited for the order's lock
  // included (they committed before it was granted; none can be opened now): none can settle.
  const others = order ? (await lockPendingPayments(tx, caller, order.id)).filter((p) => p.id !== id) : [];
  const voided = await voidPayments(tx, others, paidByAnotherMessage(current.orderId, id), at);
  return { payment: row as Payment, order, voided };
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
