// The hand-written layer over the generated types and openapi-fetch: one client per API key and
// base URL, one method per operation grouped by resource, typed errors, auto-pagination.
import { type HeaderBag, type StandardOptions, verifyWebhook } from '@mcs/webhook-verify';
import createOpenApiClient from 'openapi-fetch';
import { errorFromResponse } from './errors.ts';
import type { components, operations, paths } from './generated/schema.ts';
import { type ListPage, PagePromise } from './pagination.ts';
import { createRetryingFetch, DEFAULT_RETRY, type RetryOptions } from './transport.ts';

type Schemas = components['schemas'];
export type Product = Schemas['Product'];
export type Order = Schemas['Order'];
export type Payment = Schemas['Payment'];
export type Conversation = Schemas['Conversation'];
export type Message = Schemas['Message'];
export type WebhookEndpoint = Schemas['WebhookEndpoint'];
export type WebhookDelivery = Schemas['WebhookDelivery'];
export type Event = Schemas['Event'];
/**
 * What a webhook endpoint receives, narrowed by its `type`:
 * `if (event.type === 'order.created') event.data.total`. Every `…Event` schema of the API
 * document, so a new event type (or `ping`, sent to `auto_recover` endpoints whatever they
 * subscribe to) is in the union as soon as the schema is generated.
 */
export type WebhookEvent = Schemas[Exclude<Extract<keyof Schemas, `${string}Event`>, 'Event'>];

type JsonBody<K extends keyof operations> =
  NonNullable<operations[K]['requestBody']> extends { content: { 'application/json': infer B } } ? B : never;
type Query<K extends keyof operations> = NonNullable<operations[K]['parameters']['query']>;
/** List parameters besides the cursor, which the iterator keeps. */
type ListParams<K extends keyof operations> = Omit<Query<K>, 'starting_after'> & { starting_after?: string };

export interface RequestOptions {
  /** Your own Idempotency-Key for a POST (default: a new random key, reused by its retries). */
  idempotencyKey?: string;
  signal?: AbortSignal;
}

export interface McsOptions {
  /** `sk_test_…`, `sk_live_…` (every route) or `pk_…` (reads of the product catalog only). */
  apiKey: string;
  /** Where the API is served, e.g. `http://127.0.0.1:8080` (default). */
  baseUrl?: string;
  /** Retries of a failed request (connection error, 409, 429, 5xx); 0 turns them off. Default 2. */
  maxRetries?: number;
  /** Time limit of one attempt in ms (default 60 000). */
  timeoutMs?: number;
  /** The fetch to use (default: the global one). */
  fetch?: (request: Request) => Promise<Response>;
  /** Called before each retry (logging, tests). */
  onRetry?: (info: {
    attempt: number;
    status: number | undefined;
    delayMs: number;
    request: Request;
  }) => void;
}

/** What openapi-fetch answers: data on 2xx, the parsed error body otherwise. */
interface Answer<T> {
  data?: T;
  error?: unknown;
  response: Response;
}

async function unwrap<T>(call: Promise<Answer<T>>): Promise<T> {
  const { data, error, response } = await call;
  if (response.ok && data !== undefined) return data;
  throw errorFromResponse(response, error);
}

const init = (opts: RequestOptions | undefined) => ({
  headers: opts?.idempotencyKey === undefined ? {} : { 'Idempotency-Key': opts.idempotencyKey },
  ...(opts?.signal ? { signal: opts.signal } : {}),
});

/**
 * Verifies a webhook delivery (both signatures, timestamp within 5 minutes) and returns its event,
 * typed by `type`. Pass the raw body exactly as received; throws WebhookVerificationError.
 */
export function constructEvent(
  rawBody: string | Uint8Array,
  headers: HeaderBag,
  secret: string,
  opts?: StandardOptions,
): WebhookEvent {
  const event: unknown = verifyWebhook(secret, rawBody, headers, opts);
  return event as WebhookEvent;
}

export class Mcs {
  /** The underlying openapi-fetch client, typed by the document (every route, raw answers). */
  readonly api: ReturnType<typeof createOpenApiClient<paths>>;

  constructor(options: McsOptions) {
    if (!options.apiKey) throw new TypeError('apiKey is required (sk_test_…, sk_live_… or pk_…)');
    const retry: RetryOptions = {
      ...DEFAULT_RETRY,
      ...(options.maxRetries === undefined ? {} : { maxRetries: options.maxRetries }),
      ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
    };
    const base = options.fetch ?? ((request: Request) => globalThis.fetch(request));
    this.api = createOpenApiClient<paths>({
      baseUrl: (options.baseUrl ?? 'http://127.0.0.1:8080').replace(/\/+$/, ''),
      headers: { Authorization: `Bearer ${options.apiKey}` },
      fetch: createRetryingFetch(base, retry, options.onRetry),
    });
  }

  /** Verifies a webhook delivery and returns its typed event (see the top-level `constructEvent`). */
  static constructEvent = constructEvent;

  private list<T extends { id: string }, K extends keyof operations>(
    fetchPage: (query: ListParams<K>) => Promise<ListPage<T>>,
    params: ListParams<K> | undefined,
  ): PagePromise<T> {
    return new PagePromise<T>((startingAfter) =>
      fetchPage({
        ...params,
        ...(startingAfter === undefined ? {} : { starting_after: startingAfter }),
      } as ListParams<K>),
    );
  }

  readonly products = {
    create: (body: JsonBody<'CreateProduct'>, opts?: RequestOptions) =>
      unwrap(this.api.POST('/v1/products', { body, ...init(opts) })),
    retrieve: (id: string, opts?: RequestOptions) =>
      unwrap(this.api.GET('/v1/products/{id}', { params: { path: { id } }, ...init(opts) })),
    update: (id: string, body: JsonBody<'UpdateProduct'>, opts?: RequestOptions) =>
      unwrap(this.api.POST('/v1/products/{id}', { params: { path: { id } }, body, ...init(opts) })),
    archive: (id: string, opts?: RequestOptions) =>
      unwrap(this.api.DELETE('/v1/products/{id}', { params: { path: { id } }, ...init(opts) })),
    list: (params?: ListParams<'ListProducts'>, opts?: RequestOptions) =>
      this.list<Product, 'ListProducts'>(
        (query) => unwrap(this.api.GET('/v1/products', { params: { query }, ...init(opts) })),
        params,
      ),
  };

  readonly orders = {
    create: (body: JsonBody<'CreateOrder'>, opts?: RequestOptions) =>
      unwrap(this.api.POST('/v1/orders', { body, ...init(opts) })),
    retrieve: (id: string, opts?: RequestOptions) =>
      unwrap(this.api.GET('/v1/orders/{id}', { params: { path: { id } }, ...init(opts) })),
    cancel: (id: string, opts?: RequestOptions) =>
      unwrap(this.api.POST('/v1/orders/{id}/cancel', { params: { path: { id } }, ...init(opts) })),
    fulfill: (id: string, opts?: RequestOptions) =>
      unwrap(this.api.POST('/v1/orders/{id}/fulfill', { params: { path: { id } }, ...init(opts) })),
    refund: (id: string, opts?: RequestOptions) =>
      unwrap(this.api.POST('/v1/orders/{id}/refund', { params: { path: { id } }, ...init(opts) })),
    list: (params?: ListParams<'ListOrders'>, opts?: RequestOptions) =>
      this.list<Order, 'ListOrders'>(
        (query) => unwrap(this.api.GET('/v1/orders', { params: { query }, ...init(opts) })),
        params,
      ),
  };

  readonly payments = {
    create: (body: JsonBody<'CreatePayment'>, opts?: RequestOptions) =>
      unwrap(this.api.POST('/v1/payments', { body, ...init(opts) })),
    retrieve: (id: string, opts?: RequestOptions) =>
      unwrap(this.api.GET('/v1/payments/{id}', { params: { path: { id } }, ...init(opts) })),
    list: (params?: ListParams<'ListPayments'>, opts?: RequestOptions) =>
      this.list<Payment, 'ListPayments'>(
        (query) => unwrap(this.api.GET('/v1/payments', { params: { query }, ...init(opts) })),
        params,
      ),
  };

  readonly conversations = {
    create: (body: JsonBody<'CreateConversation'>, opts?: RequestOptions) =>
      unwrap(this.api.POST('/v1/conversations', { body, ...init(opts) })),
    retrieve: (id: string, opts?: RequestOptions) =>
      unwrap(this.api.GET('/v1/conversations/{id}', { params: { path: { id } }, ...init(opts) })),
    close: (id: string, opts?: RequestOptions) =>
      unwrap(this.api.POST('/v1/conversations/{id}/close', { params: { path: { id } }, ...init(opts) })),
    list: (params?: ListParams<'ListConversations'>, opts?: RequestOptions) =>
      this.list<Conversation, 'ListConversations'>(
        (query) => unwrap(this.api.GET('/v1/conversations', { params: { query }, ...init(opts) })),
        params,
      ),
  };

  readonly messages = {
    send: (conversation: string, body: JsonBody<'SendMessage'>, opts?: RequestOptions) =>
      unwrap(
        this.api.POST('/v1/conversations/{conversation}/messages', {
          params: { path: { conversation } },
          body,
          ...init(opts),
        }),
      ),
    retrieve: (id: string, opts?: RequestOptions) =>
      unwrap(this.api.GET('/v1/messages/{id}', { params: { path: { id } }, ...init(opts) })),
    list: (conversation: string, params?: ListParams<'ListMessages'>, opts?: RequestOptions) =>
      this.list<Message, 'ListMessages'>(
        (query) =>
          unwrap(
            this.api.GET('/v1/conversations/{conversation}/messages', {
              params: { path: { conversation }, query },
              ...init(opts),
            }),
          ),
        params,
      ),
  };

  readonly webhooks = {
    create: (body: JsonBody<'CreateWebhookEndpoint'>, opts?: RequestOptions) =>
      unwrap(this.api.POST('/v1/webhooks', { body, ...init(opts) })),
    retrieve: (id: string, opts?: RequestOptions) =>
      unwrap(this.api.GET('/v1/webhooks/{id}', { params: { path: { id } }, ...init(opts) })),
    update: (id: string, body: JsonBody<'UpdateWebhookEndpoint'>, opts?: RequestOptions) =>
      unwrap(this.api.POST('/v1/webhooks/{id}', { params: { path: { id } }, body, ...init(opts) })),
    del: (id: string, opts?: RequestOptions) =>
      unwrap(this.api.DELETE('/v1/webhooks/{id}', { params: { path: { id } }, ...init(opts) })),
    enable: (id: string, opts?: RequestOptions) =>
      unwrap(this.api.POST('/v1/webhooks/{id}/enable', { params: { path: { id } }, ...init(opts) })),
    rotateSecret: (id: string, opts?: RequestOptions) =>
      unwrap(this.api.POST('/v1/webhooks/{id}/rotate_secret', { params: { path: { id } }, ...init(opts) })),
    sendTest: (id: string, body?: JsonBody<'SendTestWebhook'>, opts?: RequestOptions) =>
      unwrap(this.api.POST('/v1/webhooks/{id}/test', { params: { path: { id } }, body, ...init(opts) })),
    list: (params?: ListParams<'ListWebhookEndpoints'>, opts?: RequestOptions) =>
      this.list<WebhookEndpoint, 'ListWebhookEndpoints'>(
        (query) => unwrap(this.api.GET('/v1/webhooks', { params: { query }, ...init(opts) })),
        params,
      ),
    deliveries: (id: string, params?: ListParams<'ListWebhookDeliveries'>, opts?: RequestOptions) =>
      this.list<WebhookDelivery, 'ListWebhookDeliveries'>(
        (query) =>
          unwrap(
            this.api.GET('/v1/webhooks/{id}/deliveries', { params: { path: { id }, query }, ...init(opts) }),
          ),
        params,
      ),
    retryDelivery: (id: string, delivery: string, opts?: RequestOptions) =>
      unwrap(
        this.api.POST('/v1/webhooks/{id}/deliveries/{delivery}/retry', {
          params: { path: { id, delivery } },
          ...init(opts),
        }),
      ),
    /** Re-enables the endpoint if needed and sends it, in the background, what it missed since `since`. */
    recover: (id: string, body: JsonBody<'RecoverWebhookEndpoint'>, opts?: RequestOptions) =>
      unwrap(this.api.POST('/v1/webhooks/{id}/recover', { params: { path: { id } }, body, ...init(opts) })),
    retrieveRecovery: (id: string, recovery: string, opts?: RequestOptions) =>
      unwrap(
        this.api.GET('/v1/webhooks/{id}/recoveries/{recovery}', {
          params: { path: { id, recovery } },
          ...init(opts),
        }),
      ),
    /** Verifies a delivery's signatures and returns its typed event. */
    constructEvent,
  };

  readonly events = {
    retrieve: (id: string, opts?: RequestOptions) =>
      unwrap(this.api.GET('/v1/events/{id}', { params: { path: { id } }, ...init(opts) })),
    list: (params?: ListParams<'ListEvents'>, opts?: RequestOptions) =>
      this.list<Event, 'ListEvents'>(
        (query) => unwrap(this.api.GET('/v1/events', { params: { query }, ...init(opts) })),
        params,
      ),
    /** Delivers the event again: a new delivery to each subscribed endpoint, or to `endpoint`. */
    resend: (id: string, body?: JsonBody<'ResendEvent'>, opts?: RequestOptions) =>
      unwrap(this.api.POST('/v1/events/{id}/resend', { params: { path: { id } }, body, ...init(opts) })),
  };

  /** Bulk resends: the events of a time range (and type) delivered again, in the background. */
  readonly eventResends = {
    create: (body: JsonBody<'ResendEvents'>, opts?: RequestOptions) =>
      unwrap(this.api.POST('/v1/event_resends', { body, ...init(opts) })),
    retrieve: (id: string, opts?: RequestOptions) =>
      unwrap(this.api.GET('/v1/event_resends/{id}', { params: { path: { id } }, ...init(opts) })),
  };

  /** The account's own retry schedule (test mode). */
  readonly webhookSettings = {
    retrieve: (opts?: RequestOptions) => unwrap(this.api.GET('/v1/webhook_settings', { ...init(opts) })),
    update: (body: JsonBody<'UpdateWebhookSettings'>, opts?: RequestOptions) =>
      unwrap(this.api.POST('/v1/webhook_settings', { body, ...init(opts) })),
  };

  /** Simulations of the outside world; test-mode keys only. */
  readonly testHelpers = {
    payments: {
      complete: (id: string, opts?: RequestOptions) =>
        unwrap(
          this.api.POST('/v1/test_helpers/payments/{id}/complete', {
            params: { path: { id } },
            ...init(opts),
          }),
        ),
      fail: (id: string, opts?: RequestOptions) =>
        unwrap(
          this.api.POST('/v1/test_helpers/payments/{id}/fail', { params: { path: { id } }, ...init(opts) }),
        ),
    },
    conversations: {
      receiveMessage: (conversation: string, body: JsonBody<'CreateInboundMessage'>, opts?: RequestOptions) =>
        unwrap(
          this.api.POST('/v1/test_helpers/conversations/{conversation}/inbound_messages', {
            params: { path: { conversation } },
            body,
            ...init(opts),
          }),
        ),
    },
  };
}
