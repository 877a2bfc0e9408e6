// Who a call is for. The gateway authenticates the API key and passes the account and mode to
// the services as metadata; services trust it because only the gateway (and tests, and
// operators' gRPC tools) reach them, never the public network.
import { Code, ConnectError, type HandlerContext } from '@connectrpc/connect';

export const CALLER_HEADERS = {
  account: 'mcs-account',
  livemode: 'mcs-livemode',
  idempotencyKey: 'mcs-idempotency-key',
  requestId: 'request-id',
} as const;

export interface Caller {
  accountId: string;
  livemode: boolean;
  /** The client's Idempotency-Key, stored with what the call creates (unique per account+mode). */
  idempotencyKey: string | undefined;
}

export function callerOf(ctx: HandlerContext): Caller {
  const accountId = ctx.requestHeader.get(CALLER_HEADERS.account);
  if (!accountId) throw new ConnectError(`missing ${CALLER_HEADERS.account} metadata`, Code.Unauthenticated);
  return {
    accountId,
    livemode: ctx.requestHeader.get(CALLER_HEADERS.livemode) === 'true',
    idempotencyKey: ctx.requestHeader.get(CALLER_HEADERS.idempotencyKey) ?? undefined,
  };
}

/** Metadata for calling a service on behalf of a caller. */
export function callerHeaders(caller: Caller, requestId?: string): Record<string, string> {
  const h: Record<string, string> = {
    [CALLER_HEADERS.account]: caller.accountId,
    [CALLER_HEADERS.livemode]: String(caller.livemode),
  };
  if (caller.idempotencyKey) h[CALLER_HEADERS.idempotencyKey] = caller.idempotencyKey;
  if (requestId) h[CALLER_HEADERS.requestId] = requestId;
  return h;
}
