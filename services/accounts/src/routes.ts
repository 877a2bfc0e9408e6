import type { ConnectRouter } from '@connectrpc/connect';
import { accounts } from '@mcs/proto';
import type { Deps } from './deps.ts';
import { accountHandlers } from './handlers/accounts.ts';

/** Every RPC of the accounts service; shared by main.ts and the tests. */
export function routes(deps: Deps) {
  return (router: ConnectRouter) => {
    router.service(accounts.AccountService, accountHandlers(deps));
  };
}
