// Running `mcs` as developers do: a separate process, against a running stack, with its own
// config directory (XDG_CONFIG_HOME) so nothing of the machine's user leaks in or out.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT, type Stack } from '@mcs/testkit';

export const CLI = join(REPO_ROOT, 'packages/cli/src/main.ts');

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** A fresh, empty config home for one test. */
export function configHome(): string {
  return mkdtempSync(join(tmpdir(), 'mcs-cli-'));
}

/** The environment of a CLI run: the stack's base URL, no key unless given. */
export function cliEnv(stack: Stack, extra: Record<string, string> = {}): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '/root',
    ...stack.env,
    MCS_BASE_URL: stack.baseUrl,
    XDG_CONFIG_HOME: configHome(),
    ...extra,
  };
}

export function spawnCli(args: string[], env: Record<string, string>): ChildProcess {
  return spawn(process.execPath, [CLI, ...args], { cwd: REPO_ROOT, env, stdio: ['pipe', 'pipe', 'pipe'] });
}

export function runCli(args: string[], env: Record<string, string>, stdin = ''): Promise<Run> {
  const child = spawnCli(args, env);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (c: Buffer) => (stdout += c));
  child.stderr!.on('data', (c: Buffer) => (stderr += c));
  child.stdin!.end(stdin);
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, stdout, stderr })));
}

/** A successful --json run: exit 0, nothing on stderr, one JSON document on stdout. */
export function jsonOf(run: Run): any {
  if (run.code !== 0 || run.stderr !== '') {
    throw new Error(`mcs exited ${run.code}: ${run.stderr}\n${run.stdout}`);
  }
  return JSON.parse(run.stdout);
}
