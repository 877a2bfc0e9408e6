// What a command gets to work with: its parsed arguments come separately (args.ts); this is the
// world around it — the API client (credentials resolved on first use), output, progress.
import { type Api, createApi } from './api.ts';
import { CliError, type CommandSpec } from './args.ts';
import { resolveCredentials } from './config.ts';
import { terminalSafe, withProgress } from './output.ts';

export interface Ctx {
  env: NodeJS.ProcessEnv;
  /** --json: machine output. */
  json: boolean;
  /** The REST client, from --api-key/--base-url, the environment or the saved config. */
  api(): Promise<Api>;
  /** Prints `data` as one JSON line with --json, else `human()`. */
  print(data: unknown, human: () => string): void;
  out(text: string): void;
  err(text: string): void;
  progress<T>(label: string, work: () => Promise<T>): Promise<T>;
}

export type Command = CommandSpec<Ctx>;

export function createContext(flags: { apiKey?: string; baseUrl?: string; json: boolean }): Ctx {
  let api: Promise<Api> | undefined;
  // Everything printed passes terminalSafe: most of it comes from the API or a local server.
  const out = (text: string) => {
    process.stdout.write(terminalSafe(text));
  };
  return {
    env: process.env,
    json: flags.json,
    api() {
      api ??= resolveCredentials(flags).then((c) => {
        if (!c.apiKey) {
          throw new CliError('no API key: run `mcs login`, pass --api-key, or set MCS_API_KEY');
        }
        return createApi(c.baseUrl, c.apiKey);
      });
      return api;
    },
    print(data, human) {
      out(flags.json ? `${JSON.stringify(data)}\n` : human());
    },
    out,
    err(text) {
      process.stderr.write(terminalSafe(text));
    },
    progress: (label, work) => withProgress(label, work),
  };
}
