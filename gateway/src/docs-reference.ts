// The API reference, rendered from the OpenAPI document (openapi.ts): per operation its method
// and path, words, parameters and body fields with types, rules and required marks, request
// and response examples, a curl command and the errors it can answer; then every schema.
import { catalog } from '@mcs/errors';
import { codeBlock, escapeHtml, inline, json, type NavEntry } from './docs-html.ts';
import type { OpenApiDocument, Operation, Schema } from './openapi.ts';

export const slug = (s: string) => s.toLowerCase().replace(/[^a-z0-9]+/g, '-');
const schemaName = (ref: string) => ref.split('/').at(-1)!;
export const schemaHref = (name: string) => `/docs/reference#schema-${name}`;

export interface ReferenceOp {
  method: string;
  path: string;
  op: Operation;
}

export function operationsOf(doc: OpenApiDocument): ReferenceOp[] {
  return Object.entries(doc.paths).flatMap(([path, ops]) =>
    Object.entries(ops).map(([method, op]) => ({ method: method.toUpperCase(), path, op })),
  );
}

/** The type of a schema for people, with links to named schemas. */
export function typeHtml(s: Schema | undefined): string {
  if (!s) return 'any';
  if (s.$ref) {
    const name = schemaName(s.$ref as string);
    return `<a href="${schemaHref(name)}">${escapeHtml(name)}</a>`;
  }
  if (Array.isArray(s.oneOf)) return (s.oneOf as Schema[]).map(typeHtml).join(' | ');
  if (s.const !== undefined) return `<code>${escapeHtml(JSON.stringify(s.const))}</code>`;
  const types = Array.isArray(s.type) ? (s.type as string[]) : s.type ? [s.type as string] : [];
  return (
    types
      .map((t) => (t === 'array' ? `array of ${typeHtml(s.items as Schema)}` : escapeHtml(t)))
      .join(' | ') || 'object'
  );
}

/** The rules of a schema in words: enum, lengths, ranges, pattern, format, default. */
export function rulesOf(s: Schema | undefined): string[] {
  if (!s) return [];
  const out: string[] = [];
  const e = s.enum as unknown[] | undefined;
  if (e) out.push(`one of ${e.map((v) => `<code>${escapeHtml(JSON.stringify(v))}</code>`).join(', ')}`);
  const range = (min: unknown, max: unknown, unit: string) => {
    if (min !== undefined && min === max) out.push(`exactly ${min}${unit}`);
    else if (min !== undefined && max !== undefined) out.push(`${min} to ${max}${unit}`);
    else if (min !== undefined) out.push(`at least ${min}${unit}`);
    else if (max !== undefined) out.push(`at most ${max}${unit}`);
  };
  range(s.minLength, s.maxLength, ' characters');
  range(s.minimum, s.maximum, '');
  range(s.minItems, s.maxItems, ' items');
  if (s.pattern) out.push(`pattern <code>${escapeHtml(String(s.pattern))}</code>`);
  if (s.format) out.push(`format ${escapeHtml(String(s.format))}`);
  if (s.default !== undefined) out.push(`default <code>${escapeHtml(JSON.stringify(s.default))}</code>`);
  if (s.type === 'array' && s.items) out.push(...rulesOf(s.items as Schema).map((r) => `each: ${r}`));
  return out;
}

function describe(s: Schema | undefined): string {
  const words = s?.description ? inline(String(s.description)) : '';
  const rules = rulesOf(s);
  return [words, rules.length ? `<span class="meta">${rules.join('; ')}.</span>` : '']
    .filter(Boolean)
    .join(' ');
}

/** Rows of a request body: nested input objects flattened (`customer.name`, `items[].quantity`). */
function bodyRows(doc: OpenApiDocument, s: Schema, prefix = '', depth = 0): string[] {
  const resolved = s.$ref ? doc.components.schemas[schemaName(s.$ref as string)]! : s;
  const props = (resolved.properties ?? {}) as Record<string, Schema>;
  const required = (resolved.required ?? []) as string[];
  return Object.entries(props).flatMap(([name, p]) => {
    const isList = p.type === 'array';
    const inner = (isList ? p.items : p) as Schema;
    const nested = inner.$ref ? doc.components.schemas[schemaName(inner.$ref as string)] : undefined;
    const field = `${prefix}${name}`;
    const typ = nested ? (isList ? 'array of objects' : 'object') : typeHtml(p);
    const row = `<tr><td><code>${escapeHtml(field)}</code></td><td>${typ}</td><td>${
      required.includes(name) ? '<span class="req">required</span>' : 'optional'
    }</td><td>${describe(p)}</td></tr>`;
    if (!nested || depth > 3) return [row];
    return [row, ...bodyRows(doc, inner, `${field}${isList ? '[]' : ''}.`, depth + 1)];
  });
}

const table = (head: string[], rows: string[]) =>
  rows.length
    ? `<table><thead><tr>${head.map((h) => `<th>${h}</th>`).join('')}</tr></thead><tbody>${rows.join('')}</tbody></table>`
    : '';

/** Example ids by the collection a path parameter follows (`orders/{id}` → `ord_…`). */
function idExamples(doc: OpenApiDocument): Record<string, string> {
  const out: Record<string, string> = {};
  for (const { method, path, op } of operationsOf(doc)) {
    if (method !== 'GET') continue;
    const ok = op.responses['200'] as { content?: { 'application/json'?: { schema: Schema } } };
    const ref = ok.content?.['application/json']?.schema.$ref as string | undefined;
    const list = ref ? doc.components.schemas[schemaName(ref)] : undefined;
    const items = (list?.properties as Record<string, Schema> | undefined)?.data?.items as Schema | undefined;
    if (!items?.$ref) continue;
    const item = doc.components.schemas[schemaName(items.$ref as string)];
    const id = (item?.properties as Record<string, Schema> | undefined)?.id;
    const example = (id?.examples as string[] | undefined)?.[0];
    const collection = path
      .split('/')
      .filter((s) => s && !s.startsWith('{'))
      .at(-1);
    if (example && collection) out[collection] = example;
  }
  return out;
}

const shellQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

export function curlOf(serverUrl: string, ids: Record<string, string>, r: ReferenceOp): string {
  const segments = r.path.split('/');
  const path = segments.map((s, i) => (s.startsWith('{') ? (ids[segments[i - 1] ?? ''] ?? s) : s)).join('/');
  const lines = [`curl ${r.method === 'GET' ? '' : `-X ${r.method} `}${shellQuote(`${serverUrl}${path}`)}`];
  lines.push(`-H "Authorization: Bearer $MCS_API_KEY"`);
  if (r.method === 'POST') {
    lines.push(`-H 'Content-Type: application/json'`);
    lines.push(`-H "Idempotency-Key: $(uuidgen)"`);
    const example = r.op.requestBody?.content['application/json'].example ?? {};
    lines.push(`-d ${shellQuote(JSON.stringify(example))}`);
  }
  return lines.join(' \\\n  ');
}

function operationHtml(doc: OpenApiDocument, serverUrl: string, ids: Record<string, string>, r: ReferenceOp) {
  const { op } = r;
  const parameters = (op.parameters ?? []).map((p) =>
    p.$ref ? (doc.components.parameters as Record<string, Schema>)[schemaName(p.$ref as string)] : p,
  ) as Schema[];
  const paramRows = parameters.map(
    (p) =>
      `<tr><td><code>${escapeHtml(String(p.name))}</code></td><td>${escapeHtml(String(p.in))}</td><td>${typeHtml(
        p.schema as Schema,
      )}</td><td>${p.required ? '<span class="req">required</span>' : 'optional'}</td><td>${[
        p.description ? inline(String(p.description)) : '',
        rulesOf(p.schema as Schema).length
          ? `<span class="meta">${rulesOf(p.schema as Schema).join('; ')}.</span>`
          : '',
      ]
        .filter(Boolean)
        .join(' ')}</td></tr>`,
  );
  const body = op.requestBody?.content['application/json'];
  const ok = op.responses['200'] as { content: Record<string, { schema: Schema; example: unknown }> };
  const [media, answer] = Object.entries(ok.content)[0]!;
  const lines = media === 'application/x-ndjson';
  const errors = Object.entries(op['x-errors'] ?? {}).map(
    ([status, codes]) =>
      `<tr><td>${status}</td><td>${codes
        .map((c) => `<a href="/docs/errors#${escapeHtml(c)}"><code>${escapeHtml(c)}</code></a>`)
        .join(', ')}</td></tr>`,
  );
  const replayed =
    r.method === 'POST'
      ? ' With <code>Idempotent-Replayed: true</code> when it replays the first answer to its <a href="/docs/idempotency">Idempotency-Key</a>.'
      : '';
  return `<section class="op" id="${escapeHtml(op.operationId)}">
<h3><a href="#${escapeHtml(op.operationId)}"><span class="method">${r.method}</span> <code>${escapeHtml(r.path)}</code></a></h3>
<p><strong>${escapeHtml(op.summary)}</strong>${op.description ? ` — ${inline(op.description)}` : ''}</p>
${paramRows.length ? `<h4>Parameters</h4>${table(['Name', 'In', 'Type', '', 'Description'], paramRows)}` : ''}
${body ? `<h4>Request body</h4>${table(['Field', 'Type', '', 'Description'], bodyRows(doc, body.schema))}<h4>Request example</h4>${codeBlock(json(body.example), 'json')}` : ''}
<h4>Response</h4><p>200 with ${lines ? 'a stream of lines (<code>application/x-ndjson</code>), each a ' : ''}${typeHtml(answer.schema)} and a <code>Request-Id</code> header.${replayed}</p>
${codeBlock(json(answer.example), 'json')}
<h4>curl</h4>${codeBlock(curlOf(serverUrl, ids, r), 'sh')}
<h4>Errors</h4><p>Each with the <a href="/docs/errors">error envelope</a>:</p>${table(['Status', 'Codes'], errors)}
</section>`;
}

function schemaHtml(name: string, s: Schema): string {
  const props = (s.properties ?? {}) as Record<string, Schema>;
  const required = (s.required ?? []) as string[];
  const input = s.additionalProperties === false;
  const rows = Object.entries(props).map(
    ([field, p]) =>
      `<tr><td><code>${escapeHtml(field)}</code></td><td>${typeHtml(p)}</td><td>${
        required.includes(field) ? (input ? '<span class="req">required</span>' : 'always') : 'optional'
      }</td><td>${describe(p)}</td></tr>`,
  );
  return `<section class="schema" id="schema-${escapeHtml(name)}"><h3><a href="#schema-${escapeHtml(name)}">${escapeHtml(name)}</a></h3>
${s.description ? `<p>${inline(String(s.description))}</p>` : ''}${table(['Field', 'Type', '', 'Description'], rows)}</section>`;
}

/** The tags in document order, each with its operations. */
export function byTag(
  doc: OpenApiDocument,
): Array<{ name: string; description: string; ops: ReferenceOp[] }> {
  const ops = operationsOf(doc);
  const tags = (doc.tags as Array<{ name: string; description: string }>) ?? [];
  return tags
    .map((t) => ({ ...t, ops: ops.filter((r) => r.op.tags[0] === t.name) }))
    .filter((t) => t.ops.length > 0);
}

export function referenceNav(doc: OpenApiDocument): NavEntry[] {
  return byTag(doc).map((t) => ({
    href: `/docs/reference#tag-${slug(t.name)}`,
    label: t.name,
    children: t.ops.map((r) => ({ href: `/docs/reference#${r.op.operationId}`, label: r.op.summary })),
  }));
}

export function referenceBody(doc: OpenApiDocument): string {
  const serverUrl = (doc.servers as Array<{ url: string }>)[0]?.url ?? '';
  const ids = idExamples(doc);
  const sections = byTag(doc)
    .map(
      (t) =>
        `<h2 id="tag-${slug(t.name)}"><a href="#tag-${slug(t.name)}">${escapeHtml(t.name)}</a></h2><p>${inline(t.description)}</p>${t.ops
          .map((r) => operationHtml(doc, serverUrl, ids, r))
          .join('\n')}`,
    )
    .join('\n');
  const schemas = Object.entries(doc.components.schemas)
    .map(([name, s]) => schemaHtml(name, s))
    .join('\n');
  const codes = Object.keys(catalog).length;
  return `<h1>API reference</h1>
<p>Every operation of the API at <code>${escapeHtml(serverUrl)}</code>, generated from its
<a href="/v1/openapi.json">OpenAPI 3.1 document</a>. Requests and answers are JSON; every request is
authenticated with <code>Authorization: Bearer &lt;key&gt;</code> (<a href="/docs/authentication">keys</a>);
errors use one envelope with ${codes} <a href="/docs/errors">codes</a>. The events sent to webhook endpoints are
described in the <a href="/docs/webhooks#events">webhooks guide</a>.</p>
${sections}
<h2 id="schemas"><a href="#schemas">Schemas</a></h2>
<p>Objects as the API renders them: every field is always present (<em>always</em>); a field that can be
unset is <code>null</code> then. Request objects list their required fields.</p>
${schemas}`;
}
