// The CLI as operators run it: a separate process, against a real accounts service (its own
// process, on a fresh database), reached through ACCOUNTS_URL.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { accounts } from '@mcs/proto';
import { createTestDatabase, type TestDatabase } from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const CLI = fileURLToPath(new URL('./main.ts', import.meta.url));
// Started as a process, never imported: packages do not depend on services.
const ACCOUNTS_MAIN = fileURLToPath(new URL('../../../services/accounts/src/main.ts', import.meta.url));

let db: TestDatabase;
let service: ChildProcess;
let url: string;

/** Starts the accounts service on a free port; resolves with its URL once it logs that it listens. */
async function startAccounts(databaseUrl: string): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, [ACCOUNTS_MAIN], {
    env: { ...process.env, DATABASE_URL: databaseUrl, ACCOUNTS_URL: 'http://127.0.0.1:0', LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let buffered = '';
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`accounts service exited early (${code})`)));
    child.stdout!.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      for (const line of buffered.split('\n')) {
        if (!line.includes('accounts listening')) continue;
        resolve((JSON.parse(line) as { port: number }).port);
      }
    });
  });
  child.stdout!.resume();
  return { child, url: `http://127.0.0.1:${port}` };
}

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function mcs(args: string[], env: Record<string, string> = { ACCOUNTS_URL: url }): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { env: { ...process.env, ...env } }, (err, stdout, stderr) => {
      resolve({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr });
    });
  });
}

/** The CLI's single JSON object: stdout must hold exactly one, and nothing else. */
function json(run: Run): Record<string, unknown> {
  expect(run.stderr).toBe('');
  expect(run.code).toBe(0);
  const lines = run.stdout.trim().split('\n');
  expect(lines).toHaveLength(1);
  return JSON.parse(lines[0]!) as Record<string, unknown>;
}

/** A failure: exit 1, nothing on stdout, one line on stderr. */
function failure(run: Run): string {
  expect(run.code).toBe(1);
  expect(run.stdout).toBe('');
  const lines = run.stderr.trimEnd().split('\n');
  expect(lines).toHaveLength(1);
  return lines[0]!;
}

beforeAll(async () => {
  db = await createTestDatabase();
  ({ child: service, url } = await startAccounts(db.url));
});
afterAll(async () => {
  if (service && service.exitCode === null) {
    service.kill('SIGTERM');
    await once(service, 'exit');
  }
  await db?.drop();
});

describe('mcs accounts create', () => {
  it('prints one JSON object with the account and its four working keys', async () => {
    const out = json(await mcs(['accounts', 'create', '--email', 'ada@example.com']));
    expect(Object.keys(out)).toEqual([
      'account',
      'secret_key',
      'live_secret_key',
      'publishable_key',
      'live_publishable_key',
    ]);
    const account = out.account as Record<string, unknown>;
    expect(Object.keys(account)).toEqual(['id', 'object', 'email', 'name', 'rate_limit', 'created_at']);
    expect(account).toMatchObject({
      object: 'account',
      email: 'ada@example.com',
      name: 'ada',
      rate_limit: 100,
    });
    expect(account.id).toMatch(/^acct_[0-9a-z]{26}$/);
    expect(new Date(account.created_at as string).toISOString()).toBe(account.created_at);
    expect(out.secret_key).toMatch(/^sk_test_[0-9A-Za-z]{32,}$/);
    expect(out.live_secret_key).toMatch(/^sk_live_[0-9A-Za-z]{32,}$/);
    expect(out.publishable_key).toMatch(/^pk_test_[0-9A-Za-z]{32,}$/);
    expect(out.live_publishable_key).toMatch(/^pk_live_[0-9A-Za-z]{32,}$/);

    const client = createClient(
      accounts.AccountService,
      createConnectTransport({ baseUrl: url, httpVersion: '2' }),
    );
    const who = await client.authenticateKey({ key: out.live_secret_key as string });
    expect(who).toMatchObject({
      accountId: account.id,
      livemode: true,
      kind: accounts.KeyKind.SECRET,
      rateLimit: 100,
    });
  });

  it('sets the owner password from stdin with --password; sign-in works with it, not without', async () => {
    const run = await new Promise<Run>((resolve) => {
      const child = execFile(
        process.execPath,
        [CLI, 'accounts', 'create', '--email', 'owner@example.com', '--password'],
        { env: { ...process.env, ACCOUNTS_URL: url } },
        (err, stdout, stderr) => resolve({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr }),
      );
      child.stdin!.end('a long pass phrase\n');
    });
    const out = json(run);
    expect(JSON.stringify(out)).not.toContain('a long pass phrase');
    const client = createClient(
      accounts.AccountService,
      createConnectTransport({ baseUrl: url, httpVersion: '2' }),
    );
    const who = await client.authenticateOwner({
      email: 'owner@example.com',
      password: 'a long pass phrase',
    });
    expect(who.accountId).toBe((out.account as { id: string }).id);
    await expect(
      client.authenticateOwner({ email: 'owner@example.com', password: 'another phrase' }),
    ).rejects.toThrow('The e-mail address or the password is not right.');

    const short = await new Promise<Run>((resolve) => {
      const child = execFile(
        process.execPath,
        [CLI, 'accounts', 'create', '--email', 'short@example.com', '--password'],
        { env: { ...process.env, ACCOUNTS_URL: url } },
        (err, stdout, stderr) => resolve({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr }),
      );
      child.stdin!.end('short\n');
    });
    expect(failure(short)).toBe('The password must be 10 to 200 characters long. (param: password)');
  });

  it('sets a password on an existing account with accounts set-password', async () => {
    const made = json(await mcs(['accounts', 'create', '--email', 'later@example.com']));
    const id = (made.account as { id: string }).id;
    const run = await new Promise<Run>((resolve) => {
      const child = execFile(
        process.execPath,
        [CLI, 'accounts', 'set-password', '--account', id],
        { env: { ...process.env, ACCOUNTS_URL: url } },
        (err, stdout, stderr) => resolve({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr }),
      );
      child.stdin!.end('set later, long enough\n');
    });
    expect(json(run)).toMatchObject({ id, object: 'account', email: 'later@example.com' });
    const client = createClient(
      accounts.AccountService,
      createConnectTransport({ baseUrl: url, httpVersion: '2' }),
    );
    const who = await client.authenticateOwner({
      email: 'later@example.com',
      password: 'set later, long enough',
    });
    expect(who.accountId).toBe(id);
  });

  it('takes a name and a rate limit', async () => {
    const out = json(
      await mcs([
        'accounts',
        'create',
        '--email',
        'grace@example.com',
        '--name',
        'Grace Hopper',
        '--rate-limit',
        '250',
      ]),
    );
    expect(out.account).toMatchObject({ name: 'Grace Hopper', rate_limit: 250 });
  });

  it('reports API errors with their param', async () => {
    const line = failure(await mcs(['accounts', 'create', '--email', 'not-an-email']));
    expect(line).toContain('email must be a valid e-mail address');
    expect(line).toContain('param: email');
    expect(
      failure(await mcs(['accounts', 'create', '--email', 'a@b.co', '--rate-limit', '100001'])),
    ).toContain('param: rate_limit');
  });

  it('answers bad arguments with the usage', async () => {
    expect(failure(await mcs(['accounts', 'create']))).toMatch(
      /^missing --email\. Usage: mcs accounts create --email E/,
    );
    expect(failure(await mcs(['accounts', 'create', '--email', 'a@b.co', '--bogus']))).toContain(
      "Unknown option '--bogus'",
    );
    expect(failure(await mcs(['accounts', 'create', '--email', 'a@b.co', '--rate-limit', 'fast']))).toContain(
      '--rate-limit must be a whole number',
    );
    expect(failure(await mcs(['accounts', 'delete']))).toContain('unknown command "accounts delete"');
    // A value that starts with a dash: one line saying how to give it.
    const dashed = failure(await mcs(['accounts', 'create', '--email', 'a@b.co', '--rate-limit', '-5']));
    expect(dashed).toMatch(
      /^Option '--rate-limit' argument is ambiguous: give a value that starts with a dash as --rate-limit=-XYZ\. Usage:/,
    );
    expect(failure(await mcs([]))).toContain('Usage:');
    const help = await mcs(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('mcs keys revoke --account ACCOUNT_ID --key KEY_ID');
  });

  it('says so when the service cannot be reached', async () => {
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const { port } = probe.address() as { port: number };
    await new Promise((resolve) => probe.close(resolve));
    const closed = `http://127.0.0.1:${port}`;
    expect(failure(await mcs(['accounts', 'create', '--email', 'a@b.co'], { ACCOUNTS_URL: closed }))).toBe(
      `cannot reach the accounts service at ${closed}: is the stack running (pnpm start)?`,
    );
  });
});

describe('mcs keys', () => {
  it('lists, creates and revokes keys', async () => {
    const made = json(await mcs(['accounts', 'create', '--email', 'keys@example.com']));
    const accountId = (made.account as { id: string }).id;

    const list = json(await mcs(['keys', 'list', '--account', accountId]));
    expect(list.object).toBe('list');
    const data = list.data as Record<string, unknown>[];
    expect(data).toHaveLength(4);
    for (const k of data) {
      expect(Object.keys(k)).toEqual([
        'id',
        'object',
        'kind',
        'livemode',
        'prefix',
        'last4',
        'created_at',
        'revoked_at',
        'last_used_at',
      ]);
      expect(k.object).toBe('api_key');
      expect(k.revoked_at).toBeNull();
      expect(k.last_used_at).toBeNull();
    }
    expect(data.map((k) => `${k.prefix}…${k.last4}`).sort()).toEqual(
      [made.secret_key, made.live_secret_key, made.publishable_key, made.live_publishable_key]
        .map((s) => `${(s as string).slice(0, 8)}…${(s as string).slice(-4)}`)
        .sort(),
    );
    expect(JSON.stringify(list)).not.toContain((made.secret_key as string).slice(8));

    const created = json(
      await mcs(['keys', 'create', '--account', accountId, '--kind', 'publishable', '--live']),
    );
    expect(created).toMatchObject({
      object: 'api_key',
      kind: 'publishable',
      livemode: true,
      prefix: 'pk_live_',
    });
    expect(created.secret).toMatch(/^pk_live_[0-9A-Za-z]{32,}$/);
    expect(created.last4).toBe((created.secret as string).slice(-4));
    const testKey = json(await mcs(['keys', 'create', '--account', accountId, '--kind', 'secret']));
    expect(testKey).toMatchObject({ kind: 'secret', livemode: false });
    expect(testKey.secret).toMatch(/^sk_test_/);

    const revoked = json(
      await mcs(['keys', 'revoke', '--account', accountId, '--key', created.id as string]),
    );
    expect(revoked).toMatchObject({ id: created.id, object: 'api_key' });
    expect(typeof revoked.revoked_at).toBe('string');
    expect(revoked).not.toHaveProperty('secret');

    const after = json(await mcs(['keys', 'list', '--account', accountId]));
    expect(after.data).toHaveLength(6);
  });

  it('checks its arguments and reports unknown accounts and keys', async () => {
    expect(failure(await mcs(['keys', 'list']))).toContain('missing --account. Usage: mcs keys list');
    expect(failure(await mcs(['keys', 'create', '--account', 'acct_x', '--kind', 'admin']))).toContain(
      '--kind must be secret or publishable',
    );
    expect(failure(await mcs(['keys', 'revoke', '--account', 'acct_x']))).toContain('missing --key');
    expect(failure(await mcs(['keys', 'list', '--account', 'acct_missing']))).toBe(
      'No such account: acct_missing. (param: account_id)',
    );
  });
});
