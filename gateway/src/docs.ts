// /docs: the overview, the guides and the API reference, all rendered once at start-up from the
// OpenAPI document (so they show exactly what the API does); every doc_url points at an anchor
// of /docs/errors. Also /v1/openapi.json and the health probes.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { guides } from './docs-guides.ts';
import { escapeHtml, inline, layout, type NavEntry } from './docs-html.ts';
import { byTag, referenceBody, referenceNav, slug } from './docs-reference.ts';
import type { OpenApiDocument } from './openapi.ts';

/** Every page of /docs by path, as HTML. */
export function renderDocs(doc: OpenApiDocument): Map<string, string> {
  const serverUrl = (doc.servers as Array<{ url: string }>)[0]?.url ?? '';
  const nav: NavEntry[] = [
    { href: '/docs', label: 'Overview' },
    {
      href: '/docs#guides',
      label: 'Guides',
      children: guides.map((g) => ({ href: g.path, label: g.title })),
    },
    { href: '/docs/reference', label: 'API reference', children: referenceNav(doc) },
    { href: '/docs/webhooks#events', label: 'Webhook events' },
    { href: '/docs/reference#schemas', label: 'Schemas' },
    { href: '/v1/openapi.json', label: 'OpenAPI 3.1 (JSON)' },
  ];
  const pages = new Map<string, string>();
  const tags = byTag(doc)
    .map(
      (t) =>
        `<li><a href="/docs/reference#tag-${slug(t.name)}">${escapeHtml(t.name)}</a> — ${inline(t.description)}</li>`,
    )
    .join('');
  pages.set(
    '/docs',
    layout(
      'Overview',
      '/docs',
      nav,
      `<h1>mcs API</h1>
<p>${inline(String((doc.info as { description?: string }).description ?? ''))}</p>
<p>The API lives under <code>${escapeHtml(serverUrl)}/v1</code>. It takes and answers JSON, authenticates each
request with an API key (<code>Authorization: Bearer sk_test_…</code>) and pushes every change to your
<a href="/docs/webhooks">webhook endpoints</a>, signed.</p>
<pre><code>curl ${escapeHtml(serverUrl)}/v1/orders \
  -H "Authorization: Bearer $MCS_API_KEY" \
  -H 'Content-Type: application/json' \
  -H 'Idempotency-Key: first-order' \
  -d '{"customer":{"name":"Ada","phone":"+4915112345678"},"currency":"EUR","items":[{"name":"Tea","unit_amount":450,"quantity":2}]}'</code></pre>
<h2 id="guides"><a href="#guides">Guides</a></h2>
<ul>${guides.map((g) => `<li><a href="${g.path}">${escapeHtml(g.title)}</a></li>`).join('')}</ul>
<h2 id="reference"><a href="#reference">Reference</a></h2>
<ul>${tags}<li><a href="/docs/webhooks#events">Webhook events</a> — one payload per event type.</li></ul>
<p>Machine-readable: <a href="/v1/openapi.json">the OpenAPI 3.1 document</a>, for code generators and tools.</p>`,
    ),
  );
  pages.set('/docs/reference', layout('API reference', '/docs/reference', nav, referenceBody(doc)));
  for (const g of guides) pages.set(g.path, layout(g.title, g.path, nav, g.body(doc, serverUrl)));
  return pages;
}

/**
 * Headers of every /docs page: its own inline style sheet and nothing else may load (no script,
 * no frame, no form), and no other site may frame it (clickjacking) or have it sniffed as
 * another type.
 */
export const DOCS_HEADERS: Record<string, string> = {
  'content-security-policy':
    "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'same-origin',
};

export function createPages(openapi: OpenApiDocument, ready?: () => Promise<void>) {
  const pages = renderDocs(openapi);
  const openapiJson = JSON.stringify(openapi);
  const known = (path: string) =>
    path === '/readyz' ||
    path === '/healthz' ||
    path === '/' ||
    path === '/v1/openapi.json' ||
    pages.has(path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path);
  /** Serves a page (true), answers nothing for a path it does not have (false), or names what its methods are. */
  return function servePages(
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
  ): boolean | { allow: string } {
    if (!known(path)) return false;
    if (req.method !== 'GET' && req.method !== 'HEAD') return { allow: 'GET, HEAD' };
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
    let extra: Record<string, string> = DOCS_HEADERS;
    const page = pages.get(path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path);
    if (page !== undefined) body = page;
    else if (path === '/v1/openapi.json') {
      body = openapiJson;
      type = 'application/json';
      extra = { 'x-content-type-options': 'nosniff' };
    } else return false;
    res.writeHead(200, { 'content-type': type, 'content-length': Buffer.byteLength(body), ...extra });
    res.end(req.method === 'HEAD' ? undefined : body);
    return true;
  };
}
