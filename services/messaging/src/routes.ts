import type { ConnectRouter } from '@connectrpc/connect';

/** Every RPC of the messaging service; conversations and messages are still to come. */
export function routes() {
  return (_router: ConnectRouter) => {};
}
