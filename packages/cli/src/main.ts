// `pnpm mcs …` (also `npx mcs` in the workspace): the developer's CLI. Operator commands make
// accounts and keys against the accounts service; the others use the public REST API with an
// API key (mcs login, --api-key or MCS_API_KEY).
//
// Output: tables for people, `--json` for scripts (one JSON document on stdout). A failure is
// one line on stderr and exit code 1; an API error keeps the API's code and Request-Id.
import { ApiError } from './api.ts';
import { CliError, helpOf, parse, usageError } from './args.ts';
import { EVENT_COMMANDS } from './commands/events.ts';
import { LISTEN_COMMANDS } from './commands/listen.ts';
import { LOGIN_COMMANDS } from './commands/login.ts';
import { OPERATOR_COMMANDS } from './commands/operator.ts';
import { SETTINGS_COMMANDS } from './commands/settings.ts';
import { TRIGGER_COMMANDS } from './commands/trigger.ts';
import { WEBHOOK_COMMANDS } from './commands/webhooks.ts';
import { type Command, createContext } from './context.ts';
import { terminalSafe } from './output.ts';

const GROUPS: Array<[string, Command[]]> = [
  ['Getting started', LOGIN_COMMANDS],
  ['Local development', [...LISTEN_COMMANDS, ...TRIGGER_COMMANDS]],
  ['Events', EVENT_COMMANDS],
  ['Webhook endpoints', [...WEBHOOK_COMMANDS, ...SETTINGS_COMMANDS]],
  ['Operator (accounts service, no API key)', OPERATOR_COMMANDS],
];
const COMMANDS = GROUPS.flatMap(([, list]) => list);

function overview(): string {
  const lines = ['usage: mcs COMMAND [ARGS] [--help]', ''];
  for (const [title, list] of GROUPS) {
    lines.push(`${title}:`);
    for (const c of list) lines.push(`  ${c.usage}`);
    lines.push('');
  }
  lines.push(
    'API commands take --api-key KEY (else MCS_API_KEY, else the key `mcs login` saved), --base-url URL',
    '(else MCS_BASE_URL, else the saved one, else http://127.0.0.1:$PORT) and --json (JSON for scripts).',
    'Operator commands call the accounts service at ACCOUNTS_URL (default http://127.0.0.1:(PORT+1))',
    'and print one JSON object; PORT defaults to 8080. `mcs COMMAND --help` tells more.',
    'On failure: one line on stderr and exit code 1.',
  );
  return `${lines.join('\n')}\n`;
}

function find(
  argv: string[],
): { command: Command; rest: string[] } | { group: Command[]; name: string } | null {
  const two = argv.slice(0, 2).join(' ');
  const byTwo = COMMANDS.find((c) => c.name === two);
  if (byTwo) return { command: byTwo, rest: argv.slice(2) };
  const byOne = COMMANDS.find((c) => c.name === argv[0]);
  if (byOne) return { command: byOne, rest: argv.slice(1) };
  const group = COMMANDS.filter((c) => c.name.startsWith(`${argv[0]} `));
  if (group.length > 0) return { group, name: argv[0]! };
  return null;
}

function describe(err: unknown, json: boolean): string {
  if (err instanceof ApiError) {
    if (json) {
      return JSON.stringify({
        ...(err.body as object),
        status: err.status,
        request_id: err.requestId ?? null,
      });
    }
    return err.describe();
  }
  if (err instanceof CliError) return err.message;
  return `unexpected error: ${err instanceof Error ? err.message : String(err)}`;
}

export async function main(argv: string[]): Promise<number> {
  if (argv.length === 0) {
    process.stderr.write(`${usageError('missing command').message}\n`);
    return 1;
  }
  if (argv[0] === '--help' || argv[0] === '-h' || argv[0] === 'help') {
    if (argv[0] === 'help' && argv.length > 1) return main([...argv.slice(1), '--help']);
    process.stdout.write(overview());
    return 0;
  }
  const wantsJson = argv.includes('--json');
  try {
    const found = find(argv);
    if (!found) throw usageError(`unknown command "${argv.slice(0, 2).join(' ')}"`);
    if ('group' in found) {
      const wanted = argv.slice(0, 2).join(' ');
      const usage = found.group.map((c) => `  ${c.usage}`).join('\n');
      if (argv[1] === undefined || argv[1] === '--help' || argv[1] === '-h') {
        const text = `mcs ${found.name} commands:\n${usage}\n\n\`mcs ${found.name} COMMAND --help\` tells more.\n`;
        if (argv[1] === undefined) {
          process.stderr.write(text);
          return 1;
        }
        process.stdout.write(text);
        return 0;
      }
      throw usageError(`unknown command "${wanted}"`);
    }
    const { command, rest } = found;
    if (rest.includes('--help') || rest.includes('-h')) {
      process.stdout.write(helpOf(command));
      return 0;
    }
    const parsed = parse(command, rest);
    const v = parsed.values;
    const ctx = createContext({
      ...(typeof v['api-key'] === 'string' ? { apiKey: v['api-key'] } : {}),
      ...(typeof v['base-url'] === 'string' ? { baseUrl: v['base-url'] } : {}),
      json: v.json === true,
    });
    return (await command.run(ctx, parsed)) ?? 0;
  } catch (err) {
    // The message may be the API's, echoing what it was sent (an id): no terminal controls.
    process.stderr.write(`${terminalSafe(describe(err, wantsJson))}\n`);
    return err instanceof CliError ? err.exitCode : 1;
  }
}

process.exitCode = await main(process.argv.slice(2));
