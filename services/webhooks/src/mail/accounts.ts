// The account owner's e-mail address, asked of the accounts service over Connect (a service
// never reads another's tables nor imports its code).
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { accounts } from '@mcs/proto';

export interface AccountDirectory {
  /** The account's e-mail address, or null when there is no such account. */
  emailOf(accountId: string): Promise<string | null>;
}

export function createAccountDirectory(baseUrl: string): AccountDirectory {
  const client = createClient(
    accounts.AccountService,
    createConnectTransport({ baseUrl, httpVersion: '2', useBinaryFormat: true }),
  );
  return {
    async emailOf(accountId) {
      try {
        const account = await client.getAccount({ id: accountId }, { timeoutMs: 10_000 });
        return account.email || null;
      } catch (err) {
        if (ConnectError.from(err).code === Code.NotFound) return null;
        throw err;
      }
    },
  };
}
