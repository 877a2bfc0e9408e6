import type { ConnectRouter } from '@connectrpc/connect';
import { commerce } from '@mcs/proto';
import type { Deps } from './deps.ts';
import { orderHandlers } from './handlers/orders.ts';

/** Every RPC of the commerce service; shared by main.ts and the tests. */
export function routes(deps: Deps) {
  return (router: ConnectRouter) => {
    router.service(commerce.OrderService, orderHandlers(deps));
  };
}
