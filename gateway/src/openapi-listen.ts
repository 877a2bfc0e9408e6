// The operations of `mcs listen` (gateway/src/listen.ts) in the OpenAPI document (openapi.ts):
// served by the gateway itself, outside the proto routes, so described here by hand, with the
// schemas of the stream's frames and of an acknowledgement.
import { webhooks as webhooksPb } from '@mcs/proto';
import type { Operation, OperationTraits } from './openapi.ts';
import { idExample, idPattern, tagMeta } from './openapi-meta.ts';
import type { SchemaSet } from './openapi-schemas.ts';

export interface ListenOperation {
  path: string;
  method: string;
  op: Operation;
  traits: OperationTraits;
}

/** Registers the listen schemas in `set` and answers the listen operations (errors not filled in). */
export function listenOperations({ schemas, ref }: SchemaSet): ListenOperation[] {
  const endpointRef = ref(webhooksPb.WebhookEndpointSchema, false);
  schemas.ListenFrame = {
    description:
      'One line of the listen stream (NDJSON): ready once, then a delivery per attempt, a ping every ping_interval_ms (15 s unless the operator set LISTEN_PING_INTERVAL).',
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
    required: ['type', 'endpoint', 'ping_interval_ms'],
    properties: {
      type: { type: 'string', const: 'ready' },
      endpoint: endpointRef,
      ping_interval_ms: {
        type: 'integer',
        minimum: 1000,
        description:
          'How often a ping line comes; a client that sees no line for a few intervals should take the connection for dead and open a new one.',
      },
    },
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
  return [
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
        parameters: [
          listenParam,
          {
            name: 'Mcs-Listen-Session',
            in: 'header',
            required: false,
            description:
              'A random token (16–128 characters of A–Z, a–z, 0–9, _ and -) the client keeps for its whole run. While a stream of this endpoint is open, another one is refused with listen_endpoint_in_use, unless it carries the same token: then it is the same client reconnecting, and the open stream (a connection that died without a word) ends in its favour.',
            schema: { type: 'string', pattern: '^[A-Za-z0-9_-]{16,128}$' },
          },
        ],
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
}
