// The HTTP sender against raw receivers: answers real servers give that a strict client refuses.
import net from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { createSender } from './sender.ts';

const servers: net.Server[] = [];
afterAll(() => {
  for (const s of servers) s.close();
});

/** A receiver that reads the request, then writes `answer` as raw bytes. */
async function rawReceiver(answer: string): Promise<string> {
  const server = net.createServer((socket) => {
    let seen = '';
    socket.on('data', (chunk) => {
      seen += chunk.toString('latin1');
      const head = seen.indexOf('\r\n\r\n');
      if (head < 0) return;
      const length = Number(/content-length: *(\d+)/i.exec(seen.slice(0, head))?.[1] ?? 0);
      if (seen.length - head - 4 >= length) socket.end(answer);
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as net.AddressInfo).port}/hooks`;
}

describe('HTTP sender', () => {
  const sender = createSender({ timeoutMs: 3_000, allowPrivate: true, connectionsPerOrigin: 4 });
  afterAll(() => sender.close());

  it('takes the answer after an unexpected 100 Continue (RFC 9110 15.2), as after any 1xx', async () => {
    for (const interim of ['100 Continue', '103 Early Hints']) {
      const url = await rawReceiver(
        `HTTP/1.1 ${interim}\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok`,
      );
      const result = await sender.send(url, '{}', { 'content-type': 'application/json' });
      expect(result, interim).toMatchObject({ ok: true, statusCode: 200, error: null, excerpt: 'ok' });
    }
  });
});

describe('HTTP sender, answers whose body stalls or breaks off', () => {
  /** A receiver that reads the request, writes `head`, then stalls (or, with `reset`, resets the connection). */
  async function stallingReceiver(head: string, reset = false): Promise<string> {
    const server = net.createServer((socket) => {
      socket.on('error', () => {});
      socket.once('data', () => {
        socket.write(head);
        if (reset) setTimeout(() => socket.resetAndDestroy(), 50);
      });
    });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(server.address() as net.AddressInfo).port}/hooks`;
  }

  it('takes a 2xx status that came in time, though the body stalls past the deadline or breaks off', async () => {
    const sender = createSender({ timeoutMs: 1_000, allowPrivate: true, connectionsPerOrigin: 4 });
    try {
      const stalls = await stallingReceiver('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial');
      const started = Date.now();
      expect(await sender.send(stalls, '{}', {})).toMatchObject({
        ok: true,
        statusCode: 200,
        error: null,
        excerpt: 'partial',
      });
      expect(Date.now() - started).toBeGreaterThanOrEqual(900); // it waited for the body first
      const breaks = await stallingReceiver('HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\nab', true);
      expect(await sender.send(breaks, '{}', {})).toMatchObject({ ok: true, statusCode: 204 });
      // Not a 2xx: still a failure, as is no status at all.
      const fails = await stallingReceiver('HTTP/1.1 500 Oops\r\nContent-Length: 100\r\n\r\nx');
      expect(await sender.send(fails, '{}', {})).toMatchObject({ ok: false });
      const nothing = await stallingReceiver('');
      expect(await sender.send(nothing, '{}', {})).toMatchObject({
        ok: false,
        statusCode: null,
        error: 'timed out after 1000 ms',
      });
    } finally {
      await sender.close();
    }
  });
});

describe('HTTP sender, malformed answers', () => {
  it('records a status below 100 as an invalid answer, not as an internal assertion', async () => {
    const sender = createSender({ timeoutMs: 3_000, allowPrivate: true, connectionsPerOrigin: 4 });
    try {
      const url = await rawReceiver('HTTP/1.1 099 Odd\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
      const result = await sender.send(url, '{}', {});
      expect(result).toMatchObject({ ok: false, statusCode: null, error: 'invalid HTTP response' });
    } finally {
      await sender.close();
    }
  });
});

describe('HTTP sender, a name with several addresses', () => {
  it('tries the next address when the first refuses (as a browser or curl would)', async () => {
    const url = new URL(
      await rawReceiver('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok'),
    );
    // receiver.test: first ::1 (nothing listens on that port there), then the receiver's 127.0.0.1.
    const sender = createSender({
      timeoutMs: 3_000,
      allowPrivate: true,
      connectionsPerOrigin: 4,
      lookup: async () => [
        { address: '::1', family: 6 },
        { address: '127.0.0.1', family: 4 },
      ],
    });
    try {
      const result = await sender.send(`http://receiver.test:${url.port}/hooks`, '{}', {});
      expect(result).toMatchObject({ ok: true, statusCode: 200, excerpt: 'ok' });
    } finally {
      await sender.close();
    }
  });

  it('names every address tried when none answers', async () => {
    const sender = createSender({
      timeoutMs: 3_000,
      allowPrivate: true,
      connectionsPerOrigin: 4,
      lookup: async () => [
        { address: '::1', family: 6 },
        { address: '127.0.0.1', family: 4 },
      ],
    });
    try {
      const result = await sender.send('http://receiver.test:1/hooks', '{}', {});
      expect(result).toMatchObject({ ok: false, statusCode: null });
      expect(result.error).toMatch(/^ECONNREFUSED: .*::1.*; .*127\.0\.0\.1/);
    } finally {
      await sender.close();
    }
  });

  it('still refuses the name when any of its addresses is not public', async () => {
    const url = new URL(
      await rawReceiver('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok'),
    );
    const sender = createSender({
      timeoutMs: 3_000,
      allowPrivate: false,
      connectionsPerOrigin: 4,
      lookup: async () => [
        { address: '93.184.215.14', family: 4 },
        { address: '127.0.0.1', family: 4 },
      ],
    });
    try {
      const result = await sender.send(`http://receiver.test:${url.port}/hooks`, '{}', {});
      expect(result).toMatchObject({ ok: false, statusCode: null });
      expect(result.error).toMatch(/receiver\.test resolves to 127\.0\.0\.1, which is not a public address/);
    } finally {
      await sender.close();
    }
  });
});
