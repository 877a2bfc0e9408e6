// The spinner as a person sees it: the CLI on a real pseudo-terminal (util-linux `script`),
// against an API that takes 1.5 s to answer.
import { execFile } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';

const CLI = fileURLToPath(new URL('./main.ts', import.meta.url));
let server: http.Server;
let baseUrl: string;

beforeAll(async () => {
  server = http.createServer((_req, res) => {
    setTimeout(() => {
      res.writeHead(200, { 'content-type': 'application/json', 'request-id': 'req_slow' });
      res.end(JSON.stringify({ object: 'list', data: [], has_more: false, url: '/v1/events' }));
    }, 1_500);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise((r) => server.close(r)));

function onTerminal(args: string[]): Promise<string> {
  const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  const command = [process.execPath, CLI, ...args].map(quote).join(' ');
  return new Promise((resolve, reject) => {
    execFile(
      'script',
      ['-qec', command, '/dev/null'],
      { env: { ...process.env, MCS_CONFIG: '/nonexistent/mcs.json' } },
      (err, stdout) => (err ? reject(err) : resolve(stdout)),
    );
  });
}

it('shows a spinner on a terminal while a call takes longer than a second, then erases it', async () => {
  const out = await onTerminal(['events', 'list', '--api-key', 'sk_test_slow', '--base-url', baseUrl]);
  expect(out).toMatch(/[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] Fetching events \(\d s\)/);
  expect(out).toContain('\r\x1b[K(none)');
});
