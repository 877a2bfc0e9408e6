// `--events` of mcs listen: what the endpoint is made with; forwarding to the local server.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { expandEvents, forward, lines } from './listen.ts';

describe('expandEvents', () => {
  it('expands a family against every event type the API accepts, operational ones included', () => {
    expect(expandEvents('payment.*,order.created')).toEqual([
      'order.created',
      'payment.completed',
      'payment.failed',
    ]);
    expect(expandEvents('webhook_endpoint.*')).toEqual([
      'webhook_endpoint.disabled',
      'webhook_endpoint.enabled',
      'webhook_endpoint.unhealthy',
    ]);
  });

  it('keeps "*" as it is: the API reads it as the resource types only', () => {
    expect(expandEvents(undefined)).toEqual(['*']);
    expect(expandEvents('*')).toEqual(['*']);
    expect(expandEvents('order.*,*')).toEqual(['*']);
  });

  it('refuses a family that matches nothing', () => {
    expect(() => expandEvents('refund.*')).toThrow(/"refund\.\*" matches no event type/);
  });
});

describe('lines of the listen stream', () => {
  const stream = (chunks: Iterable<string>) => {
    const it = chunks[Symbol.iterator]();
    let canceled = false;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        const next = it.next();
        if (next.done) controller.close();
        else controller.enqueue(new TextEncoder().encode(next.value));
      },
      cancel() {
        canceled = true;
      },
    });
    return { body, canceled: () => canceled };
  };

  it('yields each line, across chunks', async () => {
    const got: string[] = [];
    for await (const l of lines(stream(['{"a":', '1}\n{"b"', ':2}\n\n']).body)) got.push(l);
    expect(got).toEqual(['{"a":1}', '{"b":2}', '']);
  });

  it('gives up on a line longer than the limit, and cancels the stream, instead of buffering without end', async () => {
    // A hostile server: one line that never ends (a MiB at a time, forever).
    const mib = 'x'.repeat(1024 * 1024);
    let sent = 0;
    const endless = {
      *[Symbol.iterator]() {
        for (;;) {
          sent++;
          yield mib;
        }
      },
    };
    const s = stream(endless);
    const read = async () => {
      for await (const _ of lines(s.body, 4 * 1024 * 1024)) {
        // no line ever ends
      }
    };
    await expect(read()).rejects.toThrow(/line longer than 4 MiB/);
    expect(sent).toBeLessThan(8);
    expect(s.canceled()).toBe(true);
  });
});

describe('forwarding to the local server', () => {
  it('reads only the start of an endless answer: the excerpt, at once, memory bounded', async () => {
    // A 200 that streams without end (a dev server's event stream, a file served by mistake).
    const chunk = Buffer.alloc(64 * 1024, 'x');
    const server = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      const more = () => {
        while (!res.destroyed && res.write(chunk));
        if (!res.destroyed) res.once('drain', more);
      };
      more();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const { port } = server.address() as AddressInfo;
      const result = await forward(`http://127.0.0.1:${port}/hooks`, '{}', {});
      expect(result).toMatchObject({ status_code: 200, error: null });
      expect(result.response_excerpt).toBe('x'.repeat(2048));
      // Not read until the forward's 10 s deadline.
      expect(result.latency_ms).toBeLessThan(2_000);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});
