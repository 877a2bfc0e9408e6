import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { constructEvent, Mcs } from '@mcs/client';

const mcs = new Mcs({
  apiKey: process.env.KEY ?? '',
  baseUrl: process.env.MCS_BASE_URL ?? 'http://127.0.0.1:8080',
});

// 1. a receiver that verifies every delivery, and a webhook endpoint pointing at it
let secret = '';
const receiver = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    const event = constructEvent(Buffer.concat(chunks), req.headers, secret); // throws if forged
    console.log('verified', event.type, event.id);
    res.end('ok');
    receiver.close();
  });
});
const delivered = once(receiver, 'close'); // it closes after the first delivery
await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
const { port } = receiver.address() as AddressInfo;
const endpoint = await mcs.webhooks.create({
  url: `http://127.0.0.1:${port}/hooks`,
  events: ['order.created'],
});
secret = endpoint.secret ?? '';

// 2. an order (the SDK adds an Idempotency-Key and retries safely with it)
const order = await mcs.orders.create({
  customer: { name: 'Ada', phone: '+4915112345678' },
  currency: 'EUR',
  items: [{ name: 'Tea', unit_amount: 450, quantity: 2 }],
});
console.log('created', order.id, order.total, order.currency);

// 3. every pending order, page by page
for await (const o of mcs.orders.list({ status: 'pending', limit: 100 })) console.log('pending', o.id);

// 4. once the delivery came, delete the endpoint: left behind, it would turn unhealthy (its receiver
// is gone) and count toward the endpoint limit of the mode
await delivered;
await mcs.webhooks.del(endpoint.id);
console.log('deleted', endpoint.id);
