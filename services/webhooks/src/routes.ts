import type { ConnectRouter } from '@connectrpc/connect';
import { webhooks } from '@mcs/proto';
import type { Deps } from './deps.ts';
import { endpointHandlers } from './handlers/endpoints.ts';
import { eventHandlers } from './handlers/events.ts';
import { settingsHandlers } from './handlers/settings.ts';

/** Every RPC of the webhooks service; shared by main.ts and the tests. */
export function routes(deps: Deps) {
  return (router: ConnectRouter) => {
    router.service(webhooks.WebhookEndpointService, endpointHandlers(deps));
    router.service(webhooks.EventService, eventHandlers(deps));
    router.service(webhooks.WebhookSettingsService, settingsHandlers(deps));
  };
}
