// Who a call is for. The gateway authenticates the API key and passes the account and mode to
// the services as metadata; services trust it because only the gateway (and tests, and
// operators' gRPC tools) reach them, never the public network.
import { Code, ConnectError, type HandlerContext } from '@connectrpc/connect';

export const CALLER_HEADERS = {
  account: 'mcs-account',
  livemode: 'mcs-livemode',
  /** The client's Idempotency-Key as given; services store only its hash (kit/idempotency). */
  idempotencyKey: 'mcs-idempotency-key',
  /** SHA-256 of the REST request (method, path, canonical body): a key reused for another request is refused. */
  idempotencyFingerprint: 'mcs-idempotency-fingerprint',
  requestId: 'request-id',
  /** Response header: the answer is the stored answer of an earlier call with the same key. */
  idempotentReplayed: 'mcs-idempotent-replayed',
  /**
   * Response header beside idempotentReplayed: when the replayed key expires (milliseconds since
   * the epoch), so a gateway keeping the answer keeps it no longer than the service would.
   */
  idempotencyExpires: 'mcs-idempotency-expires',
  /**
   * Response header of a 503 whose cause is the service's database being unreachable (value
   * `database`): the gateway refuses the service's calls at once until it is back (gateway/circuit).
   */
  unavailable: 'mcs-unavailable',
} as const;

/** An Idempotency-Key and the fingerprint of the request that carries it. */
export interface IdempotencyClaim {
  key: string;
  fingerprint: string;
}

export interface Caller {
  accountId: string;
  livemode: boolean;
  /** Present when the write is keyed: it happens once per key (kit/idempotency). */
  idempotency?: IdempotencyClaim | undefined;
}

export function callerOf(ctx: HandlerContext): Caller {
  const h = ctx.requestHeader;
  const accountId = h.get(CALLER_HEADERS.account);
  if (!accountId) throw new ConnectError(`missing ${CALLER_HEADERS.account} metadata`, Code.Unauthenticated);
  const key = h.get(CALLER_HEADERS.idempotencyKey);
  return {
    accountId,
    livemode: h.get(CALLER_HEADERS.livemode) === 'true',
    idempotency: key ? { key, fingerprint: h.get(CALLER_HEADERS.idempotencyFingerprint) ?? '' } : undefined,
  };
}

/** Metadata for calling a service on behalf of a caller. */
export function callerHeaders(caller: Caller, requestId?: string): Record<string, string> {
  const h: Record<string, string> = {
    [CALLER_HEADERS.account]: caller.accountId,
    [CALLER_HEADERS.livemode]: String(caller.livemode),
  };
  if (caller.idempotency) {
    h[CALLER_HEADERS.idempotencyKey] = caller.idempotency.key;
    h[CALLER_HEADERS.idempotencyFingerprint] = caller.idempotency.fingerprint;
  }
  if (requestId) h[CALLER_HEADERS.requestId] = requestId;
  return h;
}
