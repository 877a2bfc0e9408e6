// The OpenAPI 3.1 document, derived from the same descriptors and route table as the gateway
// itself, so it cannot drift from what is served: every field the renderer writes is required
// in the response schemas, `optional` proto fields are nullable, and the words and input rules
// the descriptors cannot carry come from openapi-meta.ts. Here: the operations of the routes,
// the webhooks (one per event type), the errors and the document; the component schemas are
// made by openapi-schemas.ts, the `mcs listen` operations by openapi-listen.ts.
import { getOption } from '@bufbuild/protobuf';
import { catalog, type ErrorCode, statusOf } from '@mcs/errors';
import { api, events } from '@mcs/proto';
import { enumValueName, fieldFlags, isInternal, isListResponse, objectName } from '@mcs/rest';
import { listenOperations } from './openapi-listen.ts';
import {
  eventMeta,
  fieldMeta,
  idExample,
  idPattern,
  operationErrors,
  operationMeta,
  tagMeta,
} from './openapi-meta.ts';
import { createSchemaSet, isRequiredInput, pascal, type Schema } from './openapi-schemas.ts';
import type { Route } from './routes.ts';

export type { Schema };

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

const ERROR_NAMES: Record<number, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  408: 'RequestTimeout',
  409: 'Conflict',
  413: 'PayloadTooLarge',
  415: 'UnsupportedMediaType',
  422: 'UnprocessableEntity',
  429: 'TooManyRequests',
  431: 'RequestHeaderFieldsTooLarge',
  500: 'InternalServerError',
  503: 'ServiceUnavailable',
};

/**
 * Codes of the catalog no route of this document answers: the dashboard's sign-in and the
 * operator's `mcs accounts` commands (the accounts service) have them.
 */
const NOT_IN_API = new Set<string>([
  'password_too_weak',
  'email_taken',
  'owner_credentials_invalid',
  'login_throttled',
]);

/** The catalog codes the API answers, by status. */
function codesByStatus(): Map<number, ErrorCode[]> {
  const out = new Map<number, ErrorCode[]>();
  for (const code of (Object.keys(catalog) as ErrorCode[]).filter((c) => !NOT_IN_API.has(c))) {
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
  else pick(404, (c) => c === 'route_not_found' || own.includes(c));
  pick(405);
  pick(408); // the request did not arrive in time (any route, before it is read)
  if (post) pick(413);
  // 409: a key in flight (keyed routes), and an operation's own (a listen endpoint in use).
  pick(409, (c) => (specific.has(c) ? own.includes(c) : t.keyed));
  if (t.keyed) pick(422);
  if (post && (t.keyed || t.jsonOnly)) pick(415);
  pick(429);
  pick(431); // headers over 16 KiB (any route)
  pick(500);
  pick(503);
  return out;
}

export function buildOpenApi(routes: Route[], serverUrl: string): OpenApiDocument {
  const types = eventTypes();
  const errorCodes = codesByStatus();
  const set = createSchemaSet(types);
  const { schemas, ref, fieldSchema, inputSchema, listSchema, example } = set;

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
    // PATCH is accepted as an update's synonym (routes.ts; Allow lists it): one operation, said here.
    if (route.update) {
      operation.description =
        `${operation.description ?? ''} Also accepted as PATCH to the same path (the same body, Idempotency-Key included).`.trim();
    }
    if (!operation.description) delete operation.description;
    if (!parameters.length) delete operation.parameters;
    const bodyFields = input.fields.filter((f) => !pathParams.includes(f.name) && !isInternal(f));
    if (route.body) {
      const schema = inputSchema(input, pathParams);
      operation.requestBody = {
        ...(bodyFields.some((f) => isRequiredInput(input, f)) ? { required: true } : {}),
        content: { 'application/json': { schema, example: meta?.requestExample ?? example(schema) } },
      } as Operation['requestBody'];
    }
    paths[route.path] ??= {};
    paths[route.path]![route.httpMethod.toLowerCase()] = operation;
  }

  // `mcs listen` (gateway/src/listen.ts): served by the gateway itself, outside the proto routes.
  for (const { path, method, op, traits } of listenOperations(set)) {
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
  // The probe of an auto_recover endpoint: an envelope like the events', of type ping, about
  // the endpoint (webhooks service delivery/prober.ts pingBody), recorded nowhere.
  schemas.PingEvent = {
    type: 'object',
    description:
      'The probe of an unhealthy endpoint with auto_recover: signed like any delivery, recorded nowhere (not in the event log, no delivery). A 2xx answer re-enables the endpoint and replays what it missed.',
    required: ['id', 'object', 'type', 'created_at', 'data', 'livemode'],
    additionalProperties: false,
    properties: {
      id: {
        type: 'string',
        pattern: idPattern('evt'),
        examples: [idExample('evt')],
        description: 'A new id for each probe.',
      },
      object: { type: 'string', const: 'event' },
      type: { type: 'string', const: 'ping' },
      created_at: { type: 'string', format: 'date-time' },
      data: {
        type: 'object',
        required: ['object', 'id', 'url'],
        additionalProperties: false,
        properties: {
          object: { type: 'string', const: 'webhook_endpoint' },
          id: {
            type: 'string',
            pattern: idPattern('we'),
            examples: [idExample('we')],
            description: 'The endpoint probed.',
          },
          url: { type: 'string', examples: ['https://example.com/webhooks'], description: 'Its URL.' },
        },
      },
      livemode: { type: 'boolean' },
    },
  };
  const ping = { $ref: '#/components/schemas/PingEvent' };
  webhooks.ping = {
    post: {
      operationId: 'PingWebhook',
      summary: 'ping',
      description:
        "Only to an endpoint with auto_recover while it is unhealthy: the first WEBHOOK_PROBE_INTERVAL (5 min) after it turned unhealthy, then twice as long after each failed probe, up to 24 h. Signed with the endpoint's secret like every delivery.",
      tags: ['Webhook events'],
      parameters: [
        { $ref: '#/components/parameters/ServiceSignature' },
        { $ref: '#/components/parameters/WebhookId' },
        { $ref: '#/components/parameters/WebhookTimestamp' },
        { $ref: '#/components/parameters/WebhookSignature' },
      ],
      requestBody: {
        content: { 'application/json': { schema: ping, example: example(ping) } },
      } as Operation['requestBody'],
      responses: {
        '200': { description: 'Any 2xx answer within the time-out re-enables the endpoint.' },
      },
    },
  };
  tags.set(
    'Webhook events',
    'The events POSTed to webhook endpoints: the Event envelope with the resource in data (and ping, the probe of an unhealthy auto_recover endpoint).',
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
        enum: Object.keys(catalog).filter((c) => !NOT_IN_API.has(c)),
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
            'A unique string chosen by the client (1 to 255 characters). Retrying with the same key within 24 hours returns the first answer (with Idempotent-Replayed: true) and changes nothing. Keys are scoped to the account, the mode and the service owning the route (products, orders, payments; conversations, messages; webhook endpoints, events, settings).',
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
