// The public HTTP face: every /v1 request goes through here. Transport only: authenticate,
// decode REST into the RPC's request message, call the owning service over Connect, render
// the answer or the spec's error envelope. No business rules, no SQL.
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { create, type DescMessage, type Message } from '@bufbuild/protobuf';
import type { CallOptions } from '@connectrpc/connect';
import { apiError, type ErrorCode, type RenderedError, renderConnectError, renderError } from '@mcs/errors';
import { callerHeaders } from '@mcs/kit/caller';
import type { Logger } from '@mcs/kit/log';
import { DecodeError, decodeObject, decodeParams, isListResponse, render, renderList } from '@mcs/rest';
import type { Authenticator } from './auth.ts';
import type { Match, Route } from './routes.ts';

export const MAX_BODY = 1024 * 1024;

export type UnaryCall = (request: Message, options: CallOptions) => Promise<Message>;

export interface GatewayDeps {
  match: (method: string, path: string) => Match;
  /** The Connect client of the route's service, its unary methods by local name. */
  clientFor: (route: Route) => Record<string, UnaryCall>;
  auth: Authenticator;
  docsUrl: string;
  log: Logger;
  /** Non-/v1 pages (docs); returns false when it does not serve the path. */
  pages?: (req: IncomingMessage, res: ServerResponse, path: string) => boolean;
}

class BodyTooLarge extends Error {}

function newRequestId(): string {
  return `req_${randomBytes(12).toString('base64url')}`;
}

function send(res: ServerResponse, status: number, body: unknown, extra: Record<string, string> = {}): void {
  const bytes = Buffer.from(JSON.stringify(body));
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': bytes.length, ...extra });
  res.end(res.req.method === 'HEAD' ? undefined : bytes);
}

function sendError(res: ServerResponse, e: RenderedError, extra: Record<string, string> = {}): void {
  send(res, e.status, e.body, extra);
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > MAX_BODY) throw new BodyTooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY) throw new BodyTooLarge();
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

export function createHandler(deps: GatewayDeps) {
  const { log, docsUrl } = deps;
  const fail = (code: ErrorCode, opts?: { param?: string; message?: string }) =>
    renderError(code, docsUrl, opts);

  return async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const requestId = newRequestId();
    res.setHeader('request-id', requestId);
    const started = performance.now();
    const url = new URL(req.url ?? '/', 'http://gateway');
    const path = url.pathname;
    try {
      if (!path.startsWith('/v1/') && path !== '/v1' && deps.pages?.(req, res, path)) return;
      const match = deps.match(req.method ?? 'GET', path);
      if (match.kind === 'not_found')
        return sendError(res, fail('route_not_found', { message: `No route for ${path}.` }));
      if (match.kind === 'method_not_allowed') {
        return sendError(
          res,
          fail('method_not_allowed', {
            message: `${req.method} is not allowed on ${path}. Allowed: ${match.allow.join(', ')}.`,
          }),
          { allow: match.allow.join(', ') },
        );
      }
      const { route, params } = match;
      const principal = await deps.auth.authenticate(req.headers.authorization);
      if (route.write && !principal.secret) throw apiError('secret_key_required');
      if (route.testHelper && principal.livemode) throw apiError('test_mode_only');

      let init: Record<string, unknown>;
      if (route.body) {
        let raw: Buffer;
        try {
          raw = await readBody(req);
        } catch (err) {
          if (err instanceof BodyTooLarge) {
            res.setHeader('connection', 'close');
            return sendError(res, fail('body_too_large'));
          }
          throw err;
        }
        let json: unknown = {};
        if (raw.length > 0) {
          try {
            json = JSON.parse(raw.toString('utf8'));
          } catch {
            return sendError(res, fail('invalid_json'));
          }
        }
        if (json === null || typeof json !== 'object' || Array.isArray(json)) {
          return sendError(res, fail('invalid_json', { message: 'The request body must be a JSON object.' }));
        }
        // Path parameters are strings and name resource ids; they win over the body.
        init = decodeObject(route.method.input, { ...json, ...params });
      } else {
        const query: Record<string, string> = {};
        for (const [k, v] of url.searchParams) query[k] = v;
        init = decodeParams(route.method.input, { ...query, ...params });
      }

      const idempotencyKey = req.headers['idempotency-key'];
      const key = typeof idempotencyKey === 'string' ? idempotencyKey : undefined;
      if (key !== undefined && (key.length === 0 || key.length > 255))
        throw apiError('invalid_idempotency_key');
      const client = deps.clientFor(route);
      const request = create(route.method.input, init);
      const headers = callerHeaders(
        {
          accountId: principal.accountId,
          livemode: principal.livemode,
          idempotencyKey: route.write ? key : undefined,
        },
        requestId,
      );
      const call = client[route.method.localName];
      if (!call) throw new Error(`no client method for ${route.method.name}`);
      const answer = await call(request, { headers, timeoutMs: 30_000 });
      const output: DescMessage = route.method.output;
      const body = isListResponse(output) ? renderList(output, answer, path) : render(output, answer);
      send(res, 200, body);
    } catch (err) {
      const rendered =
        err instanceof DecodeError
          ? fail(err.code, { param: err.param, message: err.message })
          : renderConnectError(err, docsUrl);
      if (rendered.body.error.type === 'api_error') {
        log.error({ err, requestId, method: req.method, path }, 'request failed');
      }
      if (!res.headersSent) sendError(res, rendered);
      else res.destroy();
    } finally {
      log.debug(
        { requestId, method: req.method, path, status: res.statusCode, ms: performance.now() - started },
        'request',
      );
    }
  };
}
