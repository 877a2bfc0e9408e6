import { describe, expect, it } from 'vitest';
import { createLogger } from './log.ts';
import { formatLogLine } from './log-format.ts';

describe('logs', () => {
  it('never write credentials, whatever a caller passes', () => {
    const lines: string[] = [];
    const log = createLogger('t', 'info', { write: (line: string) => void lines.push(line) });
    log.info(
      {
        authorization: 'Bearer sk_test_abcdefghijklmnop',
        headers: { authorization: 'Bearer x', cookie: 'mcs_session=s' },
        secret: 'whsec_x',
        endpoint: { secret: 'whsec_y', key: 'sk_live_y' },
        requestId: 'req_1',
        eventId: 'evt_1',
        deliveryId: 'del_1',
      },
      'hello',
    );
    const text = lines.join('');
    const rec = JSON.parse(text) as Record<string, unknown>;
    expect(rec).toMatchObject({ requestId: 'req_1', eventId: 'evt_1', deliveryId: 'del_1', msg: 'hello' });
    expect(text).not.toMatch(/sk_test_|whsec_|Bearer x|mcs_session|sk_live_/);
  });

  it("never carry an earlier line's fields", () => {
    const lines: string[] = [];
    const log = createLogger('t', 'info', { write: (line: string) => void lines.push(line) });
    log.warn({ requestId: 'req_1', path: '/v1/orders' }, 'first');
    log.info({ service: 'commerce' }, 'second');
    const second = JSON.parse(lines[1]!) as Record<string, unknown>;
    expect(second).toMatchObject({ service: 'commerce', msg: 'second' });
    expect(second).not.toHaveProperty('requestId');
    expect(second).not.toHaveProperty('path');
  });

  it('formats JSON lines readably for a terminal', () => {
    const line = JSON.stringify({
      level: 40,
      time: Date.UTC(2026, 0, 1, 12, 34, 56, 789),
      svc: 'gateway',
      msg: 'service unavailable',
      requestId: 'req_1',
      path: '/v1/orders',
      err: 'connect ECONNREFUSED',
    });
    expect(formatLogLine(line, false)).toBe(
      '12:34:56.789 WARN  service unavailable requestId=req_1 path=/v1/orders err="connect ECONNREFUSED"',
    );
    expect(formatLogLine('not json', false)).toBe('not json');
    expect(formatLogLine('{"a":1}', false)).toBe('{"a":1}');
  });
});
