// `pnpm start` with a bad value in its environment refuses before it starts anything: one line
// naming the variable, exit 78 (docs/operations.md), never a part that starts and then dies, a
// stack trace, or a stack that comes up half-configured. PostgreSQL and NATS point at port 1:
// a check that let the value through would show as a part failing to reach them (exit 1).
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const REPO_ROOT = join(import.meta.dirname, '..', '..');

async function start(env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  const child = spawn(process.execPath, ['scripts/start.ts'], {
    cwd: REPO_ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/root',
      PORT: '18180',
      DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none',
      NATS_URL: 'nats://127.0.0.1:1',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c));
  child.stderr!.on('data', (c: Buffer) => (out += c));
  const code = await new Promise<number | null>((r) => child.once('exit', r));
  return { code, out };
}

/** Refused as a bad value of `name`: exit 78, one line naming it, nothing started. */
async function expectRefused(name: string, env: Record<string, string>): Promise<void> {
  const { code, out } = await start(env);
  expect(code, out).toBe(78);
  expect(out, name).toMatch(new RegExp(`^invalid environment:\\n  ${name}: .+\\n$`));
}

describe('pnpm start refuses at once', () => {
  it('a service URL without a port (the service would bind a random one, the gateway call 80)', async () => {
    await expectRefused('ACCOUNTS_URL', { ACCOUNTS_URL: 'http://127.0.0.1' });
    await expectRefused('ACCOUNTS_URL', { ACCOUNTS_URL: 'garbage' });
    await expectRefused('WEBHOOKS_URL', { WEBHOOKS_URL: 'ftp://127.0.0.1:8084' });
  }, 30_000);

  it('a PORT whose derived ports (PORT+1 … PORT+5) pass 65535, rather than throw an invalid URL', async () => {
    await expectRefused('PORT', { PORT: '65534' });
    const { out } = await start({ PORT: '65534' });
    expect(out).not.toMatch(/TypeError|Invalid URL|\n\s+at /);
  }, 30_000);

  it('a WEBHOOK_SECRETS_KEY that is not 32 bytes, or none with NODE_ENV=production', async () => {
    // deploy/base/secrets.env's placeholder, which it says the webhooks service refuses.
    await expectRefused('WEBHOOK_SECRETS_KEY', { WEBHOOK_SECRETS_KEY: 'CHANGE_ME' });
    await expectRefused('WEBHOOK_SECRETS_KEY', { WEBHOOK_SECRETS_KEY: 'ab'.repeat(31) });
    await expectRefused('WEBHOOK_SECRETS_KEY', { NODE_ENV: 'production' });
  }, 30_000);

  it('SERVICE_METRICS_PORT, which the services it starts side by side cannot all bind', async () => {
    await expectRefused('SERVICE_METRICS_PORT', { SERVICE_METRICS_PORT: '18189' });
    await expectRefused('SERVICE_METRICS_PORT', { SERVICE_METRICS_PORT: '18189', MCS_ONE_PROCESS: 'true' });
  }, 30_000);

  it('a HOST or SERVICE_HOST that is no address, rather than start the services and then fail', async () => {
    await expectRefused('HOST', { HOST: 'not a host' });
    await expectRefused('SERVICE_HOST', { SERVICE_HOST: 'http://0.0.0.0' });
  }, 30_000);

  it('an MCS_ONE_PROCESS that is not a flag, as any other bad value (exit 78, not 1)', async () => {
    await expectRefused('MCS_ONE_PROCESS', { MCS_ONE_PROCESS: 'yes' });
  }, 30_000);

  it('a LOG_FORMAT other than json, rather than ignore it', async () => {
    await expectRefused('LOG_FORMAT', { LOG_FORMAT: 'JSON' });
  }, 30_000);

  it('a zero time-out, ack wait, mail poll or probe interval (no time-out, a busy loop)', async () => {
    for (const name of [
      'WEBHOOK_TIMEOUT',
      'WEBHOOK_ACK_WAIT',
      'MAIL_POLL_INTERVAL',
      'WEBHOOK_PROBE_INTERVAL',
    ]) {
      await expectRefused(name, { [name]: '0ms' });
    }
  }, 60_000);

  it('a DATABASE_URL, NATS_URL or SMTP_URL of another scheme, or a NATS_URL nats.js would misread', async () => {
    await expectRefused('DATABASE_URL', { DATABASE_URL: 'mysql://root@127.0.0.1:1/none' });
    await expectRefused('NATS_URL', { NATS_URL: 'http://127.0.0.1:1' });
    await expectRefused('NATS_URL', { NATS_URL: 'nats://a:b@127.0.0.1:1,nats://a:c@127.0.0.1:2' });
    await expectRefused('NATS_URL', { NATS_URL: 'nats://127.0.0.1:1/stream' });
    await expectRefused('SMTP_URL', { SMTP_URL: 'http://127.0.0.1:2525' });
    const { out } = await start({ NATS_URL: 'nats://mcs:hunter2hunter2@127.0.0.1:1/x' });
    expect(out).not.toContain('hunter2');
  }, 60_000);

  it('a MAIL_FROM that is not one address on one line (a header could be added to every e-mail)', async () => {
    await expectRefused('MAIL_FROM', { MAIL_FROM: 'nobody' });
    await expectRefused('MAIL_FROM', { MAIL_FROM: 'a@example.com, b@example.com' });
    await expectRefused('MAIL_FROM', { MAIL_FROM: 'a@example.com\r\nBcc: spy@example.com' });
  }, 30_000);

  it('a SERVICE_SOCKET_DIR that cannot be made, rather than a stack trace from the first service', async () => {
    await expectRefused('SERVICE_SOCKET_DIR', { SERVICE_SOCKET_DIR: '/etc/passwd/run' });
  }, 30_000);
});
