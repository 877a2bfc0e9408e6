// The gateway's hop to a service: Connect unary calls in binary over one HTTP/2 connection,
// written on node:http2 directly.
//
// connect-node's transport runs each call through its general machinery: interceptor chain,
// universal request and response objects, async iterables for both bodies, a linked
// AbortController aborted with a DOMException when the call ends, a ConnectError built eagerly.
// Under `pnpm bench ingest` that was about a third of the gateway's CPU per order. The gateway
// only makes unary calls with a message, headers and a deadline, so this transport does just
// that, speaking the same Connect protocol (connectrpc.com/docs/protocol): POST
// /<service>/<method>, `application/proto`, `connect-timeout-ms`, errors as the JSON end of a
// unary call, trailers as `trailer-` headers. Streaming calls go to connect-node's transport.
//
// Failures of the connection itself (refused, reset, closed before an answer) are
// `unavailable`: the service is down or restarting, and the gateway answers 503.
import http2 from 'node:http2';
import {
  create,
  type DescMessage,
  type DescMethodUnary,
  fromBinary,
  isMessage,
  toBinary,
} from '@bufbuild/protobuf';
import { appendHeaders, Code, ConnectError, type Transport, type UnaryResponse } from '@connectrpc/connect';
import { codeFromHttpStatus, errorFromJsonBytes } from '@connectrpc/connect/protocol-connect';

/** Answers larger than this are refused (no answer of ours comes near it). */
const READ_MAX_BYTES = 16 * 1024 * 1024;

/** How long a connection to a service may sit without calls before it is closed. */
const IDLE_CLOSE_MS = 60_000;

export function createUnaryTransport(baseUrl: string, streaming: Transport): Transport {
  const origin = new URL(baseUrl).origin;
  let session: http2.ClientHttp2Session | undefined;
  let active = 0;
  let idleTimer: NodeJS.Timeout | undefined;

  function connect(): http2.ClientHttp2Session {
    if (session && !session.closed && !session.destroyed) return session;
    const s = http2.connect(origin);
    // A failed connection fails its streams, which report it; the session's own error is the same.
    s.on('error', () => {});
    const forget = () => {
      if (session === s) session = undefined;
    };
    s.once('close', forget);
    s.once('goaway', forget);
    session = s;
    return s;
  }

  function idle(s: http2.ClientHttp2Session): void {
    if (active > 0) return;
    // Nothing in flight: the process may exit, and the connection closes after a while.
    s.unref();
    clearTimeout(idleTimer);
    idleTimer = setTimeout(() => {
      if (active === 0 && session === s) {
        session = undefined;
        s.close();
      }
    }, IDLE_CLOSE_MS);
    idleTimer.unref();
  }

  function unary<I extends DescMessage, O extends DescMessage>(
    method: DescMethodUnary<I, O>,
    signal: AbortSignal | undefined,
    timeoutMs: number | undefined,
    header: ConstructorParameters<typeof Headers>[0] | undefined,
    input: Parameters<Transport['unary']>[4],
  ): Promise<UnaryResponse<I, O>> {
    const message = isMessage(input, method.input) ? input : create(method.input, input as never);
    const body = toBinary(method.input, message);
    const outgoing: http2.OutgoingHttpHeaders = {
      ':method': 'POST',
      ':path': `/${method.parent.typeName}/${method.name}`,
      'content-type': 'application/proto',
      'connect-protocol-version': '1',
    };
    if (timeoutMs !== undefined && timeoutMs > 0) outgoing['connect-timeout-ms'] = String(timeoutMs);
    if (header) new Headers(header).forEach((value, name) => void Object.assign(outgoing, { [name]: value }));

    return new Promise<UnaryResponse<I, O>>((resolve, reject) => {
      if (signal?.aborted) {
        reject(ConnectError.from(signal.reason, Code.Canceled));
        return;
      }
      let s: http2.ClientHttp2Session;
      let stream: http2.ClientHttp2Stream;
      try {
        s = connect();
        s.ref();
        stream = s.request(outgoing);
      } catch (err) {
        reject(new ConnectError(`cannot reach ${origin}: ${(err as Error).message}`, Code.Unavailable));
        return;
      }
      active++;
      clearTimeout(idleTimer);
      let done = false;
      let timer: NodeJS.Timeout | undefined;
      const finish = (outcome: () => void) => {
        if (done) return;
        done = true;
        if (timer) clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        active--;
        idle(s);
        outcome();
      };
      const fail = (err: ConnectError) =>
        finish(() => {
          if (!stream.closed) stream.close(http2.constants.NGHTTP2_CANCEL);
          reject(err);
        });
      const onAbort = () => fail(ConnectError.from(signal?.reason, Code.Canceled));
      signal?.addEventListener('abort', onAbort, { once: true });
      if (timeoutMs !== undefined && timeoutMs > 0)
        timer = setTimeout(
          () => fail(new ConnectError('the operation timed out', Code.DeadlineExceeded)),
          timeoutMs,
        );

      let status = 0;
      let responseHeader: Headers | undefined;
      let responseTrailer: Headers | undefined;
      const chunks: Buffer[] = [];
      let size = 0;
      stream.on('response', (h) => {
        status = Number(h[':status']);
        responseHeader = new Headers();
        responseTrailer = new Headers();
        for (const [name, value] of Object.entries(h)) {
          if (name.charCodeAt(0) === 58 /* ':' */ || value === undefined) continue;
          const target = name.startsWith('trailer-') ? responseTrailer : responseHeader;
          const key = name.startsWith('trailer-') ? name.slice(8) : name;
          for (const v of Array.isArray(value) ? value : [String(value)]) target.append(key, v);
        }
      });
      stream.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > READ_MAX_BYTES)
          fail(new ConnectError(`answer larger than ${READ_MAX_BYTES} bytes`, Code.ResourceExhausted));
        else chunks.push(chunk);
      });
      stream.on('end', () => {
        if (done) return;
        const bytes = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
        const h = responseHeader ?? new Headers();
        const t = responseTrailer ?? new Headers();
        if (status === 0)
          return fail(new ConnectError(`${origin} closed the call without an answer`, Code.Unavailable));
        const type = h.get('content-type') ?? '';
        if (status !== 200 || type.startsWith('application/json')) {
          const fallback = new ConnectError(
            `HTTP ${status}`,
            codeFromHttpStatus(status),
            appendHeaders(h, t),
          );
          let err: ConnectError;
          try {
            err = type.startsWith('application/json')
              ? errorFromJsonBytes(bytes, appendHeaders(h, t), fallback)
              : fallback;
          } catch (e) {
            err = e instanceof ConnectError ? e : fallback;
          }
          return finish(() => reject(err));
        }
        if (type !== 'application/proto')
          return fail(new ConnectError(`unexpected content type ${type}`, Code.Internal));
        let output: ReturnType<typeof fromBinary<O>>;
        try {
          output = fromBinary(method.output, bytes);
        } catch (e) {
          return fail(new ConnectError(`parse binary: ${(e as Error).message}`, Code.Internal));
        }
        finish(() =>
          resolve({ stream: false, service: method.parent, method, header: h, message: output, trailer: t }),
        );
      });
      // The connection failed or broke (refused, reset, closed): the service is unavailable.
      stream.on('error', (err: Error) =>
        fail(new ConnectError(`${origin}: ${err.message}`, Code.Unavailable, undefined, undefined, err)),
      );
      stream.on('close', () => {
        if (!done) fail(new ConnectError(`${origin} closed the call without an answer`, Code.Unavailable));
      });
      stream.end(body);
    });
  }

  return { unary, stream: streaming.stream.bind(streaming) } as Transport;
}
