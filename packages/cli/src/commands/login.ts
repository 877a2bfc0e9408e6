// mcs login / logout: keep an API key and base URL in the per-user config file (config.ts), so
// later commands need neither flags nor environment.
import { createApi } from '../api.ts';
import { CliError, str } from '../args.ts';
import {
  configPath,
  defaultBaseUrl,
  loadConfig,
  normalizeBaseUrl,
  type SavedConfig,
  saveConfig,
} from '../config.ts';
import type { Command } from '../context.ts';
import { askHidden } from '../prompt.ts';

const masked = (key: string) => `${key.slice(0, 8)}…${key.slice(-4)}`;

async function readKey(): Promise<string> {
  // Not echoed: a secret key on the screen ends up in the scrollback and in screen shares.
  if (process.stdin.isTTY) return (await askHidden('API key (sk_test_… or sk_live_…): ')).trim();
  // Piped: `printenv KEY | mcs login` keeps the key out of the shell history and `ps`.
  let text = '';
  for await (const chunk of process.stdin) text += chunk;
  return text.trim();
}

const login: Command = {
  name: 'login',
  usage: 'mcs login [--api-key KEY] [--base-url URL]',
  summary:
    'Checks an API key against the API and saves it, with the base URL, in the per-user config file\n' +
    '($XDG_CONFIG_HOME/mcs/config.json, else ~/.config/mcs/config.json, or MCS_CONFIG; mode 0600).',
  options: {
    'api-key': { type: 'string', description: 'KEY: the secret key (else asked for, or read from stdin)' },
    'base-url': {
      type: 'string',
      description:
        'URL: the API (default: MCS_BASE_URL, the saved one, or http://127.0.0.1:$PORT, 8080 without PORT)',
    },
    json: { type: 'boolean', description: 'print JSON for scripts' },
  },
  api: false,
  details:
    'Afterwards --api-key / MCS_API_KEY and --base-url / MCS_BASE_URL still win over the saved values.',
  async run(ctx, p) {
    const path = configPath(ctx.env);
    // A config file that cannot be read is what login replaces (its own error says to run it).
    const saved = await loadConfig(path).catch((): SavedConfig => ({}));
    const baseUrl = normalizeBaseUrl(
      str(p, 'base-url') || ctx.env.MCS_BASE_URL || saved.base_url || defaultBaseUrl(ctx.env),
    );
    const key = str(p, 'api-key') ?? (await readKey());
    if (!key) throw new CliError('no API key given (--api-key, or type it when asked)');
    if (!/^sk_(test|live)_/.test(key)) {
      throw new CliError(
        'mcs login needs a secret key (sk_test_… or sk_live_…): publishable keys cannot use the CLI',
      );
    }
    // A cheap authenticated read proves the key and the URL before anything is saved.
    await ctx.progress(`Checking the key at ${baseUrl}`, () =>
      createApi(baseUrl, key).get('/v1/webhooks', { limit: 1 }),
    );
    await saveConfig({ api_key: key, base_url: baseUrl }, path);
    const livemode = key.startsWith('sk_live_');
    ctx.print(
      { config: path, base_url: baseUrl, key: masked(key), livemode },
      () =>
        `Logged in to ${baseUrl} with ${masked(key)} (${livemode ? 'live' : 'test'} mode).\nSaved in ${path} (mode 0600).\n`,
    );
    return 0;
  },
};

const logout: Command = {
  name: 'logout',
  usage: 'mcs logout',
  summary: 'Removes the saved API key from the config file (the base URL stays).',
  options: {},
  api: false,
  async run(ctx) {
    const path = configPath(ctx.env);
    // An unreadable config holds no key anyone could use: it is replaced by an empty one.
    const saved = await loadConfig(path).catch((): SavedConfig => ({}));
    const { api_key: _gone, ...rest } = saved;
    await saveConfig(rest, path);
    ctx.out(
      saved.api_key ? `Removed ${masked(saved.api_key)} from ${path}.\n` : `No key was saved in ${path}.\n`,
    );
    return 0;
  },
};

export const LOGIN_COMMANDS: Command[] = [login, logout];
