import type { Caller } from '@mcs/kit/caller';
import { apiErrorOf, freshDatabase, type MigratedDatabase } from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateWebhooks } from '../db/migrate.ts';
import { createEndpoint, getEndpoint, listEndpoints, validateEvents, validateUrl } from './endpoints.ts';
import { createSecretBox } from './secrets.ts';

const strict = { allowHttp: false, allowPrivate: false };
const codeOf = async (p: Promise<unknown>) => (await apiErrorOf(p)).code;

describe('validateUrl', () => {
  it('accepts public https URLs', async () => {
    expect(await validateUrl('https://93.184.215.14/hooks', strict)).toBe('https://93.184.215.14/hooks');
  });

  it('refuses http unless allowed', async () => {
    expect(await codeOf(validateUrl('http://93.184.215.14/', strict))).toBe('invalid_url');
    expect(await validateUrl('http://93.184.215.14/', { ...strict, allowHttp: true })).toBe(
      'http://93.184.215.14/',
    );
  });

  it('refuses other schemes, credentials, garbage', async () => {
    for (const url of [
      'ftp://93.184.215.14/',
      'https://user:pw@93.184.215.14/',
      'not a url',
      'https://',
      '//x',
    ]) {
      expect(await codeOf(validateUrl(url, strict)), url).toBe('invalid_url');
    }
  });

  it('refuses every private, loopback, link-local, CGNAT, multicast, documentation and metadata form', async () => {
    const hosts = [
      '127.0.0.1',
      '127.1',
      '2130706433',
      '0x7f000001',
      '0177.0.0.1',
      '0x7f.0.0.1',
      '0.0.0.0',
      '0',
      '10.0.0.1',
      '172.16.0.1',
      '172.31.255.255',
      '192.168.1.1',
      '100.64.0.1',
      '169.254.169.254',
      '224.0.0.1',
      '239.255.255.250',
      '255.255.255.255',
      '192.0.2.1',
      '198.51.100.7',
      '203.0.113.9',
      '198.18.0.1',
      '[::1]',
      '[::]',
      '[::ffff:127.0.0.1]',
      '[::ffff:7f00:1]',
      '[::ffff:169.254.169.254]',
      '[fe80::1]',
      '[fc00::1]',
      '[fd00:ec2::254]',
      '[ff02::1]',
      '[2001:db8::1]',
      '[64:ff9b::7f00:1]',
      '[2002:7f00:1::]',
      'localhost',
      'LOCALHOST',
      'api.localhost',
      'localhost.',
    ];
    for (const host of hosts) {
      expect(await codeOf(validateUrl(`https://${host}/hook`, strict)), host).toBe('invalid_url');
    }
  });

  it('lets private targets through when the operator allows them', async () => {
    expect(await validateUrl('https://127.0.0.1:9/x', { ...strict, allowPrivate: true })).toBe(
      'https://127.0.0.1:9/x',
    );
  });
});

describe('validateEvents', () => {
  it('accepts known types and *', () => {
    expect(validateEvents(['order.created', 'order.created', '*'])).toEqual(['order.created', '*']);
  });
  it('refuses unknown types and empty lists, naming events', async () => {
    expect(await apiErrorOf(Promise.resolve().then(() => validateEvents(['order.exploded'])))).toMatchObject({
      code: 'invalid_event_type',
      param: 'events',
    });
    expect(await apiErrorOf(Promise.resolve().then(() => validateEvents([])))).toMatchObject({
      code: 'missing_required_field',
      param: 'events',
    });
  });
});

describe('endpoints in the database', () => {
  let db: MigratedDatabase;
  beforeAll(async () => {
    db = await freshDatabase(migrateWebhooks);
  });
  afterAll(() => db?.close());
  const box = createSecretBox(Buffer.alloc(32, 1));
  const deps = { box, policy: { allowHttp: false, allowPrivate: true } };
  const caller: Caller = { accountId: 'acct_1', livemode: false, idempotencyKey: undefined };

  it('stores the secret sealed, never in clear', async () => {
    const { endpoint, secret } = await db.db.transaction((tx) =>
      createEndpoint(tx, caller, { url: 'https://127.0.0.1/h', events: ['*'] }, deps),
    );
    expect(secret).toMatch(/^whsec_/);
    const { rows } = await db.pool.query('select * from webhooks.endpoints where id = $1', [endpoint.id]);
    expect(JSON.stringify(rows[0])).not.toContain(secret.slice(6));
    expect(box.open(rows[0].secret_sealed)).toBe(secret);
  });

  it('keeps tenants and modes apart', async () => {
    const { endpoint } = await db.db.transaction((tx) =>
      createEndpoint(tx, caller, { url: 'https://127.0.0.1/h', events: ['order.created'] }, deps),
    );
    expect((await getEndpoint(db.db, caller, endpoint.id)).id).toBe(endpoint.id);
    expect(await codeOf(getEndpoint(db.db, { ...caller, accountId: 'acct_2' }, endpoint.id))).toBe(
      'resource_missing',
    );
    expect(await codeOf(getEndpoint(db.db, { ...caller, livemode: true }, endpoint.id))).toBe(
      'resource_missing',
    );
    expect((await listEndpoints(db.db, { ...caller, accountId: 'acct_2' }, {})).data).toEqual([]);
  });

  it('answers a repeated idempotency key with the same endpoint and secret', async () => {
    const keyed = { ...caller, idempotencyKey: 'same' };
    const a = await db.db.transaction((tx) =>
      createEndpoint(tx, keyed, { url: 'https://127.0.0.1/a', events: ['*'] }, deps),
    );
    const b = await db.db.transaction((tx) =>
      createEndpoint(tx, keyed, { url: 'https://127.0.0.1/a', events: ['*'] }, deps),
    );
    expect(b.created).toBe(false);
    expect(b.endpoint.id).toBe(a.endpoint.id);
    expect(b.secret).toBe(a.secret);
  });
});
