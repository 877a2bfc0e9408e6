// Where e-mail goes: an SMTP server (SMTP_URL, through nodemailer), or without one, a JSON log
// line plus the message written under MAIL_DIR as <id>.eml and <id>.json (docs/operations.md).
import { mkdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { Logger } from '@mcs/kit/log';
import nodemailer from 'nodemailer';

export interface MailMessage {
  /** Stable per notification (see mailer.ts), so a resend after a crash is the same message. */
  messageId: string;
  from: string;
  to: string;
  subject: string;
  text: string;
}

export interface MailTransport {
  send(message: MailMessage): Promise<void>;
  close(): Promise<void>;
}

const toNodemailer = (m: MailMessage) => ({
  messageId: m.messageId,
  from: m.from,
  to: m.to,
  subject: m.subject,
  text: m.text,
});

/** nodemailer over `url` (smtp:// or smtps://, credentials in the URL if any). */
export function createSmtpTransport(url: string): MailTransport {
  const transporter = nodemailer.createTransport({
    url,
    // Bounded, so a stuck server cannot hold the notification's row lock for minutes.
    connectionTimeout: 10_000,
    greetingTimeout: 10_000,
    socketTimeout: 30_000,
  } as Parameters<typeof nodemailer.createTransport>[0]);
  return {
    async send(message) {
      await transporter.sendMail(toNodemailer(message));
    },
    async close() {
      transporter.close();
    },
  };
}

/**
 * No SMTP server: log the message as JSON and write it to `dir` (the .eml is the exact message
 * an SMTP server would have received). A resend overwrites the same two files.
 */
export function createFileTransport(dir: string, log: Logger): MailTransport {
  const root = resolve(dir);
  const builder = nodemailer.createTransport({ streamTransport: true, buffer: true, newline: 'unix' });
  return {
    async send(message) {
      const info = await builder.sendMail(toNodemailer(message));
      const name = message.messageId.replace(/^<|>$/g, '').replace(/[^A-Za-z0-9._@-]/g, '_');
      await mkdir(root, { recursive: true });
      await writeFile(join(root, `${name}.eml`), info.message as Buffer);
      await writeFile(join(root, `${name}.json`), `${JSON.stringify(message, null, 2)}\n`);
      log.info(
        { mail: message, file: join(root, `${name}.eml`) },
        'e-mail (no SMTP_URL: written to MAIL_DIR)',
      );
    },
    async close() {},
  };
}
