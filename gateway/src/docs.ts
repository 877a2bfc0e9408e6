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

export function indexPage(): string {
  return page(
    'mcs API',
    `<h1>mcs API</h1><p>Messaging and commerce API under <code>/v1</code>. See <a href="/docs/errors">errors</a>.</p>`,
  );
}

export function servePages(req: IncomingMessage, res: ServerResponse, path: string): boolean {
  if (req.method !== 'GET' && req.method !== 'HEAD') return false;
  const html =
    path === '/docs/errors' ? errorsPage() : path === '/docs' || path === '/docs/' ? indexPage() : null;
  if (html === null) return false;
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
  res.end(req.method === 'HEAD' ? undefined : html);
  return true;
}
