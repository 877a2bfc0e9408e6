// Where a service listens: its URL's port, and beside it a Unix domain socket when the parts
// share a machine (SERVICE_SOCKET_DIR, set by `pnpm start`).
import { describe, expect, it } from 'vitest';
import { servicePort, serviceSocket, serviceUrl } from './config.ts';

describe('serviceSocket', () => {
  it('is named by the port of the service URL, so replicas and stacks side by side differ', () => {
    const env = { PORT: '9000', SERVICE_SOCKET_DIR: '/srv/mcs/run/' };
    expect(serviceUrl('commerce', env)).toBe('http://127.0.0.1:9002');
    expect(serviceSocket('commerce', env)).toBe('/srv/mcs/run/9002.sock');
    const replica = { ...env, COMMERCE_URL: 'http://127.0.0.1:9102' };
    expect(servicePort('commerce', replica)).toBe(9102);
    expect(serviceSocket('commerce', replica)).toBe('/srv/mcs/run/9102.sock');
  });

  it('is none without SERVICE_SOCKET_DIR (or with it empty): calls go over TCP', () => {
    expect(serviceSocket('accounts', { PORT: '9000' })).toBeUndefined();
    expect(serviceSocket('accounts', { PORT: '9000', SERVICE_SOCKET_DIR: '' })).toBeUndefined();
  });

  it('is none when the path would not fit a socket address (107 bytes)', () => {
    const fits = `/${'d'.repeat(96)}`; // + "/9001.sock" = 107
    expect(serviceSocket('accounts', { PORT: '9000', SERVICE_SOCKET_DIR: fits })).toHaveLength(107);
    expect(serviceSocket('accounts', { PORT: '9000', SERVICE_SOCKET_DIR: `${fits}d` })).toBeUndefined();
  });
});
