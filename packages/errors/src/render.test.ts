import { Code, ConnectError } from '@connectrpc/connect';
import { describe, expect, it } from 'vitest';
import { renderConnectError } from './index.ts';

describe('bare Connect codes', () => {
  it('says a call that ran out of time may have been applied', () => {
    const late = renderConnectError(new ConnectError('deadline', Code.DeadlineExceeded), 'http://docs');
    expect(late).toMatchObject({ status: 503, code: 'service_unavailable' });
    expect(late.body.error.message).toContain('may or may not have been applied');
    expect(late.body.error.message).toContain('Idempotency-Key');
  });

  it('keeps the catalog message for a service that could not be reached', () => {
    const down = renderConnectError(new ConnectError('refused', Code.Unavailable), 'http://docs');
    expect(down).toMatchObject({ status: 503, code: 'service_unavailable' });
    expect(down.body.error.message).toBe('The service is temporarily unavailable. Retry shortly.');
  });
});
