// The common call, served without the general machinery: a Connect unary call in binary,
// uncompressed, over HTTP/1.1 or HTTP/2 — every call the gateway makes. connectNodeAdapter turns each request
// into a universal request (web Headers, async iterables of the body, a response iterable) and
// back, and aborts a fresh AbortController with a DOMException when the call ends; under
// `pnpm bench ingest` that was about a fifth of the commerce service's CPU. Here the same
// implementation runs through Connect's own pieces (createHandlerContext,
// invokeUnaryImplementation with the same interceptors, the same error JSON and status mapping),
// reading and writing the request and response directly.
//
// Everything else — gRPC, gRPC-Web, Connect JSON, GET, compression, streaming, unknown paths —
// still goes to connectNodeAdapter, so every protocol answers as before.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';
import { fromBinary, type Message } from '@bufbuild/protobuf';
import {
  Code,
  ConnectError,
  type ConnectRouter,
  createContextValues,
  createHandlerContext,
  createMethodImplSpec,
  createServiceImplSpec,
  type Interceptor,
  type MethodImplSpec,
} from '@connectrpc/connect';
import { invokeUnaryImplementation, mergeNonProtocolHeaders } from '@connectrpc/connect/protocol';
import {
  codeToHttpStatus,
  errorFromJsonBytes,
  errorToJsonBytes,
  parseTimeout,
  trailerMux,
} from '@connectrpc/connect/protocol-connect';

import { encodeAnswer } from './encoded.ts';

type UnarySpec = MethodImplSpec & { kind: 'unary' };

/**
 * Request headers about the connection, not the call, left out of the handler's requestHeader
 * (no handler reads them): each append to a web Headers validates and re-sorts, and the
 * Headers of a call were a tenth of what the commerce service allocated per order.
 */
const CONNECTION_HEADERS = new Set([
  'host',
  'connection',
  'keep-alive',
  'content-length',
  'transfer-encoding',
]);

/** Larger bodies are refused (connect-node reads up to 4 GiB; no call of ours comes near). */
const READ_MAX_BYTES = 16 * 1024 * 1024;

/** The reason a finished call's context is aborted with (one object, not an error per call). */
const FINISHED = new ConnectError('the call finished', Code.Canceled);

export interface FastUnary {
  /** Wraps a routes function so that the unary methods it registers are known by their paths. */
  capture(routes: (router: ConnectRouter) => void): (router: ConnectRouter) => void;
  /** Serves the call if it is a binary, uncompressed Connect unary POST of a known method; else false. */
  serve(req: Request, res: Response): boolean;
  /**
   * The same call made from within the process (kit/in-process): the implementation, its
   * interceptors and its error mapping as served above, minus HTTP and the message's bytes.
   * Undefined when `path` is not a unary method registered here.
   */
  invoke(path: string): LocalUnary | undefined;
}

/** One in-process unary call: resolves the answer, or rejects with the ConnectError a client would get. */
export type LocalUnary = (call: LocalCall) => Promise<LocalAnswer>;

export interface LocalCall {
  input: Message;
  header: Headers;
  timeoutMs: number | undefined;
  /** The caller gave up: the implementation's signal says so. */
  signal: AbortSignal | undefined;
}

export interface LocalAnswer {
  message: Message;
  header: Headers;
  trailer: Headers;
}

type Request = IncomingMessage | Http2ServerRequest;
type Response = ServerResponse | Http2ServerResponse;

export function createFastUnary(interceptors: Interceptor[]): FastUnary {
  const specs = new Map<string, UnarySpec>();

  function capture(routes: (router: ConnectRouter) => void) {
    return (router: ConnectRouter) => {
      const service = router.service.bind(router);
      router.service = (desc, impl, options) => {
        // Per-service options (own interceptors, limits) would need the adapter: leave those to it.
        if (!options) {
          const spec = createServiceImplSpec(desc, impl);
          for (const m of desc.methods) {
            const ms = spec.methods[m.localName];
            if (ms?.kind === 'unary') specs.set(`/${desc.typeName}/${m.name}`, ms as UnarySpec);
          }
        }
        return service(desc, impl, options);
      };
      const rpc = router.rpc.bind(router);
      router.rpc = ((method, impl, options) => {
        if (!options && method.methodKind === 'unary')
          specs.set(
            `/${method.parent.typeName}/${method.name}`,
            createMethodImplSpec(method, impl) as UnarySpec,
          );
        return rpc(method, impl, options);
      }) as typeof router.rpc;
      routes(router);
    };
  }

  function serve(req: Request, res: Response): boolean {
    if (req.method !== 'POST') return false;
    const h = req.headers;
    if (h['content-type'] !== 'application/proto') return false;
    const encoding = h['content-encoding'];
    if (encoding !== undefined && encoding !== 'identity') return false;
    const path = (h[':path'] as string | undefined) ?? req.url;
    const spec = path === undefined ? undefined : specs.get(path);
    if (!spec) return false;
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > READ_MAX_BYTES) tooLarge = true;
      else chunks.push(chunk);
    });
    req.once('end', () => {
      void answer(
        spec,
        path!,
        req,
        res,
        tooLarge ? null : chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks),
      );
    });
    return true;
  }

  async function answer(
    spec: UnarySpec,
    path: string,
    req: Request,
    res: Response,
    body: Buffer | null,
  ): Promise<void> {
    const requestHeader = new Headers();
    const raw = req.headers;
    for (const name in raw) {
      const value = raw[name];
      if (name.charCodeAt(0) === 58 /* ':' */ || value === undefined || CONNECTION_HEADERS.has(name))
        continue;
      if (Array.isArray(value)) for (const v of value) requestHeader.append(name, v);
      else requestHeader.set(name, value);
    }
    const timeout = parseTimeout(requestHeader.get('connect-timeout-ms'), Number.MAX_SAFE_INTEGER);
    const context = createHandlerContext({
      ...spec,
      service: spec.method.parent,
      protocolName: 'connect',
      requestMethod: 'POST',
      timeoutMs: timeout.timeoutMs,
      requestHeader,
      url: `http://${req.headers[':authority'] ?? req.headers.host ?? 'localhost'}${path}`,
      responseHeader: { 'content-type': 'application/proto' },
      contextValues: createContextValues(),
    });
    // The client gave up (stream reset, connection gone): the implementation's signal says so.
    const onClose = () => {
      if (!res.writableEnded) context.abort(new ConnectError('the client went away', Code.Canceled));
    };
    res.once('close', onClose);
    let status = 200;
    let out: Uint8Array;
    try {
      if (timeout.error) throw timeout.error;
      if (body === null)
        throw new ConnectError(`message larger than ${READ_MAX_BYTES} bytes`, Code.ResourceExhausted);
      let input: ReturnType<typeof fromBinary>;
      try {
        input = fromBinary(spec.method.input, body);
      } catch (e) {
        throw new ConnectError('parse binary request', Code.InvalidArgument, undefined, undefined, e);
      }
      const output = await invokeUnaryImplementation(spec, context, input, interceptors);
      out = encodeAnswer(spec.method.output, output);
    } catch (e) {
      const error =
        e instanceof ConnectError
          ? e
          : new ConnectError('internal error', Code.Internal, undefined, undefined, e);
      status = codeToHttpStatus(error.code);
      context.responseHeader.set('content-type', 'application/json');
      if (!error.isWireError) mergeNonProtocolHeaders(context.responseHeader, error.metadata);
      out = errorToJsonBytes(error, {});
    } finally {
      context.abort(FINISHED);
      res.off('close', onClose);
    }
    if (res.destroyed || res.writableEnded) return;
    const header: Record<string, string> = {};
    trailerMux(context.responseHeader, context.responseTrailer).forEach((value, name) => {
      header[name] = value;
    });
    header['content-length'] = String(out.byteLength);
    (res as ServerResponse).writeHead(status, header);
    res.end(out);
  }

  /** A failure as the service writes it, read back as the caller's side reads it (same code, message, details, metadata). */
  function asReceived(e: unknown, responseHeader: Headers, responseTrailer: Headers): ConnectError {
    const error =
      e instanceof ConnectError
        ? e
        : new ConnectError('internal error', Code.Internal, undefined, undefined, e);
    const metadata = new Headers(responseHeader);
    if (!error.isWireError) mergeNonProtocolHeaders(metadata, error.metadata);
    responseTrailer.forEach((value, name) => {
      metadata.append(name, value);
    });
    const fallback = new ConnectError(`HTTP ${codeToHttpStatus(error.code)}`, error.code, metadata);
    return errorFromJsonBytes(errorToJsonBytes(error, {}), metadata, fallback);
  }

  function invoke(path: string): LocalUnary | undefined {
    const spec = specs.get(path);
    if (!spec) return undefined;
    return async ({ input, header, timeoutMs, signal }) => {
      const context = createHandlerContext({
        ...spec,
        service: spec.method.parent,
        protocolName: 'connect',
        requestMethod: 'POST',
        timeoutMs,
        requestHeader: header,
        url: `http://in-process${path}`,
        contextValues: createContextValues(),
      });
      const onAbort = () => context.abort(new ConnectError('the client went away', Code.Canceled));
      signal?.addEventListener('abort', onAbort, { once: true });
      try {
        const message = await invokeUnaryImplementation(spec, context, input, interceptors);
        return { message, header: context.responseHeader, trailer: context.responseTrailer };
      } catch (e) {
        throw asReceived(e, context.responseHeader, context.responseTrailer);
      } finally {
        signal?.removeEventListener('abort', onAbort);
        context.abort(FINISHED);
      }
    };
  }

  return { capture, serve, invoke };
}
