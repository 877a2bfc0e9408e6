// Operator commands (CONTRACT §1): run against the accounts service of the running stack over
// Connect (ACCOUNTS_URL, else PORT + 1), not the REST API: they make accounts and keys, so no
// key is needed to run them. Each prints one JSON object, whatever --json says.
import type { JsonObject } from '@mcs/rest';
import { CliError, type Parsed, required, str, usageError } from '../args.ts';
import type { Command, Ctx } from '../context.ts';
import { askHidden } from '../prompt.ts';
import type { AccountsOps } from './accounts-client.ts';

const MAX_INT32 = 2_147_483_647;

/** Runs `call` against the accounts service; prints its answer as one JSON line. */
async function withAccounts(ctx: Ctx, call: (ops: AccountsOps) => Promise<JsonObject>): Promise<number> {
  // Loaded here, not at the top: the Connect client is most of the CLI's start-up otherwise.
  const client = await import('./accounts-client.ts');
  ctx.out(`${JSON.stringify(await client.withAccounts(ctx.env, call))}\n`);
  return 0;
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
    return withAccounts(ctx, (ops) =>
      ops.createAccount({ email, name: str(p, 'name') ?? '', rateLimit, password }),
    );
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
    return withAccounts(ctx, (ops) => ops.setOwnerPassword(accountId, password));
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
    return withAccounts(ctx, (ops) => ops.listApiKeys(accountId));
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
    if (kindText !== 'secret' && kindText !== 'publishable') {
      throw usageError(`--kind must be secret or publishable, not "${kindText}"`, this);
    }
    const livemode = p.values.live === true;
    return withAccounts(ctx, (ops) => ops.createApiKey(accountId, kindText, livemode));
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
    return withAccounts(ctx, (ops) => ops.revokeApiKey(accountId, keyId));
  },
};

export const OPERATOR_COMMANDS: Command[] = [
  accountsCreate,
  accountsSetPassword,
  keysList,
  keysCreate,
  keysRevoke,
];
