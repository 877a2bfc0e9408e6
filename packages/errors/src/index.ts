// Errors as the services raise them (ConnectError with a typed ErrorDetail) and as the gateway
// renders them (the spec's envelope). See catalog.ts for every code.
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import { api } from '@mcs/proto';
import {
  type CatalogEntry,
  catalog,
  type ErrorCode,
  type ErrorType,
  isErrorCode,
  statusOf,
} from './catalog.ts';

export { type CatalogEntry, catalog, type ErrorCode, type ErrorType, isErrorCode, statusOf };

const connectCodeOf: Record<ErrorType, Code> = {
  invalid_request_error: Code.InvalidArgument,
  authentication_error: Code.Unauthenticated,
  permission_error: Code.PermissionDenied,
  not_found_error: Code.NotFound,
  rate_limit_error: Code.ResourceExhausted,
  api_error: Code.Internal,
};

export interface ErrorOptions {
  param?: string;
  message?: string;
}

/** The error a service raises for a catalog code; the gateway turns it into the envelope. */
export function apiError(code: ErrorCode, opts: ErrorOptions = {}): ConnectError {
  const entry: CatalogEntry = catalog[code];
  const message = opts.message ?? entry.message;
  let connectCode = connectCodeOf[entry.type];
  if (code === 'service_unavailable') connectCode = Code.Unavailable;
  if (code === 'idempotency_key_in_use') connectCode = Code.Aborted;
  if (code === 'idempotency_key_reused') connectCode = Code.FailedPrecondition;
  const detail = create(api.ErrorDetailSchema, { type: entry.type, code, message, param: opts.param ?? '' });
  return new ConnectError(message, connectCode, undefined, [{ desc: api.ErrorDetailSchema, value: detail }]);
}

export interface ErrorBody {
  error: { type: ErrorType; code: ErrorCode; message: string; param?: string; doc_url: string };
}

export interface RenderedError {
  status: number;
  code: ErrorCode;
  body: ErrorBody;
}

/** The spec's envelope (7.1) for a catalog code. */
export function renderError(code: ErrorCode, docsUrl: string, opts: ErrorOptions = {}): RenderedError {
  const entry: CatalogEntry = catalog[code];
  const error: ErrorBody['error'] = {
    type: entry.type,
    code,
    message: opts.message ?? entry.message,
    ...(opts.param ? { param: opts.param } : {}),
    doc_url: `${docsUrl}/errors#${code}`,
  };
  return { status: statusOf(code), code, body: { error } };
}

/**
 * Renders whatever a Connect call threw. Errors with our detail keep their code; bare Connect
 * codes map to the nearest catalog code; anything else is an api_error whose text never reaches
 * the client (the caller logs it with the Request-Id).
 */
export function renderConnectError(err: unknown, docsUrl: string): RenderedError {
  const ce = ConnectError.from(err);
  const [detail] = ce.findDetails(api.ErrorDetailSchema);
  if (detail && isErrorCode(detail.code)) {
    return renderError(detail.code, docsUrl, { message: detail.message, param: detail.param });
  }
  switch (ce.code) {
    case Code.DeadlineExceeded:
      // The call may still complete in the service: say so, since a write may have happened.
      return renderError('service_unavailable', docsUrl, {
        message:
          'The service did not answer in time; the request may or may not have been applied. ' +
          'Retry with backoff: a POST with the same Idempotency-Key is applied at most once.',
      });
    case Code.Unavailable:
    case Code.Canceled:
      return renderError('service_unavailable', docsUrl);
    case Code.Aborted:
      // Raised by the client itself, not sent by the service: the connection to it broke
      // mid-call (ECONNRESET: a killed or restarting process). Retrying is safe with an
      // Idempotency-Key.
      return renderError(ce.isWireError ? 'api_error' : 'service_unavailable', docsUrl);
    case Code.Unauthenticated:
      return renderError('api_key_invalid', docsUrl);
    case Code.PermissionDenied:
      return renderError('secret_key_required', docsUrl);
    case Code.NotFound:
      return renderError('resource_missing', docsUrl);
    case Code.ResourceExhausted:
      return renderError('rate_limited', docsUrl);
    default:
      return renderError('api_error', docsUrl);
  }
}
