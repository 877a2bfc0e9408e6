// A real webhook receiver for tests: HTTPS (or HTTP) on 127.0.0.1, records every request with
// its raw body, and answers as the test says (status, delay, or hang).
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TestCerts } from './certs.ts';

export interface Received {
  at: number;
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export interface Reply {
  status?: number;
  body?: string;
  headers?: Record<string, string>;
  /** Wait this long before answering. */
  delayMs?: number;
  /** Never answer (the sender's time-out must end it). */
  hang?: boolean;
}

export interface Receiver {
  url: string;
  received: Received[];
  /** Decides each answer; default 200 "ok". */
  reply: (r: Received, index: number) => Reply;
  waitFor(count: number, timeoutMs?: number): Promise<Received[]>;
  close(): Promise<void>;
}

export async function startReceiver(opts: { certs?: TestCerts; path?: string } = {}): Promise<Receiver> {
  const received: Received[] = [];
  /** Each returns true once satisfied, and is dropped then. */
  const waiters: Array<() => boolean> = [];
  const hanging = new Set<http.ServerResponse>();
  const receiver: Receiver = {
    url: '',
    received,
    reply: () => ({ status: 200, body: 'ok' }),
    waitFor(count, timeoutMs = 15_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (received.length >= count) {
            clearTimeout(timer);
            resolve(received.slice(0, count));
            return true;
          }
          return false;
        };
        const timer = setTimeout(
          () => reject(new Error(`receiver got ${received.length} of ${count} requests in ${timeoutMs} ms`)),
          timeoutMs,
        );
        if (!check()) waiters.push(check);
      });
    },
    close: async () => {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  const onRequest = (req: http.IncomingMessage, res: http.ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const r: Received = {
        at: Date.now(),
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      };
      const index = received.length;
      received.push(r);
      for (const w of waiters.splice(0)) if (!w()) waiters.push(w);
      const reply = receiver.reply(r, index);
      if (reply.hang) {
        hanging.add(res);
        res.on('close', () => hanging.delete(res));
        return;
      }
      const answer = () => {
        res.writeHead(reply.status ?? 200, { 'content-type': 'text/plain', ...reply.headers });
        res.end(reply.body ?? 'ok');
      };
      if (reply.delayMs) setTimeout(answer, reply.delayMs);
      else answer();
    });
  };
  const server = opts.certs
    ? https.createServer({ key: opts.certs.key, cert: opts.certs.cert }, onRequest)
    : http.createServer(onRequest);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  receiver.url = `${opts.certs ? 'https' : 'http'}://localhost:${port}${opts.path ?? '/webhooks'}`;
  return receiver;
}
