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
import { create, type DescMessage, type DescMethodUnary, isMessage } from '@bufbuild/protobuf';
import { Code, ConnectError, type Transport, type UnaryResponse } from '@connectrpc/connect';
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
    const message = isMessage(input, method.input) ? input : create(method.input, input as never);
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
    return new Promise<UnaryResponse<I, O>>((resolve, reject) => {
      let done = false;
      let timer: NodeJS.Timeout | undefined;
      // The implementation is told through its own signal (aborted with this call's).
      const cancel = new AbortController();
      const finish = () => {
        if (done) return false;
        done = true;
        if (timer) clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        return true;
      };
      const fail = (err: ConnectError) => {
        if (!finish()) return;
        cancel.abort(err);
        reject(err);
      };
      const onAbort = () => fail(ConnectError.from(signal?.reason, Code.Canceled));
      signal?.addEventListener('abort', onAbort, { once: true });
      if (deadline !== undefined)
        timer = setTimeout(
          () => fail(new ConnectError('the operation timed out', Code.DeadlineExceeded)),
          deadline,
        );
      call({ input: message, header: new Headers(header), timeoutMs: deadline, signal: cancel.signal }).then(
        (a) => {
          if (finish()) resolve(answer(a));
        },
        (err: ConnectError) => {
          if (finish()) reject(err);
        },
      );
    });
  }

  return { unary: unary as Transport['unary'], stream: streaming.stream.bind(streaming) };
}
