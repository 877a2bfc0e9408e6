// The operator commands' client of the accounts service (Connect over HTTP/2). Loaded only
// when an operator command runs: its protobuf and Connect modules are most of what the CLI
// would otherwise load, and every other command (and --help) starts without them.
import type { DescMessage, MessageShape } from '@bufbuild/protobuf';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createConnectTransport, Http2SessionManager } from '@connectrpc/connect-node';
import { serviceUrl } from '@mcs/kit/config';
import { accounts, api } from '@mcs/proto';
import { type JsonObject, render } from '@mcs/rest';
import { CliError } from '../args.ts';

const CALL_TIMEOUT_MS = 15_000;
const opts = { timeoutMs: CALL_TIMEOUT_MS };

type Client = ReturnType<typeof createClient<typeof accounts.AccountService>>;

function renderOf<D extends DescMessage>(
  desc: D,
  msg: MessageShape<D> | undefined,
  what: string,
): JsonObject {
  if (!msg) throw new Error(`the accounts service answered without the ${what}`);
  return render(desc, msg);
}

/** What the operator commands ask of the accounts service; each answer is the JSON to print. */
export interface AccountsOps {
  createAccount(input: {
    email: string;
    name: string;
    rateLimit: number;
    password: string;
  }): Promise<JsonObject>;
  setOwnerPassword(accountId: string, password: string): Promise<JsonObject>;
  listApiKeys(accountId: string): Promise<JsonObject>;
  createApiKey(accountId: string, kind: 'secret' | 'publishable', livemode: boolean): Promise<JsonObject>;
  revokeApiKey(accountId: string, keyId: string): Promise<JsonObject>;
}

function opsOf(client: Client): AccountsOps {
  return {
    async createAccount(input) {
      const res = await client.createAccount(input, opts);
      return {
        account: renderOf(accounts.AccountSchema, res.account, 'account'),
        secret_key: res.secretKey,
        live_secret_key: res.liveSecretKey,
        publishable_key: res.publishableKey,
        live_publishable_key: res.livePublishableKey,
      };
    },
    async setOwnerPassword(accountId, password) {
      return renderOf(
        accounts.AccountSchema,
        await client.setOwnerPassword({ accountId, password }, opts),
        'account',
      );
    },
    async listApiKeys(accountId) {
      const res = await client.listApiKeys({ accountId }, opts);
      return { object: 'list', data: res.data.map((k) => renderOf(accounts.ApiKeySchema, k, 'key')) };
    },
    async createApiKey(accountId, kindName, livemode) {
      const kind = kindName === 'secret' ? accounts.KeyKind.SECRET : accounts.KeyKind.PUBLISHABLE;
      const res = await client.createApiKey({ accountId, kind, livemode }, opts);
      // The only time this key exists in plain text: shown once, with the key it belongs to.
      return { ...renderOf(accounts.ApiKeySchema, res.key, 'key'), secret: res.secret };
    },
    async revokeApiKey(accountId, keyId) {
      return renderOf(accounts.ApiKeySchema, await client.revokeApiKey({ accountId, keyId }, opts), 'key');
    },
  };
}

/**
 * Runs `call` against the accounts service at ACCOUNTS_URL (else PORT + 1) and returns its
 * answer; a failure becomes a CliError that says what went wrong in a line.
 */
export async function withAccounts(
  env: NodeJS.ProcessEnv,
  call: (ops: AccountsOps) => Promise<JsonObject>,
): Promise<JsonObject> {
  const url = serviceUrl('accounts', env);
  const sessions = new Http2SessionManager(url);
  try {
    const client = createClient(
      accounts.AccountService,
      createConnectTransport({ baseUrl: url, httpVersion: '2', sessionManager: sessions }),
    );
    return await call(opsOf(client));
  } catch (err) {
    throw new CliError(describe(err, url));
  } finally {
    sessions.abort();
  }
}

function describe(err: unknown, url: string): string {
  if (err instanceof CliError) return err.message;
  if (err instanceof ConnectError) {
    const [detail] = err.findDetails(api.ErrorDetailSchema);
    if (detail) return detail.param ? `${detail.message} (param: ${detail.param})` : detail.message;
    if (err.code === Code.Unavailable) {
      return `cannot reach the accounts service at ${url}: is the stack running (pnpm start)?`;
    }
    if (err.code === Code.DeadlineExceeded) return `the accounts service at ${url} did not answer in time`;
    return `the accounts service at ${url} failed: ${err.rawMessage} (${Code[err.code]})`;
  }
  return `unexpected error: ${err instanceof Error ? err.message : String(err)}`;
}
