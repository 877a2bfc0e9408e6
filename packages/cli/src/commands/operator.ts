// Operator commands (CONTRACT §1): run against the accounts service of the running stack over
// Connect (ACCOUNTS_URL, else PORT + 1), not the REST API: they make accounts and keys, so no
// key is needed to run them. Each prints one JSON object, whatever --json says.
import type { DescMessage, MessageShape } from '@bufbuild/protobuf';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createConnectTransport, Http2SessionManager } from '@connectrpc/connect-node';
import { serviceUrl } from '@mcs/kit/config';
import { accounts, api } from '@mcs/proto';
import { type JsonObject, render } from '@mcs/rest';
import { CliError, type Parsed, required, str, usageError } from '../args.ts';
import type { Command, Ctx } from '../context.ts';

const CALL_TIMEOUT_MS = 15_000;
const MAX_INT32 = 2_147_483_647;

type Client = ReturnType<typeof createClient<typeof accounts.AccountService>>;

function renderOf<D extends DescMessage>(
  desc: D,
  msg: MessageShape<D> | undefined,
  what: string,
): JsonObject {
  if (!msg) throw new Error(`the accounts service answered without the ${what}`);
  return render(desc, msg);
}

/** Runs `call` with a client of the accounts service; prints its answer as one JSON line. */
async function withAccounts(ctx: Ctx, call: (client: Client) => Promise<JsonObject>): Promise<number> {
  const url = serviceUrl('accounts', ctx.env);
  const sessions = new Http2SessionManager(url);
  try {
    const client = createClient(
      accounts.AccountService,
      createConnectTransport({ baseUrl: url, httpVersion: '2', sessionManager: sessions }),
    );
    ctx.out(`${JSON.stringify(await call(client))}\n`);
    return 0;
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

const opts = { timeoutMs: CALL_TIMEOUT_MS };

/** Reads one line from a terminal without echoing it. */
async function askHidden(prompt: string): Promise<string> {
  const stdin = process.stdin;
  process.stderr.write(prompt);
  stdin.setRawMode(true);
  stdin.resume();
  try {
    let text = '';
    for await (const chunk of stdin) {
      for (const ch of (chunk as Buffer).toString('utf8')) {
        if (ch === '\r' || ch === '\n') return text;
        if (ch === '\u0003') throw new CliError('cancelled');
        if (ch === '\u007f' || ch === '\b') text = [...text].slice(0, -1).join('');
        else if (ch >= ' ') text += ch;
      }
    }
    return text;
  } finally {
    stdin.setRawMode(false);
    stdin.pause();
    process.stderr.write('\n');
  }
}

/**
 * The owner's password for --password: asked twice on a terminal (not echoed), else the first
 * line of stdin (`printenv PW | mcs accounts create … --password`), so it never sits in argv,
 * where `ps` and the shell history would keep it.
 */
async function readPassword(): Promise<string> {
  if (process.stdin.isTTY) {
    const first = await askHidden('Dashboard password (10 to 200 characters): ');
    const again = await askHidden('The same password again: ');
    if (first !== again) throw new CliError('the two passwords differ');
    return first;
  }
  let text = '';
  for await (const chunk of process.stdin) text += chunk;
  const line = text.split(/\r?\n/)[0] ?? '';
  if (line === '') throw new CliError('--password: no password on stdin (pipe it in, or run on a terminal)');
  return line;
}
const OPERATOR =
  'Calls the accounts service at ACCOUNTS_URL (default http://127.0.0.1:(PORT+1), PORT defaulting to 8080)\n' +
  'and prints one JSON object on stdout; on failure, one line on stderr and exit code 1.';

const accountsCreate: Command = {
  name: 'accounts create',
  usage: 'mcs accounts create --email E [--name N] [--rate-limit R] [--password]',
  summary: 'Creates an account and prints it with its four keys (the only time they are shown).',
  options: {
    email: { type: 'string', description: "E: the owner's e-mail address" },
    name: { type: 'string', description: "N: the account's name" },
    'rate-limit': { type: 'string', description: "R: requests per second (default: the plan's)" },
    password: {
      type: 'boolean',
      description:
        "set the owner's dashboard password (sign-in with e-mail and password): asked on a terminal, else read from stdin",
    },
  },
  api: false,
  details: OPERATOR,
  async run(ctx, p: Parsed) {
    const email = required(p, 'email', this);
    let rateLimit = 0; // the plan's default
    const text = str(p, 'rate-limit');
    if (text !== undefined) {
      rateLimit = /^\d+$/.test(text) ? Number(text) : Number.NaN;
      if (!(rateLimit >= 1 && rateLimit <= MAX_INT32)) {
        throw usageError(`--rate-limit must be a whole number of requests per second, not "${text}"`, this);
      }
    }
    const password = p.values.password === true ? await readPassword() : '';
    return withAccounts(ctx, async (client) => {
      const res = await client.createAccount(
        { email, name: str(p, 'name') ?? '', rateLimit, password },
        opts,
      );
      return {
        account: renderOf(accounts.AccountSchema, res.account, 'account'),
        secret_key: res.secretKey,
        live_secret_key: res.liveSecretKey,
        publishable_key: res.publishableKey,
        live_publishable_key: res.livePublishableKey,
      };
    });
  },
};

const accountsSetPassword: Command = {
  name: 'accounts set-password',
  usage: 'mcs accounts set-password --account ACCOUNT_ID',
  summary: "Sets (or replaces) the owner's dashboard password: asked on a terminal, else read from stdin.",
  options: { account: { type: 'string', description: 'ACCOUNT_ID: the account' } },
  api: false,
  details: OPERATOR,
  async run(ctx, p) {
    const accountId = required(p, 'account', this);
    const password = await readPassword();
    return withAccounts(ctx, async (client) =>
      renderOf(
        accounts.AccountSchema,
        await client.setOwnerPassword({ accountId, password }, opts),
        'account',
      ),
    );
  },
};

const keysList: Command = {
  name: 'keys list',
  usage: 'mcs keys list --account ACCOUNT_ID',
  summary: "Lists an account's API keys (never their secrets).",
  options: { account: { type: 'string', description: 'ACCOUNT_ID: the account' } },
  api: false,
  details: OPERATOR,
  async run(ctx, p) {
    const accountId = required(p, 'account', this);
    return withAccounts(ctx, async (client) => {
      const res = await client.listApiKeys({ accountId }, opts);
      return { object: 'list', data: res.data.map((k) => renderOf(accounts.ApiKeySchema, k, 'key')) };
    });
  },
};

const keysCreate: Command = {
  name: 'keys create',
  usage: 'mcs keys create --account ACCOUNT_ID --kind secret|publishable [--live]',
  summary: 'Creates an API key and prints it with its secret (shown once).',
  options: {
    account: { type: 'string', description: 'ACCOUNT_ID: the account' },
    kind: { type: 'string', description: 'KIND: secret or publishable' },
    live: { type: 'boolean', description: 'a live-mode key (default: test mode)' },
  },
  api: false,
  details: OPERATOR,
  async run(ctx, p) {
    const accountId = required(p, 'account', this);
    const kindText = required(p, 'kind', this);
    let kind: accounts.KeyKind;
    if (kindText === 'secret') kind = accounts.KeyKind.SECRET;
    else if (kindText === 'publishable') kind = accounts.KeyKind.PUBLISHABLE;
    else throw usageError(`--kind must be secret or publishable, not "${kindText}"`, this);
    const livemode = p.values.live === true;
    return withAccounts(ctx, async (client) => {
      const res = await client.createApiKey({ accountId, kind, livemode }, opts);
      // The only time this key exists in plain text: shown once, with the key it belongs to.
      return { ...renderOf(accounts.ApiKeySchema, res.key, 'key'), secret: res.secret };
    });
  },
};

const keysRevoke: Command = {
  name: 'keys revoke',
  usage: 'mcs keys revoke --account ACCOUNT_ID --key KEY_ID',
  summary: 'Revokes an API key: it stops working at once.',
  options: {
    account: { type: 'string', description: 'ACCOUNT_ID: the account' },
    key: { type: 'string', description: 'KEY_ID: the key' },
  },
  api: false,
  details: OPERATOR,
  async run(ctx, p) {
    const accountId = required(p, 'account', this);
    const keyId = required(p, 'key', this);
    return withAccounts(ctx, async (client) =>
      renderOf(accounts.ApiKeySchema, await client.revokeApiKey({ accountId, keyId }, opts), 'key'),
    );
  },
};

export const OPERATOR_COMMANDS: Command[] = [
  accountsCreate,
  accountsSetPassword,
  keysList,
  keysCreate,
  keysRevoke,
];
