import { Code, ConnectError } from '@connectrpc/connect';
import { describe, expect, it } from 'vitest';
import { raceCall } from './call-race.ts';

const codeOf = (p: Promise<unknown>) =>
  p.then(
    () => 'resolved',
    (e: ConnectError) => e.code,
  );

describe('raceCall', () => {
  it('settles with the call, once; later outcomes and the deadline do nothing', async () => {
    let settle!: { resolve(v: number): void; reject(e: ConnectError): void };
    const cancels: unknown[] = [];
    const p = raceCall<number>(undefined, 50, (s) => {
      settle = s;
      return (reason) => cancels.push(reason);
    });
    settle.resolve(1);
    settle.reject(new ConnectError('late', Code.Internal));
    await expect(p).resolves.toBe(1);
    await new Promise((r) => setTimeout(r, 80));
    expect(cancels).toEqual([]);
  });

  it('a deadline: DeadlineExceeded, and the call is cancelled with that error', async () => {
    const cancels: ConnectError[] = [];
    const p = raceCall<number>(undefined, 20, () => (reason) => cancels.push(reason));
    expect(await codeOf(p)).toBe(Code.DeadlineExceeded);
    expect(cancels.map((c) => c.code)).toEqual([Code.DeadlineExceeded]);
  });

  it('an abort: Canceled, and the call is cancelled; an aborted signal never starts it', async () => {
    const ac = new AbortController();
    const cancels: ConnectError[] = [];
    const p = raceCall<number>(ac.signal, undefined, () => (reason) => cancels.push(reason));
    ac.abort();
    expect(await codeOf(p)).toBe(Code.Canceled);
    expect(cancels.map((c) => c.code)).toEqual([Code.Canceled]);
    let started = false;
    const q = raceCall<number>(AbortSignal.abort(), 20, () => {
      started = true;
      return () => {};
    });
    expect(await codeOf(q)).toBe(Code.Canceled);
    expect(started).toBe(false);
  });

  it('a call that fails before start returns is cancelled too, so it can release what it holds', async () => {
    const cancels: ConnectError[] = [];
    const p = raceCall<number>(undefined, 1_000, ({ reject }) => {
      reject(new ConnectError('no connection', Code.Unavailable));
      return (reason) => cancels.push(reason);
    });
    expect(await codeOf(p)).toBe(Code.Unavailable);
    expect(cancels.map((c) => c.code)).toEqual([Code.Unavailable]);
  });
});
