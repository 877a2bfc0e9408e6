// `--events` of mcs listen: what the endpoint is made with.
import { describe, expect, it } from 'vitest';
import { expandEvents, lines } from './listen.ts';

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
