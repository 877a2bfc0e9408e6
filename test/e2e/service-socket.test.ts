// On one machine the gateway calls each service over the service's Unix domain socket
// (SERVICE_SOCKET_DIR, which `pnpm start` and the test stacks set), not over TCP loopback; with
// it empty, over TCP as in Kubernetes. Which one a stack used is read from the kernel
// (./proc-net.ts): the gateway's TCP connections to commerce's port, and the connections commerce
// accepted on its socket.
import { REPO_ROOT, type Stack, startStack } from '@mcs/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import { acceptedOn, tcpConnectionsTo } from './proc-net.ts';

const stacks: Stack[] = [];
afterAll(async () => {
  await Promise.all(stacks.map((s) => s.stop()));
});

async function orderThrough(stack: Stack): Promise<void> {
  const keys = await stack.createAccount();
  const order = await stack.api(keys.secret_key, 'POST', '/v1/orders', {
    customer: { name: 'Ada Lovelace', phone: '+4915112345678' },
    currency: 'EUR',
    items: [{ name: 'Tea', unit_amount: 450, quantity: 2 }],
  });
  expect(order.status, order.text).toBe(200);
  const read = await stack.api(keys.secret_key, 'GET', `/v1/orders/${order.json.id}`);
  expect(read.json).toMatchObject({ id: order.json.id, total: 900 });
}

const commercePort = (stack: Stack) => Number(new URL(stack.baseUrl).port) + 2;

describe('the gateway → service hop on one machine', () => {
  it('goes over the Unix domain socket by default, and over TCP with SERVICE_SOCKET_DIR empty', async () => {
    const [local, tcp] = await Promise.all([startStack(), startStack({ env: { SERVICE_SOCKET_DIR: '' } })]);
    stacks.push(local, tcp);
    await Promise.all([orderThrough(local), orderThrough(tcp)]);
    const socket = (stack: Stack) => `${REPO_ROOT}.data/run/${commercePort(stack)}.sock`;
    const gateway = (stack: Stack) => stack.pid('gateway')!;
    const commerce = (stack: Stack) => stack.pid('commerce')!;
    expect(tcpConnectionsTo(gateway(local), commercePort(local))).toBe(0);
    expect(acceptedOn(commerce(local), socket(local))).toBeGreaterThan(0);
    expect(tcpConnectionsTo(gateway(tcp), commercePort(tcp))).toBeGreaterThan(0);
    expect(acceptedOn(commerce(tcp), socket(tcp))).toBe(0);
  });
});
