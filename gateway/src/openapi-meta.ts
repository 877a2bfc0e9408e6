// What the proto descriptors cannot say about the public API and the OpenAPI document needs:
// words for people (summaries, descriptions, tags), the input rules the services enforce
// (lengths, patterns, ranges) and example values. Keyed by proto names, so a new RPC or field
// works without an entry here (it gets a summary made from its name); add one to describe it.

/** Rules and words for one field, keyed `Message.field` (the proto message's own name). */
export interface FieldMeta {
  description?: string;
  /** The field holds the id of this kind of resource (its prefix): pattern and example follow. */
  idOf?: string;
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  minItems?: number;
  maxItems?: number;
  format?: string;
  /** Items are event types (or "*"): the enum of every type. */
  eventTypes?: boolean;
  example?: unknown;
  default?: unknown;
  /**
   * Required although the proto does not flag it: the service checks it itself, after finding
   * the resource of the path (so an unknown one is 404 whatever the body).
   */
  required?: boolean;
}

export const E164 = '^\\+[1-9][0-9]{7,14}$';
export const CURRENCY = '^[A-Z]{3}$';
/** Ids: prefix, `_`, 26 characters of lower-case Crockford base32 (kit/ids.ts). */
export const idPattern = (prefix: string) => `^${prefix}_[0-9a-hjkmnp-tv-z]{26}$`;
export const idExample = (prefix: string) => `${prefix}_01jdq7kx3m5w8n2c4v6b9t0r1s`;
export const TIMESTAMP_EXAMPLE = '2026-01-15T09:30:00.000Z';
/** Amounts are integers in the currency's minor unit, at most this (commerce/domain/products.ts). */
const MAX_AMOUNT = 99_999_999_999;

const money = (description: string, example: number): FieldMeta => ({
  description: `${description} In the currency's minor unit (cents for EUR).`,
  minimum: 0,
  maximum: MAX_AMOUNT,
  example,
});
const currency: FieldMeta = {
  description: 'ISO 4217 currency code, three upper-case letters.',
  pattern: CURRENCY,
  minLength: 3,
  maxLength: 3,
  example: 'EUR',
};
const livemode: FieldMeta = {
  description: 'true for live-mode data (sk_live_ keys), false for test mode.',
  example: false,
};
const createdAt: FieldMeta = { description: 'When it was created (ISO 8601, UTC).' };
const updatedAt: FieldMeta = { description: 'When it last changed (ISO 8601, UTC).' };
const productName: FieldMeta = {
  description: 'Shown to customers.',
  minLength: 1,
  maxLength: 200,
  example: 'Tea',
};
const productDescription: FieldMeta = {
  description: 'Free text, up to 1000 characters.',
  maxLength: 1000,
  example: 'Loose-leaf green tea, 100 g.',
};
const text: FieldMeta = {
  description: '1 to 4096 characters (Unicode code points), not only white space.',
  minLength: 1,
  maxLength: 4096,
  example: 'Hello! Your order is on its way.',
};
const endpointDescription: FieldMeta = {
  description: 'A label for the endpoint, up to 500 characters.',
  maxLength: 500,
  example: 'Order sync',
};
const disableOnGone: FieldMeta = {
  description:
    'true (default): a 410 Gone answer disables the endpoint at once (disabled_reason gone, one e-mail, no more retries); false: a 410 is retried like any other failure.',
  example: true,
};
const maxRate: FieldMeta = {
  description:
    'At most this many deliveries per second are started to the endpoint (one limit across all webhooks replicas); other endpoints are not slowed.',
  minimum: 1,
  maximum: 10_000,
  example: 50,
};
const endpointUrl: FieldMeta = {
  description:
    'Absolute URL receiving the deliveries: https:// (http:// only where the server allows it), without credentials or fragment, on a public host; or "mcs-listen:" for an endpoint that `mcs listen` streams (test mode).',
  pattern: '^(https?://.+|mcs-listen:)$',
  maxLength: 2048,
  example: 'https://example.com/webhooks',
};
const endpointEvents: FieldMeta = {
  description:
    'Event types to send, or "*" for every resource event type (operational webhook_endpoint.* types must be listed explicitly).',
  eventTypes: true,
  minItems: 1,
  example: ['order.created', 'order.updated'],
};

export const fieldMeta: Record<string, FieldMeta> = {
  'Customer.name': {
    description: "The customer's name.",
    minLength: 1,
    maxLength: 200,
    example: 'Ada Lovelace',
  },
  'Customer.phone': {
    description: 'E.164: "+" then 8 to 15 digits.',
    pattern: E164,
    example: '+4915112345678',
  },

  'Product.name': productName,
  'Product.description': productDescription,
  'Product.price': money('Unit price.', 450),
  'Product.currency': currency,
  'Product.active': {
    description: 'false once archived: an archived product stays readable but cannot be ordered.',
  },
  'Product.livemode': livemode,
  'Product.created_at': createdAt,
  'Product.updated_at': updatedAt,
  'CreateProductRequest.name': productName,
  'CreateProductRequest.description': productDescription,
  'CreateProductRequest.price': money('Unit price.', 450),
  'CreateProductRequest.currency': currency,
  'UpdateProductRequest.name': productName,
  'UpdateProductRequest.description': productDescription,
  'UpdateProductRequest.price': money('Unit price.', 500),
  'UpdateProductRequest.active': { description: 'false archives the product, true restores it.' },
  'ListProductsRequest.active': { description: 'Only active (true) or only archived (false) products.' },

  'Order.status': { description: 'pending → paid → fulfilled, pending → cancelled, paid → refunded.' },
  'Order.customer': { description: 'Who ordered.' },
  'Order.total': money('Sum of the items’ amounts.', 900),
  'Order.currency': currency,
  'Order.items': { description: 'The order lines, as priced at creation.' },
  'Order.livemode': livemode,
  'Order.created_at': createdAt,
  'Order.updated_at': updatedAt,
  'OrderItem.product': {
    description: 'The product this line was priced from; null for a free-form line.',
    idOf: 'prod',
  },
  'OrderItem.name': { description: 'What was ordered.', example: 'Tea' },
  'OrderItem.unit_amount': money('Price of one unit.', 450),
  'OrderItem.quantity': { description: 'How many units.', minimum: 1, maximum: 1_000_000, example: 2 },
  'OrderItem.amount': money('unit_amount × quantity.', 900),
  'OrderItemInput.product': {
    description:
      'Price the line from this active product of the same currency (then give neither name nor unit_amount).',
    idOf: 'prod',
  },
  'OrderItemInput.name': {
    description: 'Name of a free-form line (without product).',
    minLength: 1,
    maxLength: 200,
    example: 'Tea',
  },
  'OrderItemInput.unit_amount': money('Price of one unit of a free-form line (without product).', 450),
  'OrderItemInput.quantity': { description: 'How many units.', minimum: 1, maximum: 1_000_000, example: 2 },
  'CreateOrderRequest.currency': currency,
  'CreateOrderRequest.items': { description: '1 to 100 lines.', minItems: 1, maxItems: 100 },
  'ListOrdersRequest.status': { description: 'Only orders in this status.' },

  'Payment.order': { description: 'The order this payment pays.', idOf: 'ord' },
  'Payment.amount': money("Always the order's total.", 900),
  'Payment.currency': currency,
  'Payment.status': { description: 'pending until the provider answers, then succeeded or failed.' },
  'Payment.failure_message': {
    description:
      'Why the payment failed; null unless status is failed. Besides the provider’s reasons: its order was cancelled, or paid by another payment, before it settled.',
  },
  'Payment.livemode': livemode,
  'Payment.created_at': createdAt,
  'Payment.updated_at': updatedAt,
  'CreatePaymentRequest.order': { description: 'A pending order of this account and mode.', idOf: 'ord' },
  'CreatePaymentRequest.amount': money("Defaults to the order's total; when given it must equal it.", 900),
  'ListPaymentsRequest.order': { description: 'Only the payments of this order.', idOf: 'ord' },
  'FailPaymentRequest.failure_message': {
    description: 'Defaults to a generic decline message. Up to 500 characters.',
    maxLength: 500,
    example: 'Card declined.',
  },

  'Conversation.customer': { description: 'The customer of the thread.' },
  'Conversation.status': { description: 'open, or closed (then it takes no more messages).' },
  'Conversation.closed_at': { description: 'When it was closed; null while open.' },
  'Conversation.livemode': livemode,
  'Conversation.created_at': createdAt,
  'Conversation.updated_at': updatedAt,
  'ListConversationsRequest.status': { description: 'Only conversations in this status.' },

  'Message.conversation': { description: 'The conversation it belongs to.', idOf: 'conv' },
  'Message.direction': {
    description: 'inbound (from the customer) or outbound (to the customer).',
    example: 'outbound',
  },
  'Message.status': { description: 'sent (outbound, accepted by the channel) or received (inbound).' },
  'Message.text': { description: 'The text, exactly as given.', example: 'Hello! Your order is on its way.' },
  'Message.livemode': livemode,
  'Message.created_at': createdAt,
  'SendMessageRequest.text': { ...text, required: true },
  'CreateInboundMessageRequest.text': { ...text, example: 'Where is my order?', required: true },

  'WebhookEndpoint.url': endpointUrl,
  'WebhookEndpoint.events': endpointEvents,
  'WebhookEndpoint.description': endpointDescription,
  'WebhookEndpoint.status': {
    description:
      'enabled; unhealthy after the last retry of a delivery failed; disabled when turned off or when the receiver answered 410 Gone (see disabled_reason).',
  },
  'WebhookEndpoint.disabled_reason': {
    description:
      'While disabled: gone (the receiver answered 410 Gone) or manual (disabled through the API or dashboard); null otherwise. POST /v1/webhooks/{id}/enable re-enables either.',
  },
  'WebhookEndpoint.disable_on_gone': disableOnGone,
  'WebhookEndpoint.max_rate': { ...maxRate, description: `${maxRate.description} null: unlimited.` },
  'WebhookEndpoint.failing_since': {
    description:
      'When attempts to it started failing without a success since; null while healthy. One warning e-mail goes out per failing stretch, once it has lasted WEBHOOK_WARN_AFTER (1 h) or a delivery spent half its retries.',
  },
  'WebhookEndpoint.last_error': { description: 'The error of the last failed attempt; null while healthy.' },
  'WebhookEndpoint.secret': {
    description:
      'The signing secret (whsec_…): only in the answer that creates the endpoint or rotates its secret, null otherwise.',
    pattern: '^whsec_[A-Za-z0-9+/]{32,}={0,2}$',
    example: 'whsec_c2VjcmV0LXNpZ25pbmcta2V5LWZvci1kb2NzLW9ubHk=',
  },
  'WebhookEndpoint.livemode': livemode,
  'WebhookEndpoint.created_at': createdAt,
  'DeletedWebhookEndpoint.deleted': { description: 'Always true.', example: true },
  'CreateWebhookEndpointRequest.url': endpointUrl,
  'CreateWebhookEndpointRequest.events': endpointEvents,
  'CreateWebhookEndpointRequest.description': endpointDescription,
  'CreateWebhookEndpointRequest.disable_on_gone': { ...disableOnGone, default: true },
  'CreateWebhookEndpointRequest.max_rate': {
    ...maxRate,
    description: `${maxRate.description} Omit for unlimited.`,
  },
  'UpdateWebhookEndpointRequest.disable_on_gone': disableOnGone,
  'UpdateWebhookEndpointRequest.max_rate': {
    ...maxRate,
    minimum: 0,
    description: `${maxRate.description} 0 removes the limit.`,
  },
  'UpdateWebhookEndpointRequest.url': endpointUrl,
  // Not empty: an update refuses [] (rest/decode.ts), which would otherwise read as "unchanged".
  'UpdateWebhookEndpointRequest.events': endpointEvents,
  'UpdateWebhookEndpointRequest.description': {
    ...endpointDescription,
    description: 'A label for the endpoint, up to 500 characters; an empty string clears it.',
  },
  'UpdateWebhookEndpointRequest.disabled': {
    description:
      'true: status becomes disabled with disabled_reason manual (nothing is sent, new events are not recorded for it); false: enabled again.',
  },
  'ListWebhookDeliveriesRequest.status': { description: 'Only deliveries in this status.' },
  'RetryWebhookDeliveryRequest.delivery': { description: 'The delivery to send again.', idOf: 'dlv' },
  'SendTestWebhookRequest.type': {
    description:
      'Event type of the test event; by default the endpoint’s first subscribed type (order.created for "*").',
  },

  'WebhookDelivery.webhook_endpoint': { description: 'The endpoint it goes to.', idOf: 'we' },
  'WebhookDelivery.event': { description: 'The event it carries.', idOf: 'evt' },
  'WebhookDelivery.event_type': { description: 'The type of that event.', example: 'order.created' },
  'WebhookDelivery.status': {
    description:
      'pending (waiting for its next attempt), succeeded (a 2xx answer), failed (every attempt failed) or skipped (the endpoint was unhealthy, disabled or deleted).',
    example: 'succeeded',
  },
  'WebhookDelivery.attempt_count': { description: 'Attempts made so far.', minimum: 0, example: 1 },
  'WebhookDelivery.next_attempt_at': { description: 'When the next attempt is due; null unless pending.' },
  'WebhookDelivery.attempts': { description: 'Every HTTP attempt, oldest first.' },
  'WebhookDelivery.livemode': livemode,
  'WebhookDelivery.created_at': createdAt,
  'WebhookAttempt.number': {
    description: '1 for the first attempt, counting on across resends.',
    minimum: 1,
    example: 1,
  },
  'WebhookAttempt.at': { description: 'When the attempt started.' },
  'WebhookAttempt.status_code': {
    description: "The receiver's HTTP status; null when no answer came (time-out, connection error).",
    example: 200,
  },
  'WebhookAttempt.error': { description: 'Why the attempt failed; null when it succeeded.' },
  'WebhookAttempt.latency_ms': {
    description: 'Time to the answer, in milliseconds.',
    minimum: 0,
    example: 42,
  },
  'WebhookAttempt.response_excerpt': {
    description: "The start of the receiver's answer body.",
    example: 'ok',
  },

  'Event.type': {
    description: 'What happened (see the webhooks section for each type).',
    example: 'order.created',
  },
  'Event.created_at': { description: 'When it happened (ISO 8601, UTC).' },
  'Event.data': { description: 'The resource concerned, exactly as the REST API renders it.' },
  'Event.livemode': livemode,
  'ListEventsRequest.type': { description: 'Only events of this type.' },
  'WebhookSettings.retry_schedule': {
    description:
      'The delays of the retries after a failed first attempt, in force for this account and mode. A delivery makes at most 1 + this many attempts; the failure of the last turns the endpoint unhealthy.',
    example: ['30s', '5m', '30m', '2h', '24h'],
  },
  'WebhookSettings.custom': {
    description: "true: the account's own schedule (test mode only); false: the service's.",
    example: false,
  },
  'WebhookSettings.default_retry_schedule': {
    description:
      "The service's schedule (WEBHOOK_RETRY_SCHEDULE): what live mode uses, and what reset returns to.",
    example: ['30s', '5m', '30m', '2h', '24h'],
  },
  'WebhookSettings.livemode': livemode,
  'UpdateWebhookSettingsRequest.retry_schedule': {
    description: '1 to 5 delays, each from 1s to 24h (a number and one of ms, s, m, h). Test mode only.',
    minItems: 1,
    maxItems: 5,
    example: ['5s', '30s'],
  },
  'UpdateWebhookSettingsRequest.reset': {
    description: "true: back to the service's schedule (instead of retry_schedule).",
  },

  'WebhookEndpoint.ordering': {
    description:
      'none (default, the fastest): deliveries go out as soon as they can. per_resource: the events of one resource (the object in data, e.g. one order) are delivered one at a time, across replicas, in the order the changes committed; a delivery waiting for a retry holds back the later events of its resource only. An earlier event that reaches the service late is still sent first: each event carries the version of its resource, and a later one waits for the version before it, for WEBHOOK_ORDERING_WAIT (30 s) at most. Operational events, test events and resends are not ordered.',
  },
  'WebhookEndpoint.auto_recover': {
    description:
      'true: while unhealthy, the endpoint gets a probe (a signed ping event) on a doubling backoff; a 2xx answer re-enables it and replays its backlog as a recovery.',
    example: false,
  },
  'CreateWebhookEndpointRequest.ordering': {
    description: 'none (default) or per_resource.',
    default: 'none',
  },
  'CreateWebhookEndpointRequest.auto_recover': {
    description: 'Probe the endpoint while unhealthy and recover it on a 2xx answer.',
    default: false,
  },
  'UpdateWebhookEndpointRequest.ordering': {
    description: 'none or per_resource; applies to deliveries recorded from now on.',
  },
  'UpdateWebhookEndpointRequest.auto_recover': {
    description: 'true while unhealthy: the first probe is due at once.',
  },
  'RecoverWebhookEndpointRequest.since': {
    required: true,
    description:
      'Required. Events since this time (ISO 8601) that the endpoint did not receive are sent to it: failed, skipped, or arrived while it was disabled.',
    example: TIMESTAMP_EXAMPLE,
  },
  'GetWebhookRecoveryRequest.recovery': { description: 'The recovery.', idOf: 'rcv' },
  'WebhookRecovery.webhook_endpoint': { description: 'The endpoint recovered.', idOf: 'we' },
  'WebhookRecovery.since': {
    description:
      'Events from this time until the recovery began that the endpoint did not receive are sent to it.',
  },
  'WebhookRecovery.status': {
    description:
      'running (queueing deliveries), completed (every one queued; see deliveries for how they are doing) or canceled (the endpoint was deleted, disabled or turned unhealthy again).',
  },
  'WebhookRecovery.total': {
    description: 'Events the endpoint had not received when it began (one delivery each).',
    minimum: 0,
  },
  'WebhookRecovery.queued': {
    description: 'Deliveries queued so far (WEBHOOK_REPLAY_RATE per second).',
    minimum: 0,
  },
  'WebhookRecovery.deliveries': { description: 'The queued deliveries by their status now.' },
  'WebhookRecovery.livemode': livemode,
  'WebhookRecovery.created_at': createdAt,
  'WebhookRecovery.completed_at': { description: 'When it completed or was canceled; null while running.' },
  'ReplayCounts.pending': { minimum: 0 },
  'ReplayCounts.succeeded': { minimum: 0 },
  'ReplayCounts.failed': { minimum: 0 },
  'ReplayCounts.skipped': { minimum: 0 },
  'ResendEventRequest.endpoint': {
    description:
      'Only to this endpoint (enabled, subscribed to the event’s type); omit for every enabled endpoint subscribed to it.',
    idOf: 'we',
  },
  'ResendEventsRequest.since': { description: 'Events created at or after this time (ISO 8601).' },
  'ResendEventsRequest.until': { description: 'Events created before this time; default now.' },
  'ResendEventsRequest.type': { description: 'Only events of this type.' },
  'ResendEventsRequest.endpoint': { description: 'Only to this endpoint.', idOf: 'we' },
  'GetEventResendRequest.id': { description: 'The bulk resend.', idOf: 'ers' },
  'EventResend.since': { description: 'Events created at or after this time.' },
  'EventResend.until': { description: 'Events created before this time.' },
  'EventResend.type': { description: 'Only events of this type; null: every type.' },
  'EventResend.webhook_endpoint': {
    description: 'Only to this endpoint; null: every subscriber.',
    idOf: 'we',
  },
  'EventResend.status': {
    description: 'running, completed or canceled (its endpoint was disabled or deleted).',
  },
  'EventResend.total': { description: 'Events in the range when it began.', minimum: 0 },
  'EventResend.queued': {
    description: 'New deliveries queued so far (WEBHOOK_REPLAY_RATE per second).',
    minimum: 0,
  },
  'EventResend.deliveries': { description: 'The new deliveries by their status now.' },
  'EventResend.livemode': livemode,
  'EventResend.created_at': createdAt,
  'EventResend.completed_at': { description: 'When it completed or was canceled; null while running.' },
};

export interface OperationMeta {
  summary: string;
  description?: string;
  /** When the example made from the schema's field examples would not be a valid request. */
  requestExample?: unknown;
}

/** Keyed by RPC name. */
export const operationMeta: Record<string, OperationMeta> = {
  CreateProduct: {
    summary: 'Create a product',
    description: 'Adds an active product to the catalog (product.created).',
  },
  GetProduct: { summary: 'Retrieve a product', description: 'Readable with publishable keys too.' },
  UpdateProduct: {
    summary: 'Update a product',
    description: 'Only the fields given change; the currency is fixed at creation (product.updated).',
  },
  ListProducts: {
    summary: 'List products',
    description: 'Newest first. Readable with publishable keys too.',
  },
  ArchiveProduct: {
    summary: 'Archive a product',
    description: 'A soft delete: the product becomes inactive (product.updated) and is returned.',
  },
  CreateOrder: {
    summary: 'Create an order',
    description:
      'A pending order whose total is the sum of its lines (order.created). Each line names a product, or gives its own name and unit_amount.',
    requestExample: {
      customer: { name: 'Ada Lovelace', phone: '+4915112345678' },
      currency: 'EUR',
      items: [
        { product: 'prod_01jdq7kx3m5w8n2c4v6b9t0r1s', quantity: 1 },
        { name: 'Gift wrapping', unit_amount: 250, quantity: 1 },
      ],
    },
  },
  GetOrder: { summary: 'Retrieve an order' },
  ListOrders: { summary: 'List orders', description: 'Newest first.' },
  CancelOrder: {
    summary: 'Cancel an order',
    description:
      'pending → cancelled (order.updated). The order’s pending payments can no longer settle: each fails (payment.failed).',
  },
  FulfillOrder: { summary: 'Fulfill an order', description: 'paid → fulfilled (order.updated).' },
  RefundOrder: { summary: 'Refund an order', description: 'paid → refunded (order.updated).' },
  CreatePayment: {
    summary: 'Create a payment',
    description: 'Opens a pending payment of a pending order with the payment provider. Emits no event.',
  },
  GetPayment: { summary: 'Retrieve a payment' },
  ListPayments: { summary: 'List payments', description: 'Newest first.' },
  CompletePayment: {
    summary: 'Complete a payment (test helper)',
    description:
      'Simulates the provider confirming the payment: pending → succeeded (payment.completed), and its order pending → paid (order.updated); the order’s other pending payments fail (payment.failed). Test-mode keys only.',
  },
  FailPayment: {
    summary: 'Fail a payment (test helper)',
    description:
      'Simulates a declined payment: pending → failed (payment.failed); the order stays pending. Test-mode keys only.',
  },
  CreateConversation: {
    summary: 'Start a conversation',
    description:
      "Starts a conversation with a customer (conversation.created), or returns the customer's open one (then no event).",
  },
  GetConversation: { summary: 'Retrieve a conversation' },
  ListConversations: { summary: 'List conversations', description: 'Newest first.' },
  CloseConversation: {
    summary: 'Close a conversation',
    description:
      'open → closed. It takes no more messages; the next conversation with the customer is a new one.',
  },
  SendMessage: {
    summary: 'Send a message',
    description: 'Sends text to the customer of an open conversation through the channel (message.sent).',
  },
  ListMessages: { summary: 'List the messages of a conversation', description: 'Newest first.' },
  GetMessage: { summary: 'Retrieve a message' },
  CreateInboundMessage: {
    summary: 'Receive a message (test helper)',
    description:
      'Simulates the customer writing in an open conversation (message.received). Test-mode keys only.',
  },
  CreateWebhookEndpoint: {
    summary: 'Create a webhook endpoint',
    description:
      'Subscribes a URL to event types. The answer holds the signing secret; it is never shown again (rotate it to get a new one).',
  },
  GetWebhookEndpoint: {
    summary: 'Retrieve a webhook endpoint',
    description: 'With its health (failing_since, last_error).',
  },
  ListWebhookEndpoints: { summary: 'List webhook endpoints', description: 'Newest first.' },
  UpdateWebhookEndpoint: {
    summary: 'Update a webhook endpoint',
    description: 'Only the fields given change. disabled turns deliveries off and on.',
    requestExample: {
      events: ['order.created', 'order.updated', 'payment.completed'],
      description: 'Order sync',
    },
  },
  DeleteWebhookEndpoint: {
    summary: 'Delete a webhook endpoint',
    description: 'Nothing more is sent to it; its pending deliveries are skipped.',
  },
  EnableWebhookEndpoint: {
    summary: 'Re-enable a webhook endpoint',
    description:
      'Re-enables an unhealthy or disabled endpoint (the API twin of Settings → API): new events flow to it again; deliveries skipped meanwhile stay skipped and can be resent.',
  },
  RotateWebhookEndpointSecret: {
    summary: 'Rotate the signing secret',
    description:
      'A new signing secret, returned in this answer only. Attempts prepared from then on are signed with it; one already prepared (at most WEBHOOK_TIMEOUT + WEBHOOK_LEASE_MARGIN, 15 s by default) may still carry the old signature.',
  },
  ListWebhookDeliveries: {
    summary: 'List the deliveries to an endpoint',
    description: 'Newest first, each with its attempts.',
  },
  RetryWebhookDelivery: {
    summary: 'Retry a delivery',
    description:
      'Sends a delivery again now. A failed or skipped one starts the retry schedule over. A pending one whose attempt is in flight (or due within the attempt time-out) is answered as it is: a second attempt beside it would reach the receiver twice at once.',
  },
  SendTestWebhook: {
    summary: 'Send a test event',
    description:
      "Sends a test event with sample data to this endpoint only. Test events are not part of the account's event log.",
  },
  ListEvents: {
    summary: 'List events',
    description: 'The account’s events, newest first, exactly as deliveries carry them.',
  },
  GetEvent: { summary: 'Retrieve an event' },
  GetWebhookSettings: {
    summary: 'Retrieve the webhook settings',
    description: "The retry schedule in force for the key's account and mode.",
  },
  UpdateWebhookSettings: {
    summary: 'Update the webhook settings',
    description:
      "Test mode only: a shorter retry schedule of the account's own for development (retry_schedule), or back to the service's (reset: true). It applies from the next failure of each delivery.",
    // Resetting leaves an account's schedule as it was; a new one is shown on the field.
    requestExample: { reset: true },
  },
  RecoverWebhookEndpoint: {
    summary: 'Recover an endpoint',
    description:
      'Re-enables the endpoint if needed and sends it, in the background, every event of the account (as GET /v1/events lists them) from `since` until now that it did not receive. A delivery that failed or was skipped is sent again (it starts the retry schedule over; no delivery is added). An event that arrived while the endpoint was disabled, and so has no delivery to it, gets one if the endpoint subscribes to its type now: `*` covers the resource event types only, an operational type (webhook_endpoint.*) must be named, and the event about the endpoint itself is never sent to it, nor an event from before the endpoint was created. An event with a delivery to the endpoint pending or succeeded (a resend included) is not sent again, so recovering twice sends nothing twice. The answer, and GET of it, shows progress.',
  },
  GetWebhookRecovery: { summary: 'Retrieve a recovery', description: 'Its status and progress counts.' },
  ResendEvent: {
    summary: 'Resend an event',
    description:
      'Delivers the event again: a new delivery to each enabled endpoint subscribed to its type, or to the one named.',
  },
  ResendEvents: {
    summary: 'Resend events in bulk',
    description:
      'Delivers the events of a time range (and type) again, in the background, WEBHOOK_REPLAY_RATE deliveries a second. One runs at a time per account and mode: another answers 429 rate_limit_error with Retry-After.',
    // since and until share one example time, and until must be later.
    requestExample: { since: '2026-01-15T09:00:00Z', until: '2026-01-15T10:00:00Z', type: 'order.created' },
  },
  GetEventResend: { summary: 'Retrieve a bulk resend', description: 'Its status and progress counts.' },
};

/**
 * Error codes only some operations answer, by RPC name (beyond the transport's: authentication,
 * permissions, rate limits, idempotency, unknown parameters, wrong types). A catalog code named
 * in no entry here is listed for every operation of its status.
 */
export const operationErrors: Record<string, string[]> = {
  CreateProduct: ['invalid_currency'],
  CreateOrder: ['invalid_phone', 'invalid_currency'],
  CancelOrder: ['invalid_state_transition'],
  FulfillOrder: ['invalid_state_transition'],
  RefundOrder: ['invalid_state_transition'],
  CreatePayment: ['invalid_state_transition'],
  CompletePayment: ['invalid_state_transition'],
  FailPayment: ['invalid_state_transition'],
  CreateConversation: ['invalid_phone'],
  CloseConversation: ['invalid_state_transition'],
  SendMessage: ['invalid_state_transition'],
  CreateInboundMessage: ['invalid_state_transition'],
  CreateWebhookEndpoint: ['invalid_url', 'invalid_event_type', 'test_mode_only', 'too_many_endpoints'],
  UpdateWebhookEndpoint: ['invalid_url', 'invalid_event_type', 'test_mode_only'],
  ResendEvent: ['invalid_state_transition'],
  ResendEvents: ['invalid_state_transition'],
  RetryWebhookDelivery: ['invalid_state_transition'],
  SendTestWebhook: ['invalid_state_transition'],
  ListenWebhookEndpoint: ['not_a_listen_endpoint', 'listen_endpoint_in_use'],
  UpdateWebhookSettings: ['test_mode_only'],
};

/** Tags by proto service name. */
export const tagMeta: Record<string, { name: string; description: string }> = {
  ProductService: { name: 'Products', description: 'The catalog: what an account sells, with prices.' },
  OrderService: {
    name: 'Orders',
    description: 'Orders of customers, priced from products or free-form lines.',
  },
  PaymentService: { name: 'Payments', description: 'Payments of orders through the payment provider.' },
  ConversationService: { name: 'Conversations', description: 'Threads with one customer each.' },
  MessageService: { name: 'Messages', description: 'Texts sent to and received from customers.' },
  WebhookEndpointService: {
    name: 'Webhook endpoints',
    description: 'URLs that receive signed events, their health, deliveries and attempts.',
  },
  EventService: { name: 'Events', description: 'The account’s event log: every event, as delivered.' },
  WebhookSettingsService: {
    name: 'Webhook endpoints',
    description: 'URLs that receive signed events, their health, deliveries and attempts.',
  },
  PaymentTestHelperService: {
    name: 'Test helpers',
    description: 'Simulations of the outside world (payment provider, customers). Test-mode keys only.',
  },
  MessageTestHelperService: {
    name: 'Test helpers',
    description: 'Simulations of the outside world (payment provider, customers). Test-mode keys only.',
  },
};

/** Words for each event type (the webhooks section and the event catalog). */
export const eventMeta: Record<string, string> = {
  'message.received': 'A new inbound message from a customer.',
  'message.sent': 'An outbound message has been sent.',
  'conversation.created': 'A new conversation started.',
  'order.created': 'A new order was created.',
  'order.updated': 'An order status changed.',
  'payment.completed': 'A payment was confirmed.',
  'payment.failed': 'A payment attempt failed.',
  'product.created': 'A new product was added.',
  'product.updated': 'A product was modified (including archived).',
  'webhook_endpoint.unhealthy':
    'An endpoint became unhealthy: the last retry of a delivery failed. Sent only to endpoints that list it explicitly.',
  'webhook_endpoint.disabled': 'An endpoint was disabled. Sent only to endpoints that list it explicitly.',
  'webhook_endpoint.enabled': 'An endpoint was (re-)enabled. Sent only to endpoints that list it explicitly.',
};
