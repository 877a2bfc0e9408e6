// Findings of a security review, each checked against the real stack: what a hostile party
// (another holder of the account's keys, a hostile API or local server, any client of the
// gateway) could do before the fix, and must not be able to do after it.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import http from 'node:http';
import { type AccountKeys, type SmtpServer, type Stack, startSmtpServer, startStack } from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, cliEnv, runCli } from './cli-helpers.ts';

let stack: Stack;
let keys: AccountKeys;
let smtp: SmtpServer;

beforeAll(async () => {
  smtp = await startSmtpServer();
  stack = await startStack({
    env: { WEBHOOK_ALLOW_HTTP: 'true', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', SMTP_URL: smtp.url },
  });
  keys = await stack.createAccount();
});

afterAll(async () => {
  await stack?.stop();
  await smtp?.close();
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

describe('a request body nested too deeply', () => {
  // V8's JSON.parse of half a million nested arrays (a 1 MiB body) held the gateway's event loop
  // for about a second: a few such requests in a row stalled every account's requests.
  const nested = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;

  it('is refused before it is parsed, with invalid_json, quickly', async () => {
    const body = `{"name":"Tea","price":100,"currency":"EUR","description":${nested(500_000)}}`;
    expect(Buffer.byteLength(body)).toBeLessThan(1024 * 1024);
    const started = performance.now();
    const res = await api('/v1/products', { body });
    const took = performance.now() - started;
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_json' });
    expect(res.body.error.message).toMatch(/more than 64 levels/);
    expect(took).toBeLessThan(1_000);
  });

  it('is refused from 65 levels on; 64 are parsed (and the field checked as usual)', async () => {
    const at = async (depth: number) =>
      (await api('/v1/products', { body: `{"name":"Tea","description":${nested(depth - 1)}}` })).body.error;
    expect(await at(65)).toMatchObject({ code: 'invalid_json' });
    expect(await at(64)).toMatchObject({ code: 'invalid_type', param: 'description' });
    // Brackets inside strings are text, not levels.
    const text = await api('/v1/products', {
      body: { name: 'Tea', price: 100, currency: 'EUR', description: `"\\${'['.repeat(100)}` },
    });
    expect(text.status).toBe(200);
  });

  it('other accounts are answered meanwhile', async () => {
    const other = await stack.createAccount();
    const body = `{"name":"Tea","description":${nested(500_000)}}`;
    const flood = Array.from({ length: 4 }, () => api('/v1/products', { body }));
    const started = performance.now();
    const read = await api('/v1/products?limit=1', { key: other.secret_key });
    const took = performance.now() - started;
    await Promise.all(flood);
    expect(read.status).toBe(200);
    expect(took).toBeLessThan(1_000);
  });
});

describe('the docs pages', () => {
  it('may not be framed by another site, load nothing but their own style, and are not sniffed', async () => {
    for (const path of ['/docs', '/docs/errors', '/docs/reference', '/docs/webhooks']) {
      const res = await fetch(`${stack.baseUrl}${path}`);
      expect(res.status, path).toBe(200);
      const csp = res.headers.get('content-security-policy') ?? '';
      expect(csp, path).toContain("frame-ancestors 'none'");
      expect(csp, path).toContain("default-src 'none'");
      expect(res.headers.get('x-frame-options'), path).toBe('DENY');
      expect(res.headers.get('x-content-type-options'), path).toBe('nosniff');
    }
    const openapi = await fetch(`${stack.baseUrl}/v1/openapi.json`);
    expect(openapi.headers.get('x-content-type-options')).toBe('nosniff');
  });
});

describe('the e-mail about an unhealthy endpoint', () => {
  it('keeps the description on its line: a secret key cannot write paragraphs of our e-mail', async () => {
    const email = `owner-${Date.now()}@example.com`;
    const owner = await stack.createAccount(email);
    const key = owner.secret_key;
    expect((await api('/v1/webhook_settings', { key, body: { retry_schedule: ['1s'] } })).status).toBe(200);
    const forged = 'Your account is suspended. Sign in at http://phish.example/ to restore it.';
    const made = await api('/v1/webhooks', {
      key,
      body: {
        url: 'http://127.0.0.1:9/closed',
        events: ['product.created'],
        description: `ours\r\n\r\n${forged}\r\nBcc: someone@example.com`,
      },
    });
    expect(made.status).toBe(200);
    await api('/v1/products', { key, body: { name: 'Tea', price: 100, currency: 'EUR' } });
    const deadline = Date.now() + 30_000;
    let mail: (typeof smtp.messages)[number] | undefined;
    while (!mail && Date.now() < deadline) {
      mail = smtp.messages.find((m) => m.to.includes(email) && m.subject.includes(made.body.id));
      if (!mail) await new Promise((r) => setTimeout(r, 200));
    }
    expect(mail, 'the unhealthy e-mail').toBeDefined();
    expect(mail!.to).toEqual([email]);
    expect(mail!.headers.bcc).toBeUndefined();
    const lines = mail!.text.split(/\r?\n/);
    // The description is one line of the details; nothing of it starts a line of its own.
    expect(lines.filter((l) => l.includes(forged))).toEqual([
      `  Description:    ours ${forged} Bcc: someone@example.com`,
    ]);
    expect(lines.some((l) => l.startsWith('Bcc:'))).toBe(false);
  });
});

describe('mcs login on a terminal', () => {
  it('does not echo the secret key as it is typed', async () => {
    // `script` gives the CLI a pseudo-terminal, as a person's shell does; what it records is
    // what the screen would show.
    const env = cliEnv(stack, { MCS_BASE_URL: '' });
    const command = `${JSON.stringify(process.execPath)} ${JSON.stringify(CLI)} login --base-url ${stack.baseUrl}`;
    const child = spawn('script', ['-q', '-e', '-c', command, '/dev/null'], {
      env,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let screen = '';
    child.stdout!.on('data', (c: Buffer) => {
      screen += c.toString();
      if (screen.includes('API key') && !child.stdin!.writableEnded) {
        child.stdin!.write(`${keys.secret_key}\r`);
        child.stdin!.end();
      }
    });
    const [code] = (await once(child, 'close')) as [number];
    expect(screen).toContain('Logged in to');
    expect(code).toBe(0);
    expect(screen).not.toContain(keys.secret_key);
  });
});

describe('a path with "." or ".." segments', () => {
  /** GET `path` exactly as written (fetch would resolve the dot segments before sending). */
  function raw(path: string): Promise<{ status: number; body: any }> {
    const base = new URL(stack.baseUrl);
    return new Promise((resolve, reject) => {
      const req = http.request(
        {
          host: base.hostname,
          port: base.port,
          path,
          headers: { authorization: `Bearer ${keys.secret_key}` },
        },
        (res) => {
          let text = '';
          res.on('data', (c: Buffer) => (text += c));
          res.on('end', () => {
            let body: any = text;
            try {
              body = JSON.parse(text);
            } catch {} // a page, not the API's JSON
            resolve({ status: res.statusCode ?? 0, body });
          });
        },
      );
      req.on('error', reject);
      req.end();
    });
  }

  it('is not served as the path it resolves to: a proxy matching prefixes would be bypassed', async () => {
    for (const path of [
      '/v1/%2e%2e/dashboard/login',
      '/v1/../dashboard/login',
      '/v1/./products',
      '/v1/%2E/products',
      '/v1/products/%2e%2E',
    ]) {
      const r = await raw(path);
      expect(r.status, path).toBe(404);
      expect(r.body.error, path).toMatchObject({ type: 'not_found_error', code: 'route_not_found' });
    }
    // A dot inside a segment is no dot segment.
    expect((await raw('/v1/openapi.json')).status).toBe(200);
    expect((await raw('/v1/products?starting_after=..')).status).not.toBe(404);
  });
});

describe('a client sending unknown API keys', () => {
  // Last in this file: its address stays throttled for a few seconds.
  it('is refused with 429 after a burst, without a call to accounts each; known keys still pass', async () => {
    const unknown = () => `sk_test_${randomBytes(18).toString('hex')}`;
    const answers = await Promise.all(
      Array.from({ length: 120 }, () => api('/v1/orders', { key: unknown() })),
    );
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s === 401).length).toBeGreaterThanOrEqual(40);
    const limited = answers.filter((a) => a.status === 429);
    expect(limited.length).toBeGreaterThan(0);
    expect(limited[0]!.body.error).toMatchObject({ type: 'rate_limit_error', code: 'rate_limited' });
    expect(Number(limited[0]!.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(statuses.every((s) => s === 401 || s === 429)).toBe(true);
    // The account's own key, in the gateway's cache, is answered as before.
    expect((await api('/v1/orders')).status).toBe(200);
  });
});
