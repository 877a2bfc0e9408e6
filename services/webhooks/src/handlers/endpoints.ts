// WebhookEndpointService over Connect: decode, call the domain, encode.
import { create } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { ServiceImpl } from '@connectrpc/connect';
import { callerOf } from '@mcs/kit/caller';
import { webhooks } from '@mcs/proto';
import type { Deps } from '../deps.ts';
import { createEndpoint, type Endpoint, getEndpoint, listEndpoints } from '../domain/endpoints.ts';

const STATUS = {
  enabled: webhooks.EndpointStatus.ENABLED,
  unhealthy: webhooks.EndpointStatus.UNHEALTHY,
  disabled: webhooks.EndpointStatus.DISABLED,
} as const;

export function toProtoEndpoint(e: Endpoint, secret?: string): webhooks.WebhookEndpoint {
  return create(webhooks.WebhookEndpointSchema, {
    id: e.id,
    url: e.url,
    events: e.events,
    ...(e.description !== null ? { description: e.description } : {}),
    status: STATUS[e.status],
    ...(secret !== undefined ? { secret } : {}),
    livemode: e.livemode,
    createdAt: timestampFromDate(e.createdAt),
  });
}

export function endpointHandlers(deps: Deps): ServiceImpl<typeof webhooks.WebhookEndpointService> {
  return {
    async createWebhookEndpoint(req, ctx) {
      const caller = callerOf(ctx);
      const { endpoint, secret } = await deps.db.transaction((tx) =>
        createEndpoint(tx, caller, { url: req.url, events: req.events, description: req.description }, deps),
      );
      return toProtoEndpoint(endpoint, secret);
    },
    async getWebhookEndpoint(req, ctx) {
      return toProtoEndpoint(await getEndpoint(deps.db, callerOf(ctx), req.id));
    },
    async listWebhookEndpoints(req, ctx) {
      const page = await listEndpoints(deps.db, callerOf(ctx), {
        limit: req.limit,
        startingAfter: req.startingAfter || undefined,
      });
      return create(webhooks.ListWebhookEndpointsResponseSchema, {
        data: page.data.map((e) => toProtoEndpoint(e)),
        hasMore: page.hasMore,
      });
    },
  };
}
