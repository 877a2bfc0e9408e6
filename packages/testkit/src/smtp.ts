// A real SMTP server for tests (npm smtp-server) on 127.0.0.1: accepts every message without
// TLS or authentication and records it, with its envelope, headers and decoded text body.
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';

export interface ReceivedMail {
  at: number;
  /** Envelope sender and recipients (MAIL FROM, RCPT TO). */
  from: string;
  to: string[];
  /** Header names in lower case, folded lines unfolded, encoded words decoded. */
  headers: Record<string, string>;
  subject: string;
  messageId: string;
  /** The body decoded (quoted-printable or base64) as UTF-8; a single-part message is assumed. */
  text: string;
  raw: string;
}

export interface SmtpServer {
  /** `smtp://127.0.0.1:<port>`: give it to the stack as SMTP_URL. */
  url: string;
  messages: ReceivedMail[];
  waitFor(count: number, timeoutMs?: number): Promise<ReceivedMail[]>;
  close(): Promise<void>;
}

function decodeQuotedPrintable(text: string): string {
  const soft = text.replace(/=\r?\n/g, '');
  const bytes: number[] = [];
  for (let i = 0; i < soft.length; i++) {
    const c = soft[i]!;
    const hex = soft.slice(i + 1, i + 3);
    if (c === '=' && /^[0-9A-Fa-f]{2}$/.test(hex)) {
      bytes.push(Number.parseInt(hex, 16));
      i += 2;
    } else {
      bytes.push(...Buffer.from(c, 'utf8'));
    }
  }
  return Buffer.from(bytes).toString('utf8');
}

/** RFC 2047 encoded words (`=?UTF-8?Q?…?=`, `=?UTF-8?B?…?=`), adjacent ones joined. */
function decodeWords(value: string): string {
  return value
    .replace(/(\?=)\s+(=\?)/g, '$1$2')
    .replace(/=\?([^?]+)\?([QqBb])\?([^?]*)\?=/g, (_m, _charset: string, enc: string, data: string) =>
      enc.toUpperCase() === 'B'
        ? Buffer.from(data, 'base64').toString('utf8')
        : decodeQuotedPrintable(data.replace(/_/g, ' ')),
    );
}

export function parseMail(raw: string): Pick<ReceivedMail, 'headers' | 'subject' | 'messageId' | 'text'> {
  const split = raw.search(/\r?\n\r?\n/);
  const head = split === -1 ? raw : raw.slice(0, split);
  const body = split === -1 ? '' : raw.slice(split).replace(/^\r?\n\r?\n/, '');
  const headers: Record<string, string> = {};
  for (const line of head.replace(/\r?\n[ \t]+/g, ' ').split(/\r?\n/)) {
    const colon = line.indexOf(':');
    if (colon > 0)
      headers[line.slice(0, colon).trim().toLowerCase()] = decodeWords(line.slice(colon + 1).trim());
  }
  const encoding = (headers['content-transfer-encoding'] ?? '7bit').toLowerCase();
  const text =
    encoding === 'quoted-printable'
      ? decodeQuotedPrintable(body)
      : encoding === 'base64'
        ? Buffer.from(body.replace(/\s+/g, ''), 'base64').toString('utf8')
        : body;
  return { headers, subject: headers.subject ?? '', messageId: headers['message-id'] ?? '', text };
}

export async function startSmtpServer(): Promise<SmtpServer> {
  const messages: ReceivedMail[] = [];
  const waiters: Array<() => boolean> = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        const from = session.envelope.mailFrom;
        messages.push({
          at: Date.now(),
          from: from ? from.address : '',
          to: session.envelope.rcptTo.map((r) => r.address),
          raw,
          ...parseMail(raw),
        });
        for (const w of waiters.splice(0)) if (!w()) waiters.push(w);
        callback();
      });
    },
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.server.address() as AddressInfo;
  return {
    url: `smtp://127.0.0.1:${port}`,
    messages,
    waitFor(count, timeoutMs = 15_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (messages.length < count) return false;
          clearTimeout(timer);
          resolve(messages.slice(0, count));
          return true;
        };
        const timer = setTimeout(
          () =>
            reject(new Error(`SMTP server got ${messages.length} of ${count} messages in ${timeoutMs} ms`)),
          timeoutMs,
        );
        if (!check()) waiters.push(check);
      });
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
