// The one catalog of error codes. Every error a client can see is one of these: its type
// (spec 7.2), its HTTP status (docs/api.md, "Conventions"), a default message and the documentation
// rendered at /docs/errors#<code>.

export type ErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'not_found_error'
  | 'rate_limit_error'
  | 'api_error';

export interface CatalogEntry {
  type: ErrorType;
  /** Set only where the status differs from the type's usual one. */
  status?: number;
  message: string;
  doc: string;
}

export const catalog = {
  missing_required_field: {
    type: 'invalid_request_error',
    message: 'A required parameter is missing.',
    doc: 'The request omits a parameter the route requires. `param` names it (dotted for nested fields, e.g. `customer.phone`).',
  },
  invalid_type: {
    type: 'invalid_request_error',
    message: 'A parameter has the wrong type.',
    doc: 'A parameter was sent with a JSON type other than the one the route expects, e.g. a string where an integer is expected. `param` names it.',
  },
  invalid_value: {
    type: 'invalid_request_error',
    message: 'A parameter has an invalid value.',
    doc: 'A parameter has the right type but a value outside what is allowed (too long, negative, not one of the listed values). `param` names it.',
  },
  invalid_phone: {
    type: 'invalid_request_error',
    message: 'Phone numbers must be in E.164 format: "+" followed by 8 to 15 digits.',
    doc: 'Phone numbers are written in international E.164 form, e.g. `+4915112345678`.',
  },
  invalid_currency: {
    type: 'invalid_request_error',
    message: 'The currency is not an ISO 4217 code; give three upper-case letters such as "EUR".',
    doc: "Currencies are ISO 4217 codes in circulation, in upper case (`EUR`, `USD`, `JPY`). Every other value (`eur`, `EURO`, `ZZZ`) gets this code. Amounts are integers in the currency's minor unit.",
  },
  invalid_url: {
    type: 'invalid_request_error',
    message: 'The URL is not valid for a webhook endpoint.',
    doc: 'Webhook endpoint URLs must be absolute `https://` URLs without credentials, pointing at a public host.',
  },
  invalid_event_type: {
    type: 'invalid_request_error',
    message: 'Unknown event type.',
    doc: 'Event types are those listed in the API reference (e.g. `order.created`), or `*` for all of them.',
  },
  unknown_parameter: {
    type: 'invalid_request_error',
    message: 'The request has a parameter this route does not know.',
    doc: 'The body or query names a parameter that the route does not accept. Check its spelling; names are snake_case.',
  },
  invalid_json: {
    type: 'invalid_request_error',
    message: 'The request body is not valid JSON.',
    doc: 'Request bodies are JSON objects, encoded as UTF-8, sent with `Content-Type: application/json`.',
  },
  unsupported_media_type: {
    type: 'invalid_request_error',
    status: 415,
    message: 'Request bodies must be JSON sent with "Content-Type: application/json".',
    doc: 'The request has a body in another format (a form post, `text/plain`, no `Content-Type` at all). Send a JSON object with `Content-Type: application/json`; `curl -d` alone sends a form, so add `-H "Content-Type: application/json"`.',
  },
  body_too_large: {
    type: 'invalid_request_error',
    status: 413,
    message: 'The request body is larger than 1 MiB.',
    doc: 'Request bodies are limited to 1 MiB.',
  },
  malformed_request: {
    type: 'invalid_request_error',
    message: 'The request is not valid HTTP/1.1.',
    doc: 'The request line or a header could not be parsed (a control character in a header, a `Content-Length` that is not a number, a bad chunk size, an HTTP/1.1 request without `Host`). The connection is closed after this answer. HTTP clients and libraries never send such requests; a hand-written one might.',
  },
  headers_too_large: {
    type: 'invalid_request_error',
    status: 431,
    message: 'The request headers are larger than 16 KiB.',
    doc: 'The request line and headers together are limited to 16 KiB. The connection is closed after this answer.',
  },
  request_timeout: {
    type: 'invalid_request_error',
    status: 408,
    message: 'The request did not arrive in time.',
    doc: "The request line and headers must arrive within 60 seconds of the request's start, and the whole request within 5 minutes. The connection is closed after this answer.",
  },
  route_not_found: {
    type: 'not_found_error',
    message: 'No route matches this path.',
    doc: 'The path is not part of the API. Routes live under `/v1`; see the API reference.',
  },
  method_not_allowed: {
    type: 'invalid_request_error',
    status: 405,
    message: 'This route does not accept this HTTP method.',
    doc: 'The path exists but not with this method. The `Allow` header lists the accepted methods.',
  },
  not_a_listen_endpoint: {
    type: 'invalid_request_error',
    message: 'This webhook endpoint is not a listen endpoint.',
    doc: 'Only endpoints whose `url` is `mcs-listen:` (what `mcs listen` creates, test mode only) stream their deliveries from `GET /v1/webhooks/{id}/listen`.',
  },
  resource_missing: {
    type: 'not_found_error',
    message: 'No such resource.',
    doc: 'The identifier names no resource of this account and mode, or the resource was deleted.',
  },
  invalid_idempotency_key: {
    type: 'invalid_request_error',
    message: 'Idempotency keys are 1 to 255 characters long.',
    doc: 'The `Idempotency-Key` header holds 1 to 255 characters chosen by the client, unique per operation.',
  },
  idempotency_key_in_use: {
    type: 'invalid_request_error',
    status: 409,
    message: 'A request with this idempotency key is still being processed.',
    doc: 'Another request with the same `Idempotency-Key` has not finished yet. Retry after it completes.',
  },
  idempotency_key_reused: {
    type: 'invalid_request_error',
    status: 422,
    message: 'This idempotency key was already used for a different request.',
    doc: 'Keys are bound to the method, path and body of their first request for 24 hours. Use a new key for a new operation.',
  },
  listen_endpoint_in_use: {
    type: 'invalid_request_error',
    status: 409,
    message: 'Another mcs listen session is streaming this endpoint.',
    doc: 'One listen endpoint streams to one session at a time: a second would receive every delivery too, and the first to stop would delete the endpoint under the other. `mcs listen` makes a new endpoint when the one it would reuse is in use.',
  },
  too_many_endpoints: {
    type: 'invalid_request_error',
    status: 400,
    message: 'This account has as many webhook endpoints in this mode as it may have.',
    doc: 'An account may have up to 100 webhook endpoints in each mode (test and live), `mcs listen` endpoints included. One endpoint may subscribe to many event types, or to `*`; delete endpoints you no longer use to make room.',
  },
  invalid_state_transition: {
    type: 'invalid_request_error',
    message: 'The resource cannot make this transition from its current state.',
    doc: "The action is not allowed in the resource's current status (e.g. fulfilling an unpaid order).",
  },
  api_key_missing: {
    type: 'authentication_error',
    message: 'No API key was given. Send it as "Authorization: Bearer <key>".',
    doc: 'Every request is authenticated with an API key in the `Authorization: Bearer` header.',
  },
  api_key_invalid: {
    type: 'authentication_error',
    message: 'The API key is invalid, revoked or deleted.',
    doc: 'The key is malformed, unknown, revoked or deleted. Keys look like `sk_test_…`, `sk_live_…`, `pk_test_…` or `pk_live_…`.',
  },
  owner_credentials_invalid: {
    type: 'authentication_error',
    message: 'The e-mail address or the password is not right.',
    doc: 'Dashboard sign-in: no account has this e-mail address with this password. The answer is the same whichever of the two is wrong.',
  },
  login_throttled: {
    type: 'rate_limit_error',
    message: 'Too many failed sign-ins. Wait, then try again.',
    doc: 'Dashboard sign-in is paused for an account (or a network address) after repeated failures, for longer after each further failure (up to 15 minutes). The message says how many seconds to wait.',
  },
  password_too_weak: {
    type: 'invalid_request_error',
    message: 'The password must be 10 to 200 characters long.',
    doc: 'Dashboard passwords are 10 to 200 characters long; longer pass phrases are better than complicated short ones.',
  },
  email_taken: {
    type: 'invalid_request_error',
    message: 'Another account with this e-mail address already has a password.',
    doc: 'An e-mail address signs in to one account. Use another address for the account, or create it without a password.',
  },
  secret_key_required: {
    type: 'permission_error',
    message:
      'Publishable keys (pk_) can only read the product catalog. Use a secret key (sk_) for this request.',
    doc: 'Publishable keys (`pk_`) end up in client-side code, so they may only read what is safe there: the product catalog (`GET /v1/products`, `GET /v1/products/{id}`). Every other route (writes, and reads of orders, payments, conversations, messages, events and webhook endpoints) answers 403 with this code; use a secret key (`sk_`) on your server.',
  },
  test_mode_only: {
    type: 'permission_error',
    message: 'Test helpers are available only with test-mode keys.',
    doc: 'Routes under `/v1/test_helpers` simulate the outside world and answer only to `sk_test_` keys.',
  },
  rate_limited: {
    type: 'rate_limit_error',
    message: 'Too many requests. Wait for the number of seconds in the Retry-After header, then retry.',
    doc: 'Each account may make a number of requests per second set by its plan. Over it, requests get 429 with a `Retry-After` header in seconds.',
  },
  api_error: {
    type: 'api_error',
    message: 'Something went wrong on our side. It has been logged with the Request-Id.',
    doc: "An unexpected fault on the service side. It is logged under the request's `Request-Id`; contact support if it persists.",
  },
  service_unavailable: {
    type: 'api_error',
    status: 503,
    message: 'The service is temporarily unavailable. Retry shortly.',
    doc: 'A part of the service is restarting or overloaded. Retry with backoff; POST requests are safe to retry with an `Idempotency-Key`.',
  },
} as const satisfies Record<string, CatalogEntry>;

export type ErrorCode = keyof typeof catalog;

export function isErrorCode(code: string): code is ErrorCode {
  return Object.hasOwn(catalog, code);
}

/** HTTP status of an error code: docs/api.md, "Conventions". */
export function statusOf(code: ErrorCode): number {
  const entry: CatalogEntry = catalog[code];
  if (entry.status !== undefined) return entry.status;
  switch (entry.type) {
    case 'invalid_request_error':
      return 400;
    case 'authentication_error':
      return 401;
    case 'permission_error':
      return 403;
    case 'not_found_error':
      return 404;
    case 'rate_limit_error':
      return 429;
    case 'api_error':
      return 500;
    default: {
      const never: never = entry.type;
      throw new Error(`unknown error type ${never}`);
    }
  }
}
