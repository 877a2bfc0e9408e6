// The OpenAPI 3.1 document, derived from the same descriptors and route table as the gateway
// itself, so it cannot drift from what is served.
import { type DescField, type DescMessage, getOption, ScalarType } from '@bufbuild/protobuf';
import { catalog } from '@mcs/errors';
import { api } from '@mcs/proto';
import { enumValueName, fieldFlags, isInternal, isListResponse, objectName } from '@mcs/rest';
import type { Route } from './routes.ts';

type Schema = Record<string, unknown>;

const schemaName = (d: DescMessage) =>
  d.typeName
    .split('.')
    .slice(1)
    .filter((p) => !/^v\d+$/.test(p))
    .join('_');

const isRequired = (f: DescField) => fieldFlags(f).required;

export function buildOpenApi(routes: Route[], serverUrl: string): Record<string, unknown> {
  const schemas: Record<string, Schema> = {};

  function ref(desc: DescMessage): Schema {
    if (desc.typeName === 'google.protobuf.Timestamp') return { type: 'string', format: 'date-time' };
    const name = schemaName(desc);
    if (!schemas[name]) {
      schemas[name] = {}; // reserve first: messages may refer to themselves
      schemas[name] = messageSchema(desc);
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

  function fieldSchema(f: DescField): Schema {
    switch (f.fieldKind) {
      case 'scalar':
        return scalar(f.scalar);
      case 'enum':
        return {
          type: 'string',
          enum: f.enum.values.map((v) => enumValueName(f.enum, v.number)).filter((v) => v !== null),
        };
      case 'message':
        return ref(f.message);
      case 'list':
        return {
          type: 'array',
          items:
            f.listKind === 'scalar'
              ? scalar(f.scalar)
              : f.listKind === 'enum'
                ? { type: 'string' }
                : ref(f.message),
        };
      case 'map':
        return { type: 'object', additionalProperties: f.mapKind === 'message' ? ref(f.message) : {} };
      default:
        return {};
    }
  }

  function messageSchema(desc: DescMessage): Schema {
    const properties: Record<string, Schema> = {};
    const object = objectName(desc);
    const fields = desc.fields.filter((f) => !isInternal(f));
    const id = fields.find((f) => f.name === 'id');
    if (id && object)
      properties.id = { type: 'string', examples: [`${getOption(desc, api.resource).idPrefix}_…`] };
    if (object) properties.object = { const: object };
    let dataDone = false;
    for (const f of fields) {
      if (f === id && object) continue;
      if (f.oneof?.name === 'data') {
        if (dataDone) continue;
        dataDone = true;
        properties.data = { oneOf: f.oneof.fields.map(fieldSchema) };
        continue;
      }
      properties[f.name] = fieldSchema(f);
    }
    const required = fields.filter(isRequired).map((f) => f.name);
    return { type: 'object', properties, ...(required.length ? { required } : {}) };
  }

  const errorSchema: Schema = {
    type: 'object',
    required: ['error'],
    properties: {
      error: {
        type: 'object',
        required: ['type', 'code', 'message', 'doc_url'],
        properties: {
          type: { type: 'string', enum: [...new Set(Object.values(catalog).map((e) => e.type))] },
          code: { type: 'string', enum: Object.keys(catalog) },
          message: { type: 'string' },
          param: { type: 'string' },
          doc_url: { type: 'string', format: 'uri' },
        },
      },
    },
  };
  const errorResponse = {
    description: 'Error (see /docs/errors)',
    content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
  };

  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    const input = route.method.input;
    const pathParams = route.segments.flatMap((s) => ('param' in s ? [s.param] : []));
    const parameters: Schema[] = pathParams.map((name) => ({
      name,
      in: 'path',
      required: true,
      schema: { type: 'string' },
    }));
    if (!route.body) {
      for (const f of input.fields) {
        if (pathParams.includes(f.name) || isInternal(f)) continue;
        parameters.push({ name: f.name, in: 'query', required: false, schema: fieldSchema(f) });
      }
    }
    if (route.httpMethod === 'POST') {
      parameters.push({
        name: 'Idempotency-Key',
        in: 'header',
        required: false,
        schema: { type: 'string', minLength: 1, maxLength: 255 },
      });
    }
    const output = route.method.output;
    const success = isListResponse(output)
      ? {
          type: 'object',
          properties: {
            object: { const: 'list' },
            data: fieldSchema(output.fields.find((f) => f.name === 'data')!),
            has_more: { type: 'boolean' },
            url: { type: 'string' },
          },
        }
      : ref(output);
    const bodyFields = input.fields.filter((f) => !pathParams.includes(f.name) && !isInternal(f));
    const operation: Record<string, unknown> = {
      operationId: route.method.name,
      tags: [route.service.name],
      summary: `${route.method.name} (${route.service.typeName})`,
      ...(route.testHelper ? { description: 'Test helper: test-mode keys only.' } : {}),
      parameters,
      ...(route.body && bodyFields.length
        ? {
            requestBody: {
              required: true,
              content: {
                'application/json': {
                  schema: {
                    type: 'object',
                    additionalProperties: false,
                    properties: Object.fromEntries(bodyFields.map((f) => [f.name, fieldSchema(f)])),
                    required: bodyFields.filter(isRequired).map((f) => f.name),
                  },
                },
              },
            },
          }
        : {}),
      responses: {
        '200': { description: 'OK', content: { 'application/json': { schema: success } } },
        '4XX': errorResponse,
        '5XX': errorResponse,
      },
      security: [{ apiKey: [] }],
    };
    paths[route.path] ??= {};
    paths[route.path]![route.httpMethod.toLowerCase()] = operation;
  }

  return {
    openapi: '3.1.0',
    info: {
      title: 'mcs API',
      version: 'v1',
      description: 'Messaging and commerce API. Every change is pushed as a signed webhook event.',
    },
    servers: [{ url: serverUrl }],
    paths,
    components: {
      schemas: { ...schemas, Error: errorSchema },
      securitySchemes: {
        apiKey: { type: 'http', scheme: 'bearer', description: 'sk_test_…, sk_live_…, pk_test_…, pk_live_…' },
      },
    },
  };
}
