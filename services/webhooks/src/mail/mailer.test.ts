// The mailer against a real database and a real SMTP server (npm smtp-server). The account
// directory is an in-memory AccountDirectory: the real one is a Connect call to the accounts
// service, exercised end to end in test/e2e/webhooks-lifecycle.test.ts.
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newId } from '@mcs/kit/ids';
import { createLogger } from '@mcs/kit/log';
import {
  freshDatabase,
  type MigratedDatabase,
  parseMail,
  type SmtpServer,
  startSmtpServer,
} from '@mcs/testkit';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { migrateWebhooks } from '../db/migrate.ts';
import { UNHEALTHY_KIND, type UnhealthyNotice } from '../domain/health.ts';
import type { AccountDirectory } from './accounts.ts';
import { backoffMs, createMailer, type Mailer } from './mailer.ts';
import { createFileTransport, createSmtpTransport, type MailTransport } from './transport.ts';

let db: MigratedDatabase;
let smtp: SmtpServer;
const log = createLogger('mailer-test', process.env.TEST_LOG ?? 'silent');
const emails = new Map<string, string>();
const directory: AccountDirectory = { emailOf: async (id) => emails.get(id) ?? null };
const running: Mailer[] = [];
let n = 0;

beforeAll(async () => {
  db = await freshDatabase(migrateWebhooks);
  smtp = await startSmtpServer();
});
afterEach(async () => {
  for (const m of running.splice(0)) await m.stop();
  smtp.messages.length = 0;
});
afterAll(async () => {
  await smtp?.close();
  await db?.close();
});

function mailer(transport: MailTransport = createSmtpTransport(smtp.url), pollMs = 60_000) {
  const m = createMailer({ db: db.db, directory, transport, log, from: 'alerts@mcs.test', pollMs });
  running.push(m);
  return m;
}

/** A notification row as the engine writes it when an endpoint turns unhealthy. */
async function notification(opts: { email?: string | null } = {}) {
  const accountId = `acct_m${++n}`;
  if (opts.email !== null) emails.set(accountId, opts.email ?? `owner${n}@example.com`);
  const id = newId('ntf');
  const endpointId = `we_m${n}`;
  const notice: UnhealthyNotice = {
    url: `https://hooks.example.com/${n}`,
    description: 'orders to the ERP',
    livemode: false,
    lastError: 'HTTP 502',
    failingSince: '2026-01-01T00:00:00.000Z',
    deliveryId: `dlv_m${n}`,
    eventId: `evt_m${n}`,
    attempts: 6,
  };
  await db.pool.query(
    `insert into webhooks.notifications (id, account_id, endpoint_id, kind, detail, created_at)
     values ($1, $2, $3, $4, $5, now())`,
    [id, accountId, endpointId, UNHEALTHY_KIND, JSON.stringify(notice)],
  );
  return { id, accountId, endpointId, notice, email: emails.get(accountId) };
}

const row = async (id: string) =>
  (await db.pool.query('select * from webhooks.notifications where id = $1', [id])).rows[0];

describe('mailer', () => {
  it('sends one message per notification, to the account, saying how to re-enable', async () => {
    const note = await notification();
    const m = mailer();
    expect(await m.runOnce()).toBe(1);
    const [mail] = await smtp.waitFor(1);
    expect(mail!.to).toEqual([note.email]);
    expect(mail!.from).toBe('alerts@mcs.test');
    expect(mail!.messageId).toBe(`<${note.id}@mcs.webhooks>`);
    expect(mail!.subject).toBe(`Webhook endpoint ${note.endpointId} is unhealthy (${note.notice.url})`);
    for (const s of [
      note.endpointId,
      note.notice.url,
      'HTTP 502',
      'orders to the ERP',
      'Settings → API',
      `POST /v1/webhooks/${note.endpointId}/enable`,
      `GET /v1/webhooks/${note.endpointId}/deliveries`,
    ]) {
      expect(mail!.text).toContain(s);
    }
    expect((await row(note.id)).sent_at).toBeInstanceOf(Date);
    expect(await m.runOnce()).toBe(0);
    expect(smtp.messages).toHaveLength(1);
  });

  it('is woken at once, without waiting for its poll', async () => {
    const m = mailer();
    await m.runOnce();
    await notification();
    const started = Date.now();
    m.wake();
    await smtp.waitFor(1, 2_000);
    expect(Date.now() - started).toBeLessThan(1_000);
  });

  it('never sends a notification twice when several mailers run at once', async () => {
    const notes = [];
    for (let i = 0; i < 12; i++) notes.push(await notification());
    const mailers = [mailer(), mailer(), mailer()];
    const counts = await Promise.all(mailers.map((m) => m.runOnce()));
    expect(counts.reduce((a, b) => a + b, 0)).toBe(12);
    await smtp.waitFor(12);
    await new Promise((r) => setTimeout(r, 100));
    const ids = smtp.messages.map((m) => m.messageId);
    expect(new Set(ids).size).toBe(12);
    expect(ids.sort()).toEqual(notes.map((x) => `<${x.id}@mcs.webhooks>`).sort());
  });

  it('keeps a notification it could not send and retries it with backoff', async () => {
    const note = await notification();
    // Nothing listens on port 9 (discard): the send fails.
    const down = mailer(createSmtpTransport('smtp://127.0.0.1:9'));
    expect(await down.runOnce()).toBe(1);
    const after = await row(note.id);
    expect(after).toMatchObject({ sent_at: null, attempts: 1 });
    expect(after.last_error).toMatch(/ECONNREFUSED|connect/i);
    expect(after.next_attempt_at.getTime()).toBeGreaterThan(Date.now() + backoffMs(1) - 2_000);
    // Not due yet: a working mailer leaves it alone; once due it is sent.
    const up = mailer();
    expect(await up.runOnce()).toBe(0);
    await db.pool.query('update webhooks.notifications set next_attempt_at = now() where id = $1', [note.id]);
    expect(await up.runOnce()).toBe(1);
    expect((await smtp.waitFor(1))[0]!.messageId).toBe(`<${note.id}@mcs.webhooks>`);
    expect((await row(note.id)).last_error).toBeNull();
  });

  it('gives up on an account without an address, saying why', async () => {
    const note = await notification({ email: null });
    expect(await mailer().runOnce()).toBe(1);
    expect(await row(note.id)).toMatchObject({ last_error: 'the account has no e-mail address' });
    expect((await row(note.id)).sent_at).toBeInstanceOf(Date);
    expect(smtp.messages).toHaveLength(0);
  });

  it('backs off 5 s doubling up to 10 minutes', () => {
    expect([1, 2, 3, 4, 20].map(backoffMs)).toEqual([5_000, 10_000, 20_000, 40_000, 600_000]);
  });
});

describe('without SMTP_URL', () => {
  it('writes each message under MAIL_DIR as .eml and .json', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mcs-mail-'));
    const note = await notification();
    expect(await mailer(createFileTransport(dir, log)).runOnce()).toBe(1);
    const files = readdirSync(dir).sort();
    expect(files).toEqual([`${note.id}@mcs.webhooks.eml`, `${note.id}@mcs.webhooks.json`]);
    const eml = parseMail(readFileSync(join(dir, files[0]!), 'utf8'));
    expect(eml.subject).toContain(note.endpointId);
    expect(eml.headers.to).toBe(note.email);
    expect(eml.text).toContain(note.notice.url);
    const json = JSON.parse(readFileSync(join(dir, files[1]!), 'utf8'));
    expect(json).toMatchObject({ to: note.email, messageId: `<${note.id}@mcs.webhooks>` });
  });
});
