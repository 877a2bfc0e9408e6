// The OpenAPI 3.1 document, derived from the same descriptors and route table as the gateway
// itself, so it cannot drift from what is served: every field the renderer writes is required
// in the response schemas, `optional` proto fields are nullable, and the words and input rules
// the descriptors cannot carry come from openapi-meta.ts.
import { type DescEnum, type DescField, type DescMessage, getOption, ScalarType } from '@bufbuild/protobuf';
import { catalog, type ErrorCode, statusOf } from '@mcs/errors';
import { api, events, webhooks as webhooksPb } from '@mcs/proto';
import { enumValueName, fieldFlags, isInternal, isListResponse, objectName } from '@mcs/rest';
import {
  eventMeta,
  type FieldMeta,
  fieldMeta,
  idExample,
  idPattern,
  operationErrors,
  operationMeta,
  TIMESTAMP_EXAMPLE,
  tagMeta,
} from './openapi-meta.ts';
import type { Route } from './routes.ts';

export type Schema = Record<string, unknown>;
export type OpenApiDocument = Record<string, unknown> & {
  paths: Record<string, Record<string, Operation>>;
  webhooks: Record<string, { post: Operation }>;
  components: { schemas: Record<string, Schema> } & Record<string, unknown>;
};
export interface Operation {
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  parameters?: Schema[];
  requestBody?: { content: { 'application/json': { schema: Schema; example?: unknown } } };
  responses: Record<string, Schema>;
  'x-errors'?: Record<string, string[]>;
}

/** The REST names of every event type, e.g. `order.created`. */
export const eventTypes = (): string[] =>
  events.EventTypeSchema.values
    .map((v) => enumValueName(events.EventTypeSchema, v.number))
    .filter((n): n is string => n !== null);

const splitWords = (name: string) =>
  name
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .toLowerCase()
    .replace(/^./, (c) => c.toUpperCase());

const pascal = (s: string) => s.replace(/(^|[._])([a-z])/g, (_, __, c: string) => c.toUpperCase());

const ERROR_NAMES: Record<number, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  409: 'Conflict',
  413: 'PayloadTooLarge',
  415: 'UnsupportedMediaType',
  422: 'UnprocessableEntity',
  429: 'TooManyRequests',
  500: 'InternalServerError',
  503: 'ServiceUnavailable',
};

/** The catalog codes answered with each status. */
function codesByStatus(): Map<number, ErrorCode[]> {
  const out = new Map<number, ErrorCode[]>();
  for (const code of Object.keys(catalog) as ErrorCode[]) {
    const status = statusOf(code);
    out.set(status, [...(out.get(status) ?? []), code]);
  }
  return out;
}

/** What decides the transport's errors of an operation. */
export interface OperationTraits {
  /** The RPC (or operation) name: operationErrors lists its own codes. */
  name: string;
  httpMethod: string;
  hasParams: boolean;
  write: boolean;
  testHelper: boolean;
  /** Publishable keys may call it (the product catalog). */
  pkReadable: boolean;
  /** Goes through Idempotency-Key handling and the JSON body checks of the gateway (every proto POST). */
  keyed: boolean;
  /** Refuses a body that is not application/json (415); every keyed POST does. */
  jsonOnly?: boolean;
}

export const traitsOf = (route: Route): OperationTraits => ({
  name: route.method.name,
  httpMethod: route.httpMethod,
  hasParams: route.segments.some((s) => 'param' in s),
  write: route.write,
  testHelper: route.testHelper,
  pkReadable: route.owner === 'commerce' && /^(Get|List)Product/.test(route.method.name),
  keyed: route.httpMethod === 'POST',
});

/** Which codes an operation can answer (beyond its own validation): the transport's rules. */
export function errorCodesOf(t: OperationTraits): Map<number, ErrorCode[]> {
  const all = codesByStatus();
  const pick = (status: number, keep: (c: ErrorCode) => boolean = () => true) => {
    const codes = (all.get(status) ?? []).filter(keep);
    if (codes.length) out.set(status, codes);
  };
  const out = new Map<number, ErrorCode[]>();
  const post = t.httpMethod === 'POST';
  const specific = new Set(Object.values(operationErrors).flat());
  const own = operationErrors[t.name] ?? [];
  pick(
    400,
    (c) =>
      (post || !['invalid_json'].includes(c)) &&
      (t.keyed || c !== 'invalid_idempotency_key') &&
      (!specific.has(c) || own.includes(c)),
  );
  pick(401);
  if (!t.pkReadable || t.write || t.testHelper)
    pick(
      403,
      (c) =>
        (c !== 'test_mode_only' || t.testHelper || own.includes(c)) &&
        (c !== 'secret_key_required' || t.write || !t.pkReadable),
    );
  if (t.hasParams) pick(404);
  else pick(404, (c) => c === 'route_not_found');
  pick(405);
  if (post) pick(413);
  if (t.keyed) {
    pick(409);
    pick(422);
  }
  if (post && (t.keyed || t.jsonOnly)) pick(415);
  pick(429);
  pick(500);
  pick(503);
  return out;
}

export function buildOpenApi(routes: Route[], serverUrl: string): OpenApiDocument {
  const schemas: Record<string, Schema> = {};
  const owners = new Map<string, string>(); // schema name → message typeName
  const types = eventTypes();
  const errorCodes = codesByStatus();

  function nameFor(desc: DescMessage, input: boolean): string {
    let name = desc.name;
    if (input && !name.endsWith('Input')) name = `${name}Input`;
    return name;
  }

  function ref(desc: DescMessage, input: boolean): Schema {
    if (desc.typeName === 'google.protobuf.Timestamp')
      return { type: 'string', format: 'date-time', examples: [TIMESTAMP_EXAMPLE] };
    let name = nameFor(desc, input);
    if (!owners.has(name)) {
      owners.set(name, desc.typeName);
      schemas[name] = {}; // reserve first: messages may refer to themselves
      schemas[name] = input ? inputSchema(desc) : outputSchema(desc);
    } else if (owners.get(name) !== desc.typeName && schemas[name] !== undefined) {
      // Two messages of one name (commerce.Customer, messaging.Customer): share the schema when
      // they render alike, else qualify with the package.
      const twin = input ? inputSchema(desc) : outputSchema(desc);
      if (JSON.stringify(twin) !== JSON.stringify(schemas[name])) {
        const pkg = desc.typeName.split('.')[1] ?? '';
        name = `${pascal(pkg)}${name}`;
        owners.set(name, desc.typeName);
        schemas[name] = twin;
      }
    }
    return { $ref: `#/components/schemas/${name}` };
  }

  function scalar(t: ScalarType): Schema {
    switch (t) {
      case ScalarType.STRING:
        return { type: 'string' };
      case ScalarType.BOOL:
        return { type: 'boolean' };
      case ScalarType.DOUBLE:
      case ScalarType.FLOAT:
        return { type: 'number' };
      case ScalarType.BYTES:
        return { type: 'string', contentEncoding: 'base64' };
      default:
        return { type: 'integer' };
    }
  }

  const enumWords = (e: DescEnum) =>
    e.values.map((v) => enumValueName(e, v.number)).filter((v): v is string => v !== null);

  /** Applies a field's rules to its value schema (items of lists). */
  function constrain(s: Schema, meta: FieldMeta | undefined): Schema {
    if (!meta) return s;
    const out = { ...s };
    if (meta.idOf) {
      out.pattern = idPattern(meta.idOf);
      out.examples = [idExample(meta.idOf)];
    }
    for (const k of ['pattern', 'minLength', 'maxLength', 'minimum', 'maximum', 'format'] as const) {
      if (meta[k] !== undefined) out[k] = meta[k];
    }
    if (meta.eventTypes) Object.assign(out, { enum: [...types, '*'] });
    return out;
  }

  function fieldSchema(owner: DescMessage, f: DescField, input: boolean): Schema {
    const meta = fieldMeta[`${owner.name}.${f.name}`];
    let s: Schema;
    switch (f.fieldKind) {
      case 'scalar':
        s = constrain(scalar(f.scalar), meta);
        break;
      case 'enum':
        s = { type: 'string', enum: enumWords(f.enum) };
        break;
      case 'message':
        s = ref(f.message, input);
        break;
      case 'list': {
        const item =
          f.listKind === 'scalar'
            ? constrain(scalar(f.scalar), meta)
            : f.listKind === 'enum'
              ? { type: 'string', enum: enumWords(f.enum) }
              : ref(f.message, input);
        s = { type: 'array', items: item };
        if (meta?.minItems) s.minItems = meta.minItems;
        if (meta?.maxItems) s.maxItems = meta.maxItems;
        break;
      }
      case 'map':
        s = { type: 'object', additionalProperties: f.mapKind === 'message' ? ref(f.message, input) : {} };
        break;
      default:
        s = {};
    }
    // `optional` fields render as null when unset (rest/render.ts); requests leave them out.
    if (!input && f.proto.proto3Optional) {
      s = nullable(s);
      // Examples show an unset field as null unless its meta gives a value worth showing.
      if (meta?.example === undefined && !meta?.idOf) delete s.examples;
    }
    if (meta?.description) s = withDescription(s, meta.description);
    if (meta?.example !== undefined && !s.$ref && !s.oneOf && !s.anyOf) s.examples = [meta.example];
    if (meta?.default !== undefined) s.default = meta.default;
    return s;
  }

  function nullable(s: Schema): Schema {
    if (s.$ref) return { oneOf: [s, { type: 'null' }] };
    if (typeof s.type === 'string') {
      const out: Schema = { ...s, type: [s.type, 'null'] };
      if (Array.isArray(s.enum)) out.enum = [...s.enum, null];
      return out;
    }
    return { oneOf: [s, { type: 'null' }] };
  }

  function withDescription(s: Schema, description: string): Schema {
    // A $ref's siblings are allowed in 3.1; keep them to the description.
    return { ...s, description };
  }

  /** A resource as the API renders it: every field, always present (null when unset). */
  function outputSchema(desc: DescMessage): Schema {
    const properties: Record<string, Schema> = {};
    const object = objectName(desc);
    const fields = desc.fields.filter((f) => !isInternal(f));
    const id = fields.find((f) => f.name === 'id');
    const required: string[] = [];
    if (id && object) {
      const prefix = getOption(desc, api.resource).idPrefix;
      properties.id = { type: 'string', pattern: idPattern(prefix), examples: [idExample(prefix)] };
      required.push('id');
    }
    if (object) {
      properties.object = { type: 'string', const: object, description: `Always "${object}".` };
      required.push('object');
    }
    let dataDone = false;
    for (const f of fields) {
      if (f === id && object) continue;
      if (f.oneof?.name === 'data') {
        if (dataDone) continue;
        dataDone = true;
        const members = f.oneof.fields.map((m) => ({ m, object: objectName(m.message!) }));
        const s: Schema = { oneOf: members.map(({ m }) => ref(m.message!, false)) };
        if (members.every((x) => x.object)) {
          s.discriminator = {
            propertyName: 'object',
            mapping: Object.fromEntries(
              members.map(({ m, object }) => [object, (ref(m.message!, false) as { $ref: string }).$ref]),
            ),
          };
        }
        const meta = fieldMeta[`${desc.name}.data`];
        properties.data = meta?.description ? withDescription(s, meta.description) : s;
        required.push('data');
        continue;
      }
      properties[f.name] = fieldSchema(desc, f, false);
      // Members of other oneofs render only when set.
      if (!f.oneof) required.push(f.name);
    }
    return { type: 'object', required, properties };
  }

  /** A message inside a request body: its required fields, nothing unknown. */
  function inputSchema(desc: DescMessage, skip: string[] = []): Schema {
    const fields = desc.fields.filter(
      (f) => !isInternal(f) && !fieldFlags(f).outputOnly && !skip.includes(f.name),
    );
    const required = fields.filter((f) => fieldFlags(f).required).map((f) => f.name);
    return {
      type: 'object',
      additionalProperties: false,
      ...(required.length ? { required } : {}),
      properties: Object.fromEntries(fields.map((f) => [f.name, fieldSchema(desc, f, true)])),
    };
  }

  function listSchema(output: DescMessage, path: string): Schema {
    const dataField = output.fields.find((f) => f.name === 'data')!;
    const item = dataField.message!;
    const name = `${item.name}List`;
    if (!schemas[name]) {
      schemas[name] = {
        type: 'object',
        description: `A page of ${item.name} objects, newest first.`,
        required: ['object', 'data', 'has_more', 'url'],
        properties: {
          object: { type: 'string', const: 'list', description: 'Always "list".' },
          data: { type: 'array', items: ref(item, false) },
          has_more: {
            type: 'boolean',
            description: 'true when more items follow: ask again with starting_after = the last id of data.',
          },
          url: { type: 'string', description: 'The path of this list.', examples: [path] },
        },
      };
    }
    return { $ref: `#/components/schemas/${name}` };
  }

  /** A sample value of a schema, from its examples, consts and enums. */
  function example(s: Schema, depth = 0): unknown {
    if (s.$ref) return example(schemas[(s.$ref as string).split('/').at(-1)!] ?? {}, depth);
    if (Array.isArray(s.examples) && s.examples.length) return s.examples[0];
    if (s.const !== undefined) return s.const;
    if (s.default !== undefined) return s.default;
    if (Array.isArray(s.type) && s.type.includes('null')) return null;
    if (Array.isArray(s.enum)) return s.enum.find((v) => v !== null && v !== '*') ?? null;
    if (Array.isArray(s.oneOf)) {
      const options = s.oneOf as Schema[];
      const nonNull = options.filter((o) => o.type !== 'null');
      // A nullable message: show it when it is always set in practice? No: null is what clients see unset.
      if (nonNull.length < options.length && depth > 0) return null;
      return example(nonNull[0] ?? {}, depth + 1);
    }
    const type = Array.isArray(s.type) ? (s.type as string[]) : [s.type as string];
    if (type.includes('null')) return null;
    switch (type[0]) {
      case 'object': {
        const props = (s.properties ?? {}) as Record<string, Schema>;
        return Object.fromEntries(Object.entries(props).map(([k, v]) => [k, example(v, depth + 1)]));
      }
      case 'array': {
        const item = example((s.items ?? {}) as Schema, depth + 1);
        return Array.isArray(item) ? item : [item];
      }
      case 'string':
        if (s.format === 'date-time') return TIMESTAMP_EXAMPLE;
        return 'string';
      case 'integer':
        return typeof s.minimum === 'number' ? Math.max(s.minimum, 1) : 1;
      case 'number':
        return 1;
      case 'boolean':
        return true;
      default:
        return {};
    }
  }

  const paths: Record<string, Record<string, Operation>> = {};
  const tags = new Map<string, string>();
  for (const route of routes) {
    const input = route.method.input;
    const output = route.method.output;
    const pathParams = route.segments.flatMap((s) => ('param' in s ? [s.param] : []));
    const listed = isListResponse(output)
      ? objectName(output.fields.find((f) => f.name === 'data')!.message!)
      : undefined;
    const listPrefix = isListResponse(output)
      ? getOption(output.fields.find((f) => f.name === 'data')!.message!, api.resource).idPrefix
      : undefined;
    const parameters: Schema[] = pathParams.map((name) => {
      const meta = fieldMeta[`${input.name}.${name}`];
      return {
        name,
        in: 'path',
        required: true,
        description: meta?.description ?? 'The id of the object.',
        schema: { type: 'string' },
      };
    });
    if (!route.body) {
      for (const f of input.fields) {
        if (pathParams.includes(f.name) || isInternal(f)) continue;
        let schema = fieldSchema(input, f, true);
        const description = schema.description as string | undefined;
        delete schema.description;
        if (f.name === 'limit') {
          schema = { type: 'integer', minimum: 1, maximum: 100, default: 10 };
        }
        if (f.name === 'starting_after' && listPrefix) {
          schema = { type: 'string', pattern: idPattern(listPrefix), examples: [idExample(listPrefix)] };
        }
        parameters.push({
          name: f.name,
          in: 'query',
          required: fieldFlags(f).required,
          description:
            f.name === 'limit'
              ? 'How many objects to return: 1 to 100, 10 when absent.'
              : f.name === 'starting_after'
                ? `Cursor: the id of the last ${listed ?? 'object'} of the previous page.`
                : (description ?? f.name),
          schema,
        });
      }
    }
    const post = route.httpMethod === 'POST';
    if (post) parameters.push({ $ref: '#/components/parameters/IdempotencyKey' });

    const success = isListResponse(output) ? listSchema(output, route.path) : ref(output, false);
    const meta = operationMeta[route.method.name];
    const tag = tagMeta[route.service.name] ?? {
      name: splitWords(route.service.name.replace(/Service$/, '')),
      description: `${splitWords(route.service.name.replace(/Service$/, ''))} operations.`,
    };
    tags.set(tag.name, tag.description);

    const errors = errorCodesOf(traitsOf(route));
    const responses: Record<string, Schema> = {
      '200': {
        description: meta?.summary ? `${meta.summary}: success.` : 'Success.',
        headers: {
          'Request-Id': { $ref: '#/components/headers/RequestId' },
          ...(post ? { 'Idempotent-Replayed': { $ref: '#/components/headers/IdempotentReplayed' } } : {}),
        },
        content: { 'application/json': { schema: success, example: example(success) } },
      },
    };
    for (const status of errors.keys()) {
      responses[String(status)] = { $ref: `#/components/responses/${ERROR_NAMES[status]}` };
    }

    const operation: Operation = {
      operationId: route.method.name,
      tags: [tag.name],
      summary: meta?.summary ?? splitWords(route.method.name),
      description: meta?.description ?? (route.testHelper ? 'Test helper: test-mode keys only.' : ''),
      parameters,
      responses,
      'x-errors': Object.fromEntries([...errors].map(([status, codes]) => [String(status), codes])),
    };
    if (!operation.description) delete operation.description;
    if (!parameters.length) delete operation.parameters;
    const bodyFields = input.fields.filter((f) => !pathParams.includes(f.name) && !isInternal(f));
    if (route.body) {
      const schema = inputSchema(input, pathParams);
      operation.requestBody = {
        ...(bodyFields.some((f) => fieldFlags(f).required) ? { required: true } : {}),
        content: { 'application/json': { schema, example: meta?.requestExample ?? example(schema) } },
      } as Operation['requestBody'];
    }
    paths[route.path] ??= {};
    paths[route.path]![route.httpMethod.toLowerCase()] = operation;
  }

  // `mcs listen` (gateway/src/listen.ts): served by the gateway itself, outside the proto routes.
  const endpointRef = ref(webhooksPb.WebhookEndpointSchema, false);
  schemas.ListenFrame = {
    description:
      'One line of the listen stream (NDJSON): ready once, then a delivery per attempt, a ping every 15 s.',
    oneOf: [
      { $ref: '#/components/schemas/ListenReadyFrame' },
      { $ref: '#/components/schemas/ListenDeliveryFrame' },
      { $ref: '#/components/schemas/ListenPingFrame' },
    ],
    discriminator: {
      propertyName: 'type',
      mapping: {
        ready: '#/components/schemas/ListenReadyFrame',
        delivery: '#/components/schemas/ListenDeliveryFrame',
        ping: '#/components/schemas/ListenPingFrame',
      },
    },
  };
  schemas.ListenReadyFrame = {
    type: 'object',
    required: ['type', 'endpoint'],
    properties: { type: { type: 'string', const: 'ready' }, endpoint: endpointRef },
  };
  schemas.ListenDeliveryFrame = {
    type: 'object',
    description:
      'An attempt to deliver: forward body and headers to the local server, then acknowledge with ack.',
    required: ['type', 'ack', 'delivery', 'event', 'attempt', 'body', 'headers'],
    properties: {
      type: { type: 'string', const: 'delivery' },
      ack: { type: 'string', minLength: 1, description: 'The token to acknowledge this attempt with.' },
      delivery: { type: 'string', pattern: idPattern('dlv'), examples: [idExample('dlv')] },
      event: { type: 'string', pattern: idPattern('evt'), examples: [idExample('evt')] },
      attempt: { type: 'integer', minimum: 1, description: "The attempt's number in the delivery's log." },
      body: { type: 'string', description: 'The exact body of the delivery (an Event as JSON).' },
      headers: {
        type: 'object',
        description: 'The signature headers made with the endpoint’s secret.',
        additionalProperties: { type: 'string' },
      },
    },
  };
  schemas.ListenPingFrame = {
    type: 'object',
    required: ['type'],
    properties: { type: { type: 'string', const: 'ping' } },
  };
  schemas.ListenAck = {
    type: 'object',
    required: ['object', 'ack', 'delivery'],
    properties: {
      object: { type: 'string', const: 'listen_ack' },
      ack: { type: 'string' },
      delivery: { type: 'string', pattern: idPattern('dlv'), examples: [idExample('dlv')] },
    },
  };
  const listenParam = {
    name: 'id',
    in: 'path',
    required: true,
    description: 'A listen endpoint (url "mcs-listen:", made by `mcs listen`).',
    schema: { type: 'string' },
  };
  const listenOps: Array<{ path: string; method: string; op: Operation; traits: OperationTraits }> = [
    {
      path: '/v1/webhooks/{id}/listen',
      method: 'get',
      traits: {
        name: 'ListenWebhookEndpoint',
        httpMethod: 'GET',
        hasParams: true,
        write: true,
        testHelper: false,
        pkReadable: false,
        keyed: false,
      },
      op: {
        operationId: 'ListenWebhookEndpoint',
        summary: 'Stream the deliveries of a listen endpoint',
        description:
          'What `mcs listen` reads: a long-lived NDJSON stream (one ListenFrame per line) of every attempt to deliver to this endpoint while the stream is open. Secret keys only.',
        tags: [tagMeta.WebhookEndpointService?.name ?? 'Webhook endpoints'],
        parameters: [listenParam],
        responses: {
          '200': {
            description: 'The stream, until either side closes it.',
            headers: { 'Request-Id': { $ref: '#/components/headers/RequestId' } },
            content: {
              'application/x-ndjson': {
                schema: { $ref: '#/components/schemas/ListenFrame' },
                example: { type: 'ping' },
              },
            },
          },
        },
      },
    },
    {
      path: '/v1/webhooks/{id}/listen/ack',
      method: 'post',
      traits: {
        name: 'AckListenDelivery',
        httpMethod: 'POST',
        hasParams: true,
        write: true,
        testHelper: false,
        pkReadable: false,
        keyed: false,
        jsonOnly: true,
      },
      op: {
        operationId: 'AckListenDelivery',
        summary: 'Acknowledge a listen delivery',
        description:
          'What the local server answered to a delivery of the listen stream; the delivery records it as the attempt’s result. Each ack token answers once.',
        tags: [tagMeta.WebhookEndpointService?.name ?? 'Webhook endpoints'],
        parameters: [listenParam],
        requestBody: {
          content: {
            'application/json': {
              schema: {
                type: 'object',
                required: ['ack'],
                properties: {
                  ack: { type: 'string', minLength: 1, description: 'The token of the delivery frame.' },
                  status_code: {
                    type: ['integer', 'null'],
                    minimum: 100,
                    maximum: 599,
                    description: "The local server's status; null when it did not answer.",
                  },
                  error: { type: ['string', 'null'], description: 'Why it failed, if it did.' },
                  latency_ms: { type: 'integer', minimum: 0 },
                  response_excerpt: {
                    type: ['string', 'null'],
                    description: "The start of the local server's answer.",
                  },
                },
              },
              example: {
                ack: 'k3J9x0b2Qm8tZ1vY4rW7nA',
                status_code: 200,
                error: null,
                latency_ms: 12,
                response_excerpt: 'ok',
              },
            },
          },
        } as Operation['requestBody'],
        responses: {
          '200': {
            description: 'Recorded.',
            headers: { 'Request-Id': { $ref: '#/components/headers/RequestId' } },
            content: {
              'application/json': {
                schema: { $ref: '#/components/schemas/ListenAck' },
                example: { object: 'listen_ack', ack: 'k3J9x0b2Qm8tZ1vY4rW7nA', delivery: idExample('dlv') },
              },
            },
          },
        },
      },
    },
  ];
  for (const { path, method, op, traits } of listenOps) {
    if (paths[path]?.[method]) continue; // described by a proto route after all
    const errors = errorCodesOf(traits);
    for (const status of errors.keys())
      op.responses[String(status)] = { $ref: `#/components/responses/${ERROR_NAMES[status]}` };
    op['x-errors'] = Object.fromEntries([...errors].map(([status, codes]) => [String(status), codes]));
    paths[path] ??= {};
    paths[path]![method] = op;
  }

  // The webhooks: one entry per event type, its payload the Event envelope with that type and
  // the resource of that kind.
  const eventRef = ref(events.EventSchema, false);
  const eventSchema = schemas[(eventRef.$ref as string).split('/').at(-1)!]!;
  const dataMembers = events.EventSchema.fields
    .filter((f) => f.oneof?.name === 'data')
    .map((f) => ({ object: objectName(f.message!)!, ref: ref(f.message!, false) }));
  const webhooks: Record<string, { post: Operation }> = {};
  for (const type of types) {
    const kind = type.slice(0, type.lastIndexOf('.'));
    const member = dataMembers.find((m) => m.object === kind);
    const name = `${pascal(type)}Event`;
    const props = eventSchema.properties as Record<string, Schema>;
    schemas[name] = {
      type: 'object',
      description: `The payload of ${type}: ${eventMeta[type] ?? ''}`.trim(),
      required: eventSchema.required,
      properties: {
        ...props,
        type: { type: 'string', const: type },
        data: member
          ? { ...member.ref, description: `The ${kind.replace('_', ' ')}, as the REST API renders it.` }
          : props.data,
      },
    };
    const payload = { $ref: `#/components/schemas/${name}` };
    webhooks[type] = {
      post: {
        operationId: `${pascal(type)}Webhook`,
        summary: type,
        description: `${eventMeta[type] ?? ''} POSTed to every enabled endpoint subscribed to ${type}${
          type.startsWith('webhook_endpoint.') ? '' : ' (or "*")'
        }, signed with the endpoint's secret (see the webhooks guide).`.trim(),
        tags: ['Webhook events'],
        parameters: [
          { $ref: '#/components/parameters/ServiceSignature' },
          { $ref: '#/components/parameters/WebhookId' },
          { $ref: '#/components/parameters/WebhookTimestamp' },
          { $ref: '#/components/parameters/WebhookSignature' },
        ],
        requestBody: {
          content: { 'application/json': { schema: payload, example: example(payload) } },
        } as Operation['requestBody'],
        responses: {
          '200': { description: 'Any 2xx answer within the time-out acknowledges the delivery.' },
          '401': {
            description:
              'What a receiver answers when the signature does not verify; like every non-2xx answer it counts as a failed attempt.',
          },
        },
      },
    };
  }
  tags.set(
    'Webhook events',
    'The events POSTed to webhook endpoints: the Event envelope with the resource in data.',
  );

  const errorObject: Schema = {
    type: 'object',
    required: ['type', 'code', 'message', 'doc_url'],
    properties: {
      type: {
        type: 'string',
        enum: [...new Set(Object.values(catalog).map((e) => e.type))],
        description: 'The category of the error.',
      },
      code: {
        type: 'string',
        enum: Object.keys(catalog),
        description: 'What went wrong, for programs; each is documented at doc_url.',
      },
      message: { type: 'string', description: 'What went wrong, for people.' },
      param: {
        type: 'string',
        description: 'The offending parameter (dotted for nested fields), when there is one.',
      },
      doc_url: { type: 'string', format: 'uri', description: 'Where this code is documented.' },
    },
  };
  schemas.Error = {
    type: 'object',
    description: 'The body of every non-2xx answer.',
    required: ['error'],
    properties: { error: errorObject },
  };

  const docsUrl = `${serverUrl}/docs`;
  const errorResponses: Record<string, Schema> = {};
  for (const [status, name] of Object.entries(ERROR_NAMES)) {
    const codes = errorCodes.get(Number(status));
    if (!codes) continue;
    const code = codes[0]!;
    const entry = catalog[code];
    errorResponses[name] = {
      description: `${codes.map((c) => `\`${c}\``).join(', ')} (see /docs/errors).`,
      headers: {
        'Request-Id': { $ref: '#/components/headers/RequestId' },
        ...(status === '429' ? { 'Retry-After': { $ref: '#/components/headers/RetryAfter' } } : {}),
        ...(status === '405' ? { Allow: { $ref: '#/components/headers/Allow' } } : {}),
      },
      content: {
        'application/json': {
          schema: { $ref: '#/components/schemas/Error' },
          example: {
            error: {
              type: entry.type,
              code,
              message: entry.message,
              ...(code === 'missing_required_field' ? { param: 'currency' } : {}),
              doc_url: `${docsUrl}/errors#${code}`,
            },
          },
        },
      },
    };
  }
  // Only what some operation uses (unused components are noise to linters).
  const used = new Set(
    Object.values(paths).flatMap((ops) =>
      Object.values(ops).flatMap((op) => Object.keys(op.responses).map(Number)),
    ),
  );
  for (const [status, name] of Object.entries(ERROR_NAMES)) {
    if (!used.has(Number(status))) delete errorResponses[name];
  }

  return {
    openapi: '3.1.0',
    info: {
      title: 'mcs API',
      version: 'v1',
      summary: 'Messaging and commerce API with signed webhooks.',
      description:
        'Products, orders, payments, conversations and messages under /v1, and every change pushed as a signed webhook event. Guides and the reference: /docs.',
      license: { name: 'UNLICENSED', identifier: 'LicenseRef-Proprietary' },
    },
    servers: [{ url: serverUrl, description: 'This server' }],
    security: [{ apiKey: [] }],
    tags: [...tags].map(([name, description]) => ({ name, description })),
    paths,
    webhooks,
    components: {
      schemas,
      responses: errorResponses,
      parameters: {
        IdempotencyKey: {
          name: 'Idempotency-Key',
          in: 'header',
          required: false,
          description:
            'A unique string chosen by the client (1 to 255 characters). Retrying with the same key within 24 hours returns the first answer (with Idempotent-Replayed: true) and changes nothing.',
          schema: { type: 'string', minLength: 1, maxLength: 255 },
        },
        ServiceSignature: {
          name: 'X-Service-Signature',
          in: 'header',
          required: true,
          description:
            'Lowercase hex HMAC-SHA256 of the raw body, keyed with the whole signing secret (whsec_ prefix included).',
          schema: { type: 'string', pattern: '^[0-9a-f]{64}$' },
        },
        WebhookId: {
          name: 'webhook-id',
          in: 'header',
          required: true,
          description: 'Standard Webhooks: the id of this message (stable across retries).',
          schema: { type: 'string' },
        },
        WebhookTimestamp: {
          name: 'webhook-timestamp',
          in: 'header',
          required: true,
          description: 'Standard Webhooks: seconds since the epoch when the attempt was signed.',
          schema: { type: 'string', pattern: '^[0-9]+$' },
        },
        WebhookSignature: {
          name: 'webhook-signature',
          in: 'header',
          required: true,
          description:
            'Standard Webhooks: "v1," then the base64 HMAC-SHA256 of "{webhook-id}.{webhook-timestamp}.{body}", keyed with the base64-decoded part of the secret after whsec_.',
          schema: { type: 'string', pattern: '^v1,' },
        },
      },
      headers: {
        RequestId: {
          description: 'Identifies the request; quote it when reporting a problem.',
          schema: { type: 'string', pattern: '^req_' },
        },
        RetryAfter: {
          description: 'Seconds to wait before retrying.',
          schema: { type: 'integer', minimum: 0 },
        },
        IdempotentReplayed: {
          description:
            'Present (true) when this answer replays the first answer to the same Idempotency-Key.',
          schema: { type: 'string', enum: ['true'] },
        },
        Allow: {
          description: 'The methods the path accepts.',
          schema: { type: 'string' },
        },
      },
      securitySchemes: {
        apiKey: {
          type: 'http',
          scheme: 'bearer',
          description:
            'An API key: sk_test_… / sk_live_… (secret, every route) or pk_test_… / pk_live_… (publishable, reads of the product catalog only).',
        },
      },
    },
  };
}
