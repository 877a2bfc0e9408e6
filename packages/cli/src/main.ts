// `pnpm mcs …`: operator commands, run against the accounts service of the running stack over
// Connect (its address from the same environment as `pnpm start`: ACCOUNTS_URL, else PORT + 1).
//
// Results are one JSON object on stdout; failures are one line on stderr and exit code 1.
import { type ParseArgsOptionsConfig, parseArgs } from 'node:util';
import type { DescMessage, MessageShape } from '@bufbuild/protobuf';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createConnectTransport, Http2SessionManager } from '@connectrpc/connect-node';
import { serviceUrl } from '@mcs/kit/config';
import { accounts, api } from '@mcs/proto';
import { type JsonObject, render } from '@mcs/rest';

const USAGE = {
  'accounts create': 'mcs accounts create --email E [--name N] [--rate-limit R]',
  'keys list': 'mcs keys list --account ACCOUNT_ID',
  'keys create': 'mcs keys create --account ACCOUNT_ID --kind secret|publishable [--live]',
  'keys revoke': 'mcs keys revoke --account ACCOUNT_ID --key KEY_ID',
} as const;
type Command = keyof typeof USAGE;

const HELP = `usage:
${Object.values(USAGE)
  .map((u) => `  ${u}`)
  .join('\n')}

Calls the accounts service at ACCOUNTS_URL (default http://127.0.0.1:(PORT+1), PORT defaulting to 8080).
Prints one JSON object on stdout; on failure, one line on stderr and exit code 1.
`;

const CALL_TIMEOUT_MS = 15_000;
const MAX_INT32 = 2_147_483_647;

/** A failure to report as one line on stderr. */
class CliError extends Error {}

function usageError(problem: string, command?: Command): CliError {
  const usage = command
    ? USAGE[command]
    : 'mcs accounts create | keys list | keys create | keys revoke (see mcs --help)';
  return new CliError(`${problem}. Usage: ${usage}`);
}

function isCommand(name: string): name is Command {
  return Object.hasOwn(USAGE, name);
}

type Client = ReturnType<typeof createClient<typeof accounts.AccountService>>;

function renderKey(key: accounts.ApiKey | undefined): JsonObject {
  if (!key) throw new Error('the accounts service answered without the key');
  return render(accounts.ApiKeySchema, key);
}

function renderOf<D extends DescMessage>(
  desc: D,
  msg: MessageShape<D> | undefined,
  what: string,
): JsonObject {
  if (!msg) throw new Error(`the accounts service answered without the ${what}`);
  return render(desc, msg);
}

/** Runs one command; returns what to print. Option values are checked here, rules by the service. */
async function run(command: Command, args: string[], client: Client): Promise<JsonObject> {
  const opts = { timeoutMs: CALL_TIMEOUT_MS };
  switch (command) {
    case 'accounts create': {
      const v = parse(command, args, {
        email: { type: 'string' },
        name: { type: 'string' },
        'rate-limit': { type: 'string' },
      });
      if (v.email === undefined) throw usageError('missing --email', command);
      let rateLimit = 0; // the plan's default
      if (v['rate-limit'] !== undefined) {
        const text = v['rate-limit'];
        rateLimit = /^\d+$/.test(text) ? Number(text) : Number.NaN;
        if (!(rateLimit >= 1 && rateLimit <= MAX_INT32)) {
          throw usageError(
            `--rate-limit must be a whole number of requests per second, not "${text}"`,
            command,
          );
        }
      }
      const res = await client.createAccount({ email: v.email, name: v.name ?? '', rateLimit }, opts);
      return {
        account: renderOf(accounts.AccountSchema, res.account, 'account'),
        secret_key: res.secretKey,
        live_secret_key: res.liveSecretKey,
        publishable_key: res.publishableKey,
        live_publishable_key: res.livePublishableKey,
      };
    }
    case 'keys list': {
      const v = parse(command, args, { account: { type: 'string' } });
      const accountId = required(v.account, '--account', command);
      const res = await client.listApiKeys({ accountId }, opts);
      return { object: 'list', data: res.data.map(renderKey) };
    }
    case 'keys create': {
      const v = parse(command, args, {
        account: { type: 'string' },
        kind: { type: 'string' },
        live: { type: 'boolean' },
      });
      const accountId = required(v.account, '--account', command);
      const kindText = required(v.kind, '--kind', command);
      let kind: accounts.KeyKind;
      if (kindText === 'secret') kind = accounts.KeyKind.SECRET;
      else if (kindText === 'publishable') kind = accounts.KeyKind.PUBLISHABLE;
      else throw usageError(`--kind must be secret or publishable, not "${kindText}"`, command);
      const res = await client.createApiKey({ accountId, kind, livemode: v.live ?? false }, opts);
      // The only time this key exists in plain text: shown once, with the key it belongs to.
      return { ...renderKey(res.key), secret: res.secret };
    }
    case 'keys revoke': {
      const v = parse(command, args, { account: { type: 'string' }, key: { type: 'string' } });
      const accountId = required(v.account, '--account', command);
      const keyId = required(v.key, '--key', command);
      return renderKey(await client.revokeApiKey({ accountId, keyId }, opts));
    }
    default: {
      const never: never = command;
      throw new Error(`unhandled command ${String(never)}`);
    }
  }
}

function parse<O extends ParseArgsOptionsConfig>(command: Command, args: string[], options: O) {
  try {
    return parseArgs({ args, options, strict: true, allowPositionals: false }).values;
  } catch (err) {
    // Node's messages run on with advice about '--'; the first sentence says what is wrong.
    const first = (err as Error).message.split(/(?<=\.) /)[0]?.replace(/\.$/, '') ?? 'bad arguments';
    throw usageError(first, command);
  }
}

function required(value: string | undefined, flag: string, command: Command): string {
  if (value === undefined || value === '') throw usageError(`missing ${flag}`, command);
  return value;
}

/** One line for whatever a call threw. */
function describeFailure(err: unknown, url: string): string {
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

async function main(argv: string[]): Promise<number> {
  if (argv.length === 0 || argv.includes('--help') || argv.includes('-h')) {
    if (argv.length === 0) {
      process.stderr.write(`${usageError('missing command').message}\n`);
      return 1;
    }
    process.stdout.write(HELP);
    return 0;
  }
  const url = serviceUrl('accounts');
  const name = argv.slice(0, 2).join(' ');
  const sessions = new Http2SessionManager(url);
  try {
    if (!isCommand(name)) throw usageError(`unknown command "${name}"`);
    const client = createClient(
      accounts.AccountService,
      createConnectTransport({ baseUrl: url, httpVersion: '2', sessionManager: sessions }),
    );
    const out = await run(name, argv.slice(2), client);
    process.stdout.write(`${JSON.stringify(out)}\n`);
    return 0;
  } catch (err) {
    process.stderr.write(`${describeFailure(err, url)}\n`);
    return 1;
  } finally {
    sessions.abort();
  }
}

process.exitCode = await main(process.argv.slice(2));
