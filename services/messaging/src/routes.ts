import type { ConnectRouter } from '@connectrpc/connect';
import { messaging } from '@mcs/proto';
import type { Deps } from './deps.ts';
import { conversationHandlers } from './handlers/conversations.ts';
import { messageHandlers, messageTestHelperHandlers } from './handlers/messages.ts';

/** Every RPC of the messaging service; shared by main.ts and the tests. */
export function routes(deps: Deps) {
  return (router: ConnectRouter) => {
    router.service(messaging.ConversationService, conversationHandlers(deps));
    router.service(messaging.MessageService, messageHandlers(deps));
    router.service(messaging.MessageTestHelperService, messageTestHelperHandlers(deps));
  };
}
