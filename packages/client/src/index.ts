// @mcs/client: a typed client for the mcs REST API. Types come from the API's OpenAPI document
// (openapi-typescript), requests go through openapi-fetch, and this layer adds what a client
// needs: idempotent retries, typed errors, auto-pagination and webhook verification.
//
//   const mcs = new Mcs({ apiKey: process.env.MCS_API_KEY, baseUrl: 'http://127.0.0.1:8080' });
//   const order = await mcs.orders.create({ customer, currency: 'EUR', items });
//   for await (const o of mcs.orders.list()) console.log(o.id, o.total);
export { WebhookVerificationError } from '@mcs/webhook-verify';
export {
  type Conversation,
  constructEvent,
  type Event,
  Mcs,
  type McsOptions,
  type Message,
  type Order,
  type Payment,
  type Product,
  type RequestOptions,
  type WebhookDelivery,
  type WebhookEndpoint,
  type WebhookEvent,
} from './client.ts';
export {
  ApiError,
  AuthenticationError,
  ConnectionError,
  type ErrorCode,
  type ErrorType,
  InvalidRequestError,
  McsError,
  NotFoundError,
  PermissionError,
  RateLimitError,
} from './errors.ts';
export type { components, operations, paths } from './generated/schema.ts';
export { type ListPage, PagePromise } from './pagination.ts';
export { newIdempotencyKey } from './transport.ts';
