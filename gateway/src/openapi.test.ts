// The OpenAPI document as third-party tools read it: redocly's recommended ruleset finds no
// error and no warning, every example validates (ajv, JSON Schema 2020-12), every operation has
// the headers and error answers the gateway really sends, and the event payloads are
// discriminated by `data.object`.
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { DecodeError, decodeObject } from '@mcs/rest';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import { buildOpenApi, eventTypes, type Schema } from './openapi.ts';
import { buildRoutes } from './routes.ts';

const routes = buildRoutes();
const doc = buildOpenApi(routes, 'http://127.0.0.1:8080');
const operations = Object.entries(doc.paths).flatMap(([path, ops]) =>
  Object.entries(ops).map(([method, op]) => ({ path, method, op })),
);
/** POSTs the gateway serves outside the proto routes, without Idempotency-Key (listen.ts). */
const UNKEYED = new Set(['AckListenDelivery']);
const keyed = (method: string, op: { operationId: string }) =>
  method === 'post' && !UNKEYED.has(op.operationId);

export function schemaValidator(document: Record<string, unknown>) {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats.default(ajv);
  ajv.addSchema({ ...(document as object), $id: 'openapi.json' });
  return (pointer: string) => ajv.getSchema(`openapi.json#${pointer}`)!;
}

describe('the OpenAPI document', () => {
  it('passes redocly lint (recommended) with zero errors and zero warnings', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mcs-openapi-'));
    const file = join(dir, 'openapi.json');
    writeFileSync(file, JSON.stringify(doc));
    const cli = createRequire(import.meta.url).resolve('@redocly/cli/bin/cli.js');
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [cli, 'lint', file, '--format=json', '--extends=recommended'],
      { env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' } },
    ).catch((err: { stdout: string }) => ({ stdout: err.stdout }));
    const report = JSON.parse(stdout.slice(stdout.indexOf('{'))) as {
      totals: { errors: number; warnings: number };
      problems: Array<{ ruleId: string; message: string }>;
    };
    expect(report.problems.map((p) => `${p.ruleId}: ${p.message}`)).toEqual([]);
    expect(report.totals).toMatchObject({ errors: 0, warnings: 0 });
  }, 60_000);

  it('names, describes and tags every operation; every POST takes Idempotency-Key', () => {
    const ids = new Set<string>();
    for (const { path, method, op } of operations) {
      const where = `${method} ${path}`;
      expect(op.operationId, where).toMatch(/^[A-Z][A-Za-z]+$/);
      expect(ids.has(op.operationId), where).toBe(false);
      ids.add(op.operationId);
      expect(op.summary, where).toBeTruthy();
      expect(op.summary, where).not.toMatch(/mcs\.|Service\)/);
      expect(op.tags?.length, where).toBe(1);
      const refs = (op.parameters ?? []).map((p) => p.$ref);
      expect(refs.includes('#/components/parameters/IdempotencyKey'), where).toBe(keyed(method, op));
      if (method === 'post') expect(op.requestBody?.content['application/json'].example, where).toBeDefined();
    }
    expect(doc.info).toMatchObject({ license: { name: expect.any(String) } });
    expect(doc.servers).toEqual([{ url: 'http://127.0.0.1:8080', description: expect.any(String) }]);
  });

  it('declares Request-Id on every answer, Retry-After on 429 and the error envelope on every error', () => {
    const responses = doc.components.responses as Record<string, Schema>;
    const resolve = (r: Schema) =>
      (r.$ref ? responses[(r.$ref as string).split('/').at(-1)!] : r) as {
        headers: Record<string, unknown>;
        content?: Record<string, { schema: Schema }>;
      };
    for (const { path, method, op } of operations) {
      const where = `${method} ${path}`;
      const statuses = Object.keys(op.responses);
      for (const s of ['200', '400', '401', '405', '429', '500', '503']) expect(statuses, where).toContain(s);
      if (method === 'post') expect(statuses, where).toContain('413');
      if (keyed(method, op)) for (const s of ['409', '422']) expect(statuses, where).toContain(s);
      if (path.includes('{')) expect(statuses, where).toContain('404');
      for (const [status, r] of Object.entries(op.responses)) {
        const res = resolve(r);
        expect(res.headers['Request-Id'], `${where} ${status}`).toBeDefined();
        if (status === '429') expect(res.headers['Retry-After'], where).toBeDefined();
        if (status !== '200')
          expect(res.content?.['application/json']?.schema, `${where} ${status}`).toEqual({
            $ref: '#/components/schemas/Error',
          });
      }
      if (keyed(method, op))
        expect(resolve(op.responses['200']!).headers['Idempotent-Replayed']).toBeDefined();
    }
  });

  it('says of every update, and only of updates, that PATCH is accepted too (as Allow does)', () => {
    for (const route of routes) {
      const op = (doc.paths as Record<string, Record<string, any>>)[route.path]?.[
        route.httpMethod.toLowerCase()
      ];
      expect(op, route.path).toBeDefined();
      expect((op.description ?? '').includes('PATCH'), `${route.httpMethod} ${route.path}`).toBe(
        route.update,
      );
    }
  });

  it("refuses in an update's schema the empty list the decoder refuses (400 invalid_value)", () => {
    const updates = routes.filter((r) => r.update);
    expect(updates.length).toBeGreaterThan(0);
    let lists = 0;
    for (const route of updates) {
      const op = (doc.paths as Record<string, Record<string, any>>)[route.path]?.post;
      const schema = op?.requestBody?.content['application/json'].schema;
      for (const [name, prop] of Object.entries((schema?.properties ?? {}) as Record<string, Schema>)) {
        const array = prop.type === 'array' || (Array.isArray(prop.type) && prop.type.includes('array'));
        if (!array) continue;
        lists++;
        expect(() => decodeObject(route.method.input, { [name]: [] }, '', { update: true })).toThrow(
          DecodeError,
        );
        expect(prop.minItems, `${route.path} ${name}`).toBeGreaterThanOrEqual(1);
        expect(prop.description ?? '', `${route.path} ${name}`).not.toMatch(/empty list leaves/i);
      }
    }
    expect(lists).toBeGreaterThan(0);
  });

  it('requires every field of every resource (each is always rendered)', () => {
    const schemas = doc.components.schemas;
    for (const name of ['Product', 'Order', 'OrderItem', 'Payment', 'Conversation', 'Message']) {
      const s = schemas[name] as { required: string[]; properties: Record<string, unknown> };
      expect(s.required.sort(), name).toEqual(Object.keys(s.properties).sort());
    }
    for (const name of [
      'WebhookEndpoint',
      'WebhookDelivery',
      'WebhookAttempt',
      'Event',
      'Error',
      'OrderList',
    ]) {
      const s = schemas[name] as { required: string[]; properties: Record<string, unknown> };
      expect(s.required.sort(), name).toEqual(Object.keys(s.properties).sort());
    }
    const endpoint = schemas.WebhookEndpoint as { properties: Record<string, Schema> };
    expect(endpoint.properties.failing_since).toMatchObject({
      type: ['string', 'null'],
      format: 'date-time',
    });
    expect(endpoint.properties.last_error?.type).toEqual(['string', 'null']);
    expect((endpoint.properties.events as { items: Schema }).items.enum).toEqual([...eventTypes(), '*']);
  });

  it('has one webhook per event type, each payload matching exactly one member of Event.data', () => {
    const { ping, ...typed } = doc.webhooks;
    expect(Object.keys(typed).sort()).toEqual(eventTypes().sort());
    // And the auto_recover probe, which is no event of the log.
    expect(ping!.post.requestBody!.content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/PingEvent',
    });
    const validator = schemaValidator(doc);
    const members = (
      (doc.components.schemas.Event as { properties: { data: { oneOf: Schema[] } } }).properties.data
        .oneOf as Array<{ $ref: string }>
    ).map((m) => validator(m.$ref.slice(1)));
    const event = validator('/components/schemas/Event');
    for (const [type, hook] of Object.entries(typed)) {
      const media = hook.post.requestBody!.content['application/json'];
      const payload = media.example as { type: string; data: unknown };
      expect(payload.type).toBe(type);
      expect(event(payload), `${type}: ${JSON.stringify(event.errors)}`).toBe(true);
      expect(members.filter((m) => m(payload.data)).length, type).toBe(1);
    }
  });

  it('gives examples that validate against their schemas', () => {
    const validator = schemaValidator(doc);
    const check = (pointer: string, value: unknown) => {
      const v = validator(pointer);
      expect(v(value), `${pointer}: ${JSON.stringify(v.errors)}`).toBe(true);
    };
    const esc = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');
    for (const { path, method, op } of operations) {
      const base = `/paths/${esc(path)}/${method}`;
      if (op.requestBody)
        check(
          `${base}/requestBody/content/application~1json/schema`,
          op.requestBody.content['application/json'].example,
        );
      const ok = op.responses['200'] as { content: Record<string, { example: unknown }> };
      for (const [media, { example }] of Object.entries(ok.content))
        check(`${base}/responses/200/content/${esc(media)}/schema`, example);
    }
  });
});
