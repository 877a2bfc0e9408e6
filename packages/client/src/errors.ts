// Typed errors: every non-2xx answer of the API becomes an McsError subclass by its `type`,
// carrying the envelope's `code`, `param`, `doc_url` and the answer's Request-Id.
import type { components } from './generated/schema.ts';

type Envelope = components['schemas']['Error'];
export type ErrorType = Envelope['error']['type'];
export type ErrorCode = Envelope['error']['code'];

export class McsError extends Error {
  override name = 'McsError';
  /** The error's category (`invalid_request_error`, `permission_error`, …). */
  readonly type: ErrorType | 'connection_error';
  /** The precise code (`invalid_currency`, `resource_missing`, …); see `docUrl`. */
  readonly code: ErrorCode | undefined;
  /** The request parameter at fault, dotted for nested fields (`customer.phone`). */
  readonly param: string | undefined;
  /** HTTP status of the answer (undefined when none arrived). */
  readonly status: number | undefined;
  /** The `Request-Id` header: quote it to support. */
  readonly requestId: string | undefined;
  readonly docUrl: string | undefined;
  /** The `Retry-After` header of a 429/503, in seconds. */
  readonly retryAfter: number | undefined;

  constructor(init: {
    message: string;
    type: ErrorType | 'connection_error';
    code?: ErrorCode | undefined;
    param?: string | undefined;
    status?: number | undefined;
    requestId?: string | undefined;
    docUrl?: string | undefined;
    retryAfter?: number | undefined;
    cause?: unknown;
  }) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.type = init.type;
    this.code = init.code;
    this.param = init.param;
    this.status = init.status;
    this.requestId = init.requestId;
    this.docUrl = init.docUrl;
    this.retryAfter = init.retryAfter;
  }
}

export class InvalidRequestError extends McsError {
  override name = 'InvalidRequestError';
}
export class AuthenticationError extends McsError {
  override name = 'AuthenticationError';
}
export class PermissionError extends McsError {
  override name = 'PermissionError';
}
export class NotFoundError extends McsError {
  override name = 'NotFoundError';
}
export class RateLimitError extends McsError {
  override name = 'RateLimitError';
}
export class ApiError extends McsError {
  override name = 'ApiError';
}
/** No answer arrived (connection refused or reset, DNS, time-out). */
export class ConnectionError extends McsError {
  override name = 'ConnectionError';
}

function isEnvelope(body: unknown): body is Envelope {
  if (typeof body !== 'object' || body === null || !('error' in body)) return false;
  const error: unknown = body.error;
  return typeof error === 'object' && error !== null && 'type' in error && 'message' in error;
}

/** The McsError for a non-2xx answer and its parsed body (or whatever arrived instead of an envelope). */
export function errorFromResponse(response: Response, body: unknown): McsError {
  const requestId = response.headers.get('request-id') ?? undefined;
  const retry = Number(response.headers.get('retry-after'));
  const retryAfter =
    Number.isFinite(retry) && retry >= 0 && response.headers.has('retry-after') ? retry : undefined;
  if (!isEnvelope(body)) {
    return new ApiError({
      message: `HTTP ${response.status} without an error body`,
      type: 'api_error',
      status: response.status,
      requestId,
      retryAfter,
    });
  }
  const { type, code, message, param, doc_url } = body.error;
  const init = {
    message,
    type,
    code,
    param,
    status: response.status,
    requestId,
    docUrl: doc_url,
    retryAfter,
  };
  switch (type) {
    case 'invalid_request_error':
      return new InvalidRequestError(init);
    case 'authentication_error':
      return new AuthenticationError(init);
    case 'permission_error':
      return new PermissionError(init);
    case 'not_found_error':
      return new NotFoundError(init);
    case 'rate_limit_error':
      return new RateLimitError(init);
    case 'api_error':
      return new ApiError(init);
    default: {
      const unknown: never = type;
      return new McsError({ ...init, type: unknown });
    }
  }
}
