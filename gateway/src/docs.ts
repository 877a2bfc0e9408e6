// /docs and /docs/errors: every doc_url points at an anchor here.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { type CatalogEntry, catalog, type ErrorCode, statusOf } from '@mcs/errors';

const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
const inline = (s: string) => escapeHtml(s).replace(/`([^`]+)`/g, '<code>$1</code>');

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:54rem;margin:2rem auto;padding:0 1rem;color:#1a1a2e}
code{background:#f1f1f6;padding:.1rem .3rem;border-radius:4px}section{border-top:1px solid #ddd;padding:.5rem 0}
.meta{color:#555}</style></head><body>${body}</body></html>`;
}

export function errorsPage(): string {
  const sections = (Object.entries(catalog) as Array<[ErrorCode, CatalogEntry]>)
    .map(
      ([code, e]) => `<section id="${code}"><h2><a href="#${code}">${code}</a></h2>
<p class="meta">type <code>${e.type}</code> · HTTP ${statusOf(code)}</p><p>${inline(e.doc)}</p>
<p>Default message: “${escapeHtml(e.message)}”</p></section>`,
    )
    .join('\n');
  return page(
    'mcs API errors',
    `<h1>Errors</h1><p>Every error answer has the body <code>{"error":{"type","code","message","param?","doc_url"}}</code>. Codes:</p>${sections}`,
  );
}

interface Operation {
  operationId: string;
  summary: string;
  description?: string;
  parameters?: Array<{ name: string; in?: string; required?: boolean }>;
  requestBody?: {
    content: { 'application/json': { schema: { properties: Record<string, unknown>; required?: string[] } } };
  };
}

/** The API reference: every route of the OpenAPI document, its parameters and body fields. */
export function referencePage(openapi: { paths: Record<string, Record<string, Operation>> }): string {
  const rows = Object.entries(openapi.paths)
    .flatMap(([path, ops]) => Object.entries(ops).map(([method, op]) => ({ path, method, op })))
    .map(({ path, method, op }) => {
      const params = (op.parameters ?? [])
        .filter((p) => p.in && p.in !== 'header')
        .map((p) => `<code>${escapeHtml(p.name)}</code>`);
      const schema = op.requestBody?.content['application/json'].schema;
      const body = schema
        ? Object.keys(schema.properties)
            .map((k) => `<code>${escapeHtml(k)}</code>${schema.required?.includes(k) ? '*' : ''}`)
            .join(' ')
        : '';
      return `<section id="${escapeHtml(op.operationId)}"><h3><code>${method.toUpperCase()} ${escapeHtml(path)}</code></h3>
<p class="meta">${escapeHtml(op.summary)}${op.description ? ` — ${escapeHtml(op.description)}` : ''}</p>
${params.length ? `<p>Parameters: ${params.join(' ')}</p>` : ''}${body ? `<p>Body: ${body} (* required)</p>` : ''}</section>`;
    })
    .join('\n');
  return page(
    'mcs API reference',
    `<h1>mcs API reference</h1>
<p>JSON over HTTPS under <code>/v1</code>, authenticated with <code>Authorization: Bearer &lt;key&gt;</code>.
Every POST accepts an <code>Idempotency-Key</code>. Errors: <a href="/docs/errors">error codes</a>.
Machine-readable: <a href="/v1/openapi.json">OpenAPI 3.1</a>.</p>${rows}`,
  );
}

export function createPages(openapi: Record<string, unknown>, ready?: () => Promise<void>) {
  const reference = referencePage(openapi as { paths: Record<string, Record<string, Operation>> });
  const errors = errorsPage();
  const openapiJson = JSON.stringify(openapi);
  return function servePages(req: IncomingMessage, res: ServerResponse, path: string): boolean {
    if (req.method !== 'GET' && req.method !== 'HEAD') return false;
    if (path === '/readyz' || path === '/healthz') {
      // healthz: the process answers; readyz: it can also reach PostgreSQL and NATS.
      const check = path === '/readyz' && ready ? ready() : Promise.resolve();
      check.then(
        () => res.writeHead(200, { 'content-type': 'text/plain' }).end('ok'),
        (err: Error) => res.writeHead(503, { 'content-type': 'text/plain' }).end(`not ready: ${err.message}`),
      );
      return true;
    }
    if (path === '/') {
      // A person opening the bare address lands on the API reference, not a 404 envelope.
      res.writeHead(302, { location: '/docs', 'content-length': '0' }).end();
      return true;
    }
    let type = 'text/html; charset=utf-8';
    let body: string;
    if (path === '/docs/errors') body = errors;
    else if (path === '/docs' || path === '/docs/') body = reference;
    else if (path === '/v1/openapi.json') {
      body = openapiJson;
      type = 'application/json';
    } else return false;
    res.writeHead(200, { 'content-type': type, 'content-length': Buffer.byteLength(body) });
    res.end(req.method === 'HEAD' ? undefined : body);
    return true;
  };
}
