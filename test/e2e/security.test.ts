// Findings of a security review, each checked against the real stack: what a hostile party
// (another holder of the account's keys, a hostile API or local server, any client of the
// gateway) could do before the fix, and must not be able to do after it.
import { type AccountKeys, type Stack, startStack } from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliEnv, runCli } from './cli-helpers.ts';

let stack: Stack;
let keys: AccountKeys;

beforeAll(async () => {
  stack = await startStack({
    env: { WEBHOOK_ALLOW_HTTP: 'true', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' },
  });
  keys = await stack.createAccount();
});

afterAll(async () => {
  await stack?.stop();
});

async function api(path: string, init: { method?: string; body?: unknown; key?: string } = {}) {
  const res = await fetch(`${stack.baseUrl}${path}`, {
    method: init.method ?? (init.body === undefined ? 'GET' : 'POST'),
    headers: {
      authorization: `Bearer ${init.key ?? keys.secret_key}`,
      ...(init.body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(init.body === undefined
      ? {}
      : { body: typeof init.body === 'string' ? init.body : JSON.stringify(init.body) }),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as any };
}

/** Any control character a terminal acts on (ESC, BEL, CR, C1, …), but tab and newline. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
const TERMINAL_CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;

describe('the CLI prints no terminal control sequences it was sent', () => {
  // An escape sequence that sets the window title, colours and then erases the line it is on.
  const hostile = '\u001b]0;owned\u0007\u001b[31mred\u001b[0m\u001b[2K\rforged';

  it('in a table: an endpoint description anyone with a secret key of the account can write', async () => {
    const made = await api('/v1/webhooks', {
      body: { url: 'http://127.0.0.1:9/hooks', events: ['order.created'], description: hostile },
    });
    expect(made.status).toBe(200);
    const run = await runCli(['webhooks', 'list'], cliEnv(stack, { MCS_API_KEY: keys.secret_key }));
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(made.body.id);
    expect(run.stdout).not.toMatch(TERMINAL_CONTROL);
    // Still readable, as escapes.
    expect(run.stdout).toContain('\\u001b]0;owned\\u0007');

    // --json stays JSON with the same value.
    const json = await runCli(
      ['webhooks', 'list', '--json'],
      cliEnv(stack, { MCS_API_KEY: keys.secret_key }),
    );
    expect(json.stdout).not.toMatch(TERMINAL_CONTROL);
    const listed = (JSON.parse(json.stdout).data as Array<{ id: string; description: string }>).find(
      (e) => e.id === made.body.id,
    );
    expect(listed?.description).toBe(hostile);
  });

  it('in an error: the API echoes the id it was given', async () => {
    const run = await runCli(
      ['events', 'get', `evt_${hostile}`],
      cliEnv(stack, { MCS_API_KEY: keys.secret_key }),
    );
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('code resource_missing');
    expect(run.stderr).not.toMatch(TERMINAL_CONTROL);
  });
});
