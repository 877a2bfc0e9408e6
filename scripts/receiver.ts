// A local webhook receiver for trying mcs by hand (README): verifies each delivery with
// @mcs/webhook-verify and prints it. Usage: MCS_WEBHOOK_SECRET=whsec_… pnpm receiver [port]
import http from 'node:http';
import { verifyWebhook } from '@mcs/webhook-verify';

const secret = process.env.MCS_WEBHOOK_SECRET;
if (!secret) {
  process.stderr.write('set MCS_WEBHOOK_SECRET to the endpoint secret (whsec_…)\n');
  process.exit(2);
}
const port = Number(process.argv[2] ?? 3000);

http
  .createServer((req, res) => {
    // Anything but a POST is someone checking that the receiver is up (the README waits so).
    if (req.method !== 'POST') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('mcs receiver: POST webhooks here\n');
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      try {
        const event = verifyWebhook(secret, Buffer.concat(chunks), req.headers);
        process.stdout.write(`verified ${event.type} ${event.id}: ${JSON.stringify(event.data)}\n`);
        res.writeHead(200).end('ok');
      } catch (err) {
        process.stdout.write(`rejected: ${(err as Error).message}\n`);
        res.writeHead(401).end();
      }
    });
  })
  .listen(port, '127.0.0.1', () => process.stdout.write(`receiver listening on http://127.0.0.1:${port}/\n`));
