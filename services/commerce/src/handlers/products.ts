// ProductService over Connect: decode, call the domain in a transaction, encode. Nothing else.
import { create } from '@bufbuild/protobuf';
import type { HandlerContext, ServiceImpl } from '@connectrpc/connect';
import { type Caller, callerOf } from '@mcs/kit/caller';
import type { Tx } from '@mcs/kit/db';
import { commerce, events } from '@mcs/proto';
import type { Deps } from '../deps.ts';
import {
  archiveProduct,
  createProduct,
  getProduct,
  listProducts,
  type Product,
  updateProduct,
} from '../domain/products.ts';
import { createOnce, emit, eventOf, toProtoProduct, write } from './proto.ts';

const num = (v: bigint | undefined) => (v === undefined ? undefined : Number(v));

export function productHandlers(deps: Deps): ServiceImpl<typeof commerce.ProductService> {
  /** An update or archive: product.updated when something changed. */
  const change = (
    ctx: HandlerContext,
    caller: Caller,
    run: (tx: Tx) => Promise<{ product: Product; changed: boolean }>,
  ) =>
    write(deps, ctx, caller, async (tx) => {
      const { product, changed } = await run(tx);
      if (changed) await emit(tx, caller, { type: events.EventType.PRODUCT_UPDATED, product });
      return toProtoProduct(product);
    });

  return {
    async createProduct(req, ctx) {
      const caller = callerOf(ctx);
      // No transaction: the product, its product.created and its idempotency key in one statement.
      return createOnce(
        deps,
        ctx,
        caller,
        toProtoProduct,
        (product: Product) => eventOf(caller, { type: events.EventType.PRODUCT_CREATED, product }),
        async (sidecar) => {
          const input = {
            name: req.name,
            description: req.description,
            price: num(req.price),
            currency: req.currency,
          };
          return (await createProduct(deps.db, caller, input, new Date(), sidecar)).product;
        },
      );
    },
    async getProduct(req, ctx) {
      return toProtoProduct(await getProduct(deps.db, callerOf(ctx), req.id));
    },
    async updateProduct(req, ctx) {
      const caller = callerOf(ctx);
      return change(ctx, caller, (tx) =>
        updateProduct(tx, caller, req.id, {
          name: req.name,
          description: req.description,
          price: num(req.price),
          active: req.active,
        }),
      );
    },
    async archiveProduct(req, ctx) {
      const caller = callerOf(ctx);
      return change(ctx, caller, (tx) => archiveProduct(tx, caller, req.id));
    },
    async listProducts(req, ctx) {
      const page = await listProducts(deps.db, callerOf(ctx), {
        limit: req.limit,
        startingAfter: req.startingAfter || undefined,
        active: req.active,
      });
      return create(commerce.ListProductsResponseSchema, {
        data: page.data.map(toProtoProduct),
        hasMore: page.hasMore,
      });
    },
  };
}
