// Where the CLI finds its API key and base URL: flags, then the environment (MCS_API_KEY,
// MCS_BASE_URL), then the per-user config file `mcs login` writes, then the local default.
//
// The file: $XDG_CONFIG_HOME/mcs/config.json (else ~/.config/mcs/config.json), or MCS_CONFIG.
// It holds a secret key, so it is written with mode 0600 in a 0700 directory, through a
// temporary file renamed over the old one (a crash never leaves half a file). The temporary file
// has a random name and is created new (O_EXCL): a file or symlink planted at a name it could
// have had (the directory may be a shared one, through MCS_CONFIG) is never written through. A
// directory named `mcs` that the user owns is made 0700 if it was more open.
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, readFile, rename, stat, unlink, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { CliError } from './args.ts';

export interface SavedConfig {
  api_key?: string;
  base_url?: string;
}

export interface Credentials {
  apiKey: string | undefined;
  baseUrl: string;
  /** Where the key came from, for error messages. */
  keySource: 'flag' | 'env' | 'config' | 'none';
}

export function configPath(env: NodeJS.ProcessEnv = process.env): string {
  if (env.MCS_CONFIG) return env.MCS_CONFIG;
  const base = env.XDG_CONFIG_HOME || join(env.HOME || homedir(), '.config');
  return join(base, 'mcs', 'config.json');
}

export async function loadConfig(path = configPath()): Promise<SavedConfig> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw new CliError(`cannot read ${path}: ${(err as Error).message}`);
  }
  try {
    const parsed = JSON.parse(text) as unknown;
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
      throw new Error('not an object');
    const o = parsed as Record<string, unknown>;
    return {
      ...(typeof o.api_key === 'string' ? { api_key: o.api_key } : {}),
      ...(typeof o.base_url === 'string' ? { base_url: o.base_url } : {}),
    };
  } catch {
    throw new CliError(`${path} is not a valid mcs config (JSON object); run mcs login again`);
  }
}

export async function saveConfig(config: SavedConfig, path = configPath()): Promise<void> {
  const dir = dirname(path);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  if (basename(dir) === 'mcs') {
    const st = await stat(dir);
    if (st.uid === process.getuid?.() && (st.mode & 0o077) !== 0) await chmod(dir, 0o700);
  }
  const tmp = `${path}.${process.pid}.${randomBytes(8).toString('hex')}.tmp`;
  await writeFile(tmp, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600, flag: 'wx' });
  try {
    await chmod(tmp, 0o600); // the umask may have taken bits away, never added; be exact
    await rename(tmp, path);
  } catch (err) {
    await unlink(tmp).catch(() => {});
    throw err;
  }
}

export function defaultBaseUrl(env: NodeJS.ProcessEnv = process.env): string {
  return `http://127.0.0.1:${env.PORT || 8080}`;
}

export function normalizeBaseUrl(text: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new CliError(`--base-url must be an http(s) URL, not "${text}"`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new CliError(`--base-url must be an http(s) URL, not "${text}"`);
  }
  return url.href.replace(/\/+$/, '');
}

export async function resolveCredentials(
  flags: { apiKey?: string | undefined; baseUrl?: string | undefined },
  env: NodeJS.ProcessEnv = process.env,
): Promise<Credentials> {
  const saved = await loadConfig(configPath(env));
  const baseUrl = normalizeBaseUrl(
    flags.baseUrl || env.MCS_BASE_URL || saved.base_url || defaultBaseUrl(env),
  );
  if (flags.apiKey) return { apiKey: flags.apiKey, baseUrl, keySource: 'flag' };
  if (env.MCS_API_KEY) return { apiKey: env.MCS_API_KEY, baseUrl, keySource: 'env' };
  if (saved.api_key) return { apiKey: saved.api_key, baseUrl, keySource: 'config' };
  return { apiKey: undefined, baseUrl, keySource: 'none' };
}
