// A throwaway certificate authority and a leaf for localhost/127.0.0.1, made with the
// machine's openssl, so webhook tests talk real TLS to a receiver the sender must verify.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TestCerts {
  dir: string;
  /** Path of the CA certificate (PEM): give it to the sender as NODE_EXTRA_CA_CERTS. */
  caFile: string;
  ca: string;
  key: string;
  cert: string;
}

export function createTestCerts(): TestCerts {
  const dir = mkdtempSync(join(tmpdir(), 'mcs-certs-'));
  const run = (args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  run([
    'req',
    '-x509',
    ...ec,
    '-keyout',
    'ca.key',
    '-out',
    'ca.crt',
    '-days',
    '2',
    '-subj',
    '/CN=mcs test CA',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  run(['req', ...ec, '-keyout', 'leaf.key', '-out', 'leaf.csr', '-subj', '/CN=localhost']);
  writeFileSync(
    join(dir, 'leaf.ext'),
    'subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\nextendedKeyUsage=serverAuth\n',
  );
  run([
    'x509',
    '-req',
    '-in',
    'leaf.csr',
    '-CA',
    'ca.crt',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-out',
    'leaf.crt',
    '-days',
    '2',
    '-extfile',
    'leaf.ext',
  ]);
  const read = (f: string) => readFileSync(join(dir, f), 'utf8');
  return {
    dir,
    caFile: join(dir, 'ca.crt'),
    ca: read('ca.crt'),
    key: read('leaf.key'),
    cert: read('leaf.crt'),
  };
}
