// The gateway's hop to a service that runs in the same process (`MCS_ONE_PROCESS=true`, see
// scripts/one-process.ts): a Connect transport whose unary calls go straight to the service's
// implementation through the same interceptors and error mapping its port serves them with
// (kit/fast-unary invoke), without HTTP and without encoding the messages.
//
// What a caller sees is what it sees over the wire: the answer's headers and trailers, a
// ConnectError with the same code, message, details and metadata (read back from the same JSON
// a service writes), `deadline_exceeded` after `timeoutMs`, `canceled` when its signal aborts.
// Two differences, both harmless for the gateway, which builds a fresh request for every call and
// only reads answers: the request and the answer are the caller's and the implementation's own
// objects, not decoded copies. Streaming calls (listen) go to `streaming`, over the service's port.
//
// A request the wire would change is sent as the wire would deliver it: a string that is not
// well-formed UTF-16 (a lone surrogate, which JSON.parse lets through) arrives as U+FFFD over a
// port, and handed over as is it reached PostgreSQL, which refused it (a 500 where a service in its
// own process answered 200). Such a request, or one with any other value encoding would change,
// is encoded and decoded; the check is a walk of the request, far cheaper than that copy. Answers
// need none: they come from the database or from requests that passed here.
import {
  create,
  type DescField,
  type DescMessage,
  type DescMethodUnary,
  fromBinary,
  isMessage,
  type Message,
  ScalarType,
  toBinary,
} from '@bufbuild/protobuf';
import { Code, ConnectError, type Transport, type UnaryResponse } from '@connectrpc/connect';
import { raceCall } from './call-race.ts';
import type { LocalAnswer } from './fast-unary.ts';
import type { ServerHandle } from './server.ts';

export function createInProcessTransport(
  server: Pick<ServerHandle, 'invoke'>,
  streaming: Transport,
): Transport {
  const calls = new Map<string, ReturnType<ServerHandle['invoke']>>();
  const local = (path: string) => {
    let call = calls.get(path);
    if (call === undefined && !calls.has(path)) {
      call = server.invoke(path);
      calls.set(path, call);
    }
    return call;
  };

  function unary<I extends DescMessage, O extends DescMessage>(
    method: DescMethodUnary<I, O>,
    signal: AbortSignal | undefined,
    timeoutMs: number | undefined,
    header: ConstructorParameters<typeof Headers>[0] | undefined,
    input: Parameters<Transport['unary']>[4],
  ): Promise<UnaryResponse<I, O>> {
    const path = `/${method.parent.typeName}/${method.name}`;
    const call = local(path);
    if (!call) return Promise.reject(new ConnectError(`HTTP 404 ${path}`, Code.Unimplemented));
    if (signal?.aborted) return Promise.reject(ConnectError.from(signal.reason, Code.Canceled));
    let message = isMessage(input, method.input) ? input : create(method.input, input as never);
    if (changedByWire(method.input, message))
      message = fromBinary(method.input, toBinary(method.input, message));
    const deadline = timeoutMs !== undefined && timeoutMs > 0 ? timeoutMs : undefined;
    const answer = (a: LocalAnswer): UnaryResponse<I, O> => ({
      stream: false,
      service: method.parent,
      method,
      header: a.header,
      trailer: a.trailer,
      message: a.message as UnaryResponse<I, O>['message'],
    });
    // The common case: no deadline and no signal to race against.
    if (deadline === undefined && signal === undefined)
      return call({ input: message, header: new Headers(header), timeoutMs: undefined, signal }).then(answer);
    return raceCall<UnaryResponse<I, O>>(signal, deadline, ({ resolve, reject }) => {
      // The implementation is told through its own signal (aborted with this call's).
      const cancel = new AbortController();
      call({ input: message, header: new Headers(header), timeoutMs: deadline, signal: cancel.signal }).then(
        (a) => resolve(answer(a)),
        reject,
      );
      return (reason) => cancel.abort(reason);
    });
  }

  return { unary: unary as Transport['unary'], stream: streaming.stream.bind(streaming) };
}

/** Whether encoding `message` and decoding it again would change a value in it (see the file's head). */
export function changedByWire(desc: DescMessage, message: Message): boolean {
  const m = message as unknown as Record<string, unknown>;
  for (const field of desc.fields) {
    let value: unknown;
    if (field.oneof) {
      const o = m[field.oneof.localName] as { case?: string; value?: unknown } | undefined;
      if (o?.case !== field.localName) continue;
      value = o.value;
    } else value = m[field.localName];
    if (value === undefined || value === null) continue;
    if (fieldChanged(field, value)) return true;
  }
  return false;
}

function fieldChanged(field: DescField, value: unknown): boolean {
  switch (field.fieldKind) {
    case 'scalar':
      return scalarChanged(field.scalar, field.longAsString, value);
    case 'enum':
      return scalarChanged(ScalarType.INT32, false, value);
    case 'message':
      return changedByWire(field.message, value as Message);
    case 'list': {
      const items = value as unknown[];
      if (field.listKind === 'message') return items.some((i) => changedByWire(field.message, i as Message));
      if (field.listKind === 'enum') return items.some((i) => scalarChanged(ScalarType.INT32, false, i));
      return items.some((i) => scalarChanged(field.scalar, field.longAsString, i));
    }
    case 'map':
      for (const [key, item] of Object.entries(value as Record<string, unknown>)) {
        if (field.mapKey === ScalarType.STRING && !key.isWellFormed()) return true;
        if (
          field.mapKind === 'message'
            ? changedByWire(field.message, item as Message)
            : scalarChanged(field.mapKind === 'enum' ? ScalarType.INT32 : field.scalar, false, item)
        )
          return true;
      }
      return false;
    default: {
      const never: never = field;
      throw new Error(`unhandled field kind ${String(never)}`);
    }
  }
}

function scalarChanged(type: ScalarType, longAsString: boolean, v: unknown): boolean {
  switch (type) {
    case ScalarType.STRING:
      return typeof v !== 'string' || !v.isWellFormed();
    case ScalarType.FLOAT:
      // Sent as 32 bits.
      return typeof v !== 'number' || (Math.fround(v) !== v && !Number.isNaN(v));
    case ScalarType.DOUBLE:
      return typeof v !== 'number';
    case ScalarType.BOOL:
      return typeof v !== 'boolean';
    case ScalarType.BYTES:
      return !(v instanceof Uint8Array);
    case ScalarType.INT32:
    case ScalarType.SINT32:
    case ScalarType.SFIXED32:
      return typeof v !== 'number' || (v | 0) !== v;
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return typeof v !== 'number' || v >>> 0 !== v;
    case ScalarType.INT64:
    case ScalarType.SINT64:
    case ScalarType.SFIXED64:
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      // Decoded as bigint (a string with jstype = JS_STRING), whatever `create` was given.
      return longAsString ? typeof v !== 'string' : typeof v !== 'bigint';
    default: {
      const never: never = type;
      throw new Error(`unhandled scalar type ${String(never)}`);
    }
  }
}
