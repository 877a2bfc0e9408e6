// Product rules: validation, creation, updates (archiving is an update), reads. Speaks its own
// types; the handler maps them to and from proto and appends the events.
import { apiError } from '@mcs/errors';
import type { Caller } from '@mcs/kit/caller';
import type { Tx } from '@mcs/kit/db';
import { isId, newId } from '@mcs/kit/ids';
import { type CreateSidecar, insertOnce, type WrittenEvent } from '@mcs/kit/insert-once';
import { changedAt, ownedBy, ownedRow, pageLimit, pageStart } from '@mcs/kit/resources';
import { optionalText, requireCurrency, requireInteger, requireText } from '@mcs/kit/validate';
import { desc, eq, inArray, lt, sql } from 'drizzle-orm';
import { outbox, products } from '../db/schema.ts';

export type Product = typeof products.$inferSelect;

/** Largest price or total we take, in minor units: anything above is a mistake, not a sale. */
export const MAX_AMOUNT = 99_999_999_999;
const MAX_NAME = 200;
const MAX_DESCRIPTION = 1_000;

export interface CreateProductInput {
  name?: string | undefined;
  description?: string | undefined;
  price?: number | undefined;
  currency?: string | undefined;
}

export interface UpdateProductInput {
  name?: string | undefined;
  description?: string | undefined;
  price?: number | undefined;
  active?: boolean | undefined;
}

export function validateProduct(input: CreateProductInput): {
  name: string;
  description: string | null;
  price: number;
  currency: string;
} {
  return {
    name: requireText(input.name, 'name', MAX_NAME),
    // No description is null (as the API renders an unset one), whether left out or sent as "".
    description: optionalText(input.description, 'description', MAX_DESCRIPTION) || null,
    price: requireInteger(input.price, 'price', { min: 0, max: MAX_AMOUNT }),
    currency: requireCurrency(input.currency, 'currency'),
  };
}

/**
 * Creates an active product: the product, its event and (for a keyed caller) its idempotency
 * key and answer in ONE statement (insertOnce), so `tx` may be the pool. Throws KeyTaken when
 * the caller's key was used already.
 */
export async function createProduct(
  tx: Tx,
  caller: Caller,
  input: CreateProductInput,
  now = new Date(),
  sidecar: CreateSidecar<Product> = {},
): Promise<{ product: Product; event: WrittenEvent | undefined }> {
  const product: Product = {
    id: newId('prod', now.getTime()),
    accountId: caller.accountId,
    livemode: caller.livemode,
    ...validateProduct(input),
    active: true,
    version: 1, // product.created
    createdAt: now,
    updatedAt: now,
  };
  const { event } = await insertOnce(tx, products, product, {
    event: sidecar.event && { outbox, of: sidecar.event },
    key: sidecar.key && { ...sidecar.key, caller },
    now,
  });
  return { product, event };
}

function missing(id: string) {
  return apiError('resource_missing', { param: 'id', message: `No such product: ${id}.` });
}

export async function getProduct(tx: Tx, caller: Caller, id: string): Promise<Product> {
  if (!isId('prod', id)) throw missing(id);
  const [row] = await tx
    .select()
    .from(products)
    .where(ownedRow(products, caller, id));
  if (!row) throw missing(id);
  return row;
}

/**
 * Applies the fields given. `changed` is false (and nothing is written, no event is due) when
 * every given field already has that value, so archiving twice is harmless.
 */
export async function updateProduct(
  tx: Tx,
  caller: Caller,
  id: string,
  input: UpdateProductInput,
  now?: Date,
): Promise<{ product: Product; changed: boolean }> {
  const patch: Partial<Pick<Product, 'name' | 'description' | 'price' | 'active'>> = {};
  if (input.name !== undefined) patch.name = requireText(input.name, 'name', MAX_NAME);
  if (input.description !== undefined)
    patch.description = optionalText(input.description, 'description', MAX_DESCRIPTION) || null;
  if (input.price !== undefined)
    patch.price = requireInteger(input.price, 'price', { min: 0, max: MAX_AMOUNT });
  if (input.active !== undefined) patch.active = input.active;

  if (!isId('prod', id)) throw missing(id);
  const [current] = await tx
    .select()
    .from(products)
    .where(ownedRow(products, caller, id))
    .for('update');
  if (!current) throw missing(id);
  const changed = (Object.keys(patch) as Array<keyof typeof patch>).some((k) => patch[k] !== current[k]);
  if (!changed) return { product: current, changed: false };
  const [row] = await tx
    .update(products)
    // Its product.updated is the product's next version (schema.ts `version`).
    .set({ ...patch, updatedAt: changedAt(current.updatedAt, now), version: sql`${products.version} + 1` })
    .where(eq(products.id, current.id))
    .returning();
  return { product: row!, changed: true };
}

/** The soft delete: the product stays readable, but new orders cannot use it. */
export function archiveProduct(tx: Tx, caller: Caller, id: string, now?: Date) {
  return updateProduct(tx, caller, id, { active: false }, now);
}

export async function listProducts(
  tx: Tx,
  caller: Caller,
  opts: { limit?: number; startingAfter?: string; active?: boolean },
): Promise<{ data: Product[]; hasMore: boolean }> {
  const limit = pageLimit(opts.limit);
  const after = pageStart('prod', opts.startingAfter);
  const rows = await tx
    .select()
    .from(products)
    .where(
      ownedBy(
        products,
        caller,
        opts.active === undefined ? undefined : eq(products.active, opts.active),
        after ? lt(products.id, after) : undefined,
      ),
    )
    .orderBy(desc(products.id))
    .limit(limit + 1);
  return { data: rows.slice(0, limit), hasMore: rows.length > limit };
}

/** The caller's products among `ids`, by id (others are absent: they name nothing here). */
export async function productsById(tx: Tx, caller: Caller, ids: string[]): Promise<Map<string, Product>> {
  const wanted = [...new Set(ids.filter((id) => isId('prod', id)))];
  if (wanted.length === 0) return new Map();
  const rows = await tx
    .select()
    .from(products)
    .where(ownedBy(products, caller, inArray(products.id, wanted)));
  return new Map(rows.map((p) => [p.id, p]));
}
