import type { Caller } from '@mcs/kit/caller';
import { apiErrorOf, freshDatabase, type MigratedDatabase, secondWaitsForFirst } from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateWebhooks } from '../db/migrate.ts';
import {
  createEndpoint,
  deleteEndpoint,
  enableEndpoint,
  getEndpoint,
  listEndpoints,
  MAX_ENDPOINTS,
  rotateSecret,
  URL_LOOKUP_TIMEOUT_MS,
  updateEndpoint,
  validateEvents,
  validateUrl,
} from './endpoints.ts';
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

  it('names the setting that allows a refused local URL only where hints are on', async () => {
    const quiet = await apiErrorOf(validateUrl('http://127.0.0.1:3000/hooks', strict));
    expect(quiet.err.rawMessage).toBe('url must use https://.');
    const told = await apiErrorOf(validateUrl('http://127.0.0.1:3000/hooks', { ...strict, hints: true }));
    expect(told.err.rawMessage).toContain('WEBHOOK_ALLOW_HTTP=true');
    const https = await apiErrorOf(validateUrl('https://127.0.0.1/hooks', { ...strict, hints: true }));
    expect(https.err.rawMessage).toContain('url must point at a public host.');
    expect(https.err.rawMessage).toContain('WEBHOOK_ALLOW_PRIVATE_NETWORKS=true');
    // ftp:// can never be allowed, so no setting is named.
    const ftp = await apiErrorOf(validateUrl('ftp://93.184.215.14/', { ...strict, hints: true }));
    expect(ftp.err.rawMessage).toBe('url must use https://.');
  });

  it('names http:// among the schemes where it is allowed', async () => {
    const ftp = await apiErrorOf(
      validateUrl('ftp://93.184.215.14/', { ...strict, allowHttp: true, hints: true }),
    );
    expect(ftp.err.rawMessage).toBe('url must use https:// or http://.');
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
      // mapped, compatible and embedded v4 forms of private ranges
      '[::ffff:10.0.0.1]',
      '[::ffff:a00:1]',
      '[0:0:0:0:0:ffff:7f00:1]',
      '[::127.0.0.1]',
      '[::ffff:0:7f00:1]',
      '[::ffff:0:127.0.0.1]',
      '[64:ff9b::a9fe:a9fe]',
      '[2001::1]',
      '[fec0::1]',
      '[fe80::1%25eth0]',
      // other numeric spellings
      '0x0a.0.0.1',
      '167772161',
      '10.1',
      '0177.1',
      '127.000.000.001',
      '192.168.1.1.',
      '100.127.255.255',
      // names that only mean something inside a private network
      'metadata.google.internal',
      'metadata',
      'instance-data',
      'printer.local',
      'router.home.arpa',
    ];
    for (const host of hosts) {
      expect(await codeOf(validateUrl(`https://${host}/hook`, strict)), host).toBe('invalid_url');
    }
  });

  it('accepts public IPv6 literals and public names that do not resolve yet', async () => {
    expect(await validateUrl('https://[2606:4700:4700::1111]/h', strict)).toBe(
      'https://[2606:4700:4700::1111]/h',
    );
    // Checked again at every attempt on the address really used (delivery/target.ts).
    expect(await validateUrl('https://hooks.example.invalid-tld-zz/h', strict)).toBe(
      'https://hooks.example.invalid-tld-zz/h',
    );
  });

  it('waits at most URL_LOOKUP_TIMEOUT_MS for DNS, then accepts (each attempt checks again)', async () => {
    let asked = 0;
    const policy = {
      ...strict,
      // A resolver that never answers, as offline with an unreachable name server.
      lookup: () => {
        asked++;
        return new Promise<never>(() => {});
      },
    };
    const t0 = performance.now();
    expect(await validateUrl('https://hooks.example.com/h', policy)).toBe('https://hooks.example.com/h');
    const took = performance.now() - t0;
    expect(asked).toBe(1);
    expect(took).toBeGreaterThanOrEqual(URL_LOOKUP_TIMEOUT_MS - 50);
    expect(took).toBeLessThan(URL_LOOKUP_TIMEOUT_MS + 1_000);
    // A resolver that answers late with a private address is refused while it is in time.
    const late = {
      ...strict,
      lookup: () =>
        new Promise<Array<{ address: string; family: number }>>((r) =>
          setTimeout(() => r([{ address: '10.0.0.1', family: 4 }]), 200),
        ),
    };
    expect(await codeOf(validateUrl('https://hooks.example.com/h', late))).toBe('invalid_url');
  });

  it('refuses a user name alone, fragments and port 0', async () => {
    expect(await codeOf(validateUrl('https://user@93.184.215.14/', strict))).toBe('invalid_url');
    expect(await codeOf(validateUrl('https://93.184.215.14/#x', strict))).toBe('invalid_url');
    expect(await codeOf(validateUrl('https://93.184.215.14:0/h', strict))).toBe('invalid_url');
    expect(await validateUrl('https://93.184.215.14:8443/h', strict)).toBe('https://93.184.215.14:8443/h');
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
  const caller: Caller = { accountId: 'acct_1', livemode: false };

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

  it('lets an account have MAX_ENDPOINTS endpoints in each mode, and no more, even at once', async () => {
    const full: Caller = { accountId: 'acct_full', livemode: false };
    const create = (c: Caller) =>
      db.db.transaction((tx) => createEndpoint(tx, c, { url: 'https://127.0.0.1/h', events: ['*'] }, deps));
    const results = await Promise.allSettled(Array.from({ length: MAX_ENDPOINTS + 5 }, () => create(full)));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(MAX_ENDPOINTS);
    for (const r of results)
      if (r.status === 'rejected') expect(await codeOf(Promise.reject(r.reason))).toBe('too_many_endpoints');
    // The other mode has its own room; a deleted endpoint makes room.
    await create({ ...full, livemode: true });
    const [first] = (await listEndpoints(db.db, full, { limit: 1 })).data;
    await db.db.transaction((tx) => deleteEndpoint(tx, full, first!.id));
    await create(full);
  });

  it('times a change once the endpoint is locked: its event follows the change it waited for', async () => {
    const { endpoint } = await db.db.transaction((tx) =>
      createEndpoint(tx, caller, { url: 'https://127.0.0.1/h', events: ['*'] }, deps),
    );
    // A disable holds the row while an enable, asked meanwhile, waits for it.
    const [disabled, enabled] = await secondWaitsForFirst(
      db,
      (tx) => updateEndpoint(tx, caller, endpoint.id, { disabled: true }, deps),
      async (tx) => enableEndpoint(tx, caller, endpoint.id),
    );
    expect(enabled.status).toBe('enabled');
    expect(enabled.updatedAt.getTime()).toBeGreaterThan(disabled.updatedAt.getTime());
    const { rows } = await db.pool.query<{ type: string; created_at: Date }>(
      `select type, created_at from webhooks.events where (body::jsonb)->'data'->>'id' = $1 order by created_at, id`,
      [endpoint.id],
    );
    expect(rows.map((r) => r.type)).toEqual(['webhook_endpoint.disabled', 'webhook_endpoint.enabled']);
  });
});

describe('changing endpoints', () => {
  let db: MigratedDatabase;
  beforeAll(async () => {
    db = await freshDatabase(migrateWebhooks);
  });
  afterAll(() => db?.close());
  const box = createSecretBox(Buffer.alloc(32, 2));
  const deps = { box, policy: { allowHttp: false, allowPrivate: false } };
  let n = 0;

  async function setup() {
    const caller: Caller = { accountId: `acct_c${++n}`, livemode: false };
    const { endpoint, secret } = await db.db.transaction((tx) =>
      createEndpoint(tx, caller, { url: 'https://93.184.215.14/a', events: ['*'], description: 'd' }, deps),
    );
    return { caller, endpoint, secret };
  }

  /** A pending delivery to the endpoint, as fan-out records one. */
  async function pendingDelivery(endpointId: string, caller: Caller) {
    const id = `dlv_t${++n}`;
    await db.pool.query(
      `insert into webhooks.events (id, account_id, livemode, type, payload, body, created_at)
       values ($1, $2, false, 'order.created', '', '{}', now())`,
      [`evt_t${n}`, caller.accountId],
    );
    await db.pool.query(
      `insert into webhooks.deliveries (id, event_id, endpoint_id, account_id, livemode, status, next_attempt_at, created_at)
       values ($1, $2, $3, $4, false, 'pending', now(), now())`,
      [id, `evt_t${n}`, endpointId, caller.accountId],
    );
    return id;
  }
  const statusOf = async (deliveryId: string) =>
    (await db.pool.query('select status from webhooks.deliveries where id = $1', [deliveryId])).rows[0]
      ?.status;

  it('updates only the fields given, validating each', async () => {
    const { caller, endpoint } = await setup();
    const update = (input: Parameters<typeof updateEndpoint>[3]) =>
      db.db.transaction((tx) => updateEndpoint(tx, caller, endpoint.id, input, deps));
    const moved = await update({ url: 'https://93.184.215.15/b', events: [] });
    expect(moved).toMatchObject({
      url: 'https://93.184.215.15/b',
      events: ['*'],
      description: 'd',
      status: 'enabled',
    });
    expect(await update({ events: ['order.created'], description: '' })).toMatchObject({
      events: ['order.created'],
      description: null,
    });
    expect(await codeOf(update({ url: 'https://10.0.0.1/' }))).toBe('invalid_url');
    expect(await codeOf(update({ url: 'http://93.184.215.14/' }))).toBe('invalid_url');
    expect(await codeOf(update({ events: ['order.exploded'] }))).toBe('invalid_event_type');
    expect((await getEndpoint(db.db, caller, endpoint.id)).url).toBe('https://93.184.215.15/b');
  });

  it('disables (skipping what is pending) and enables again', async () => {
    const { caller, endpoint } = await setup();
    const pending = await pendingDelivery(endpoint.id, caller);
    const disabled = await db.db.transaction((tx) =>
      updateEndpoint(tx, caller, endpoint.id, { disabled: true }, deps),
    );
    expect(disabled.status).toBe('disabled');
    expect(await statusOf(pending)).toBe('skipped');
    const enabled = await db.db.transaction((tx) =>
      updateEndpoint(tx, caller, endpoint.id, { disabled: false }, deps),
    );
    expect(enabled.status).toBe('enabled');
  });

  it('re-enables an unhealthy endpoint, clearing its health detail', async () => {
    const { caller, endpoint } = await setup();
    await db.pool.query(
      `update webhooks.endpoints set status = 'unhealthy', failing_since = now(), last_error = 'HTTP 500' where id = $1`,
      [endpoint.id],
    );
    const row = await db.db.transaction((tx) => enableEndpoint(tx, caller, endpoint.id));
    expect(row).toMatchObject({ status: 'enabled', failingSince: null, lastError: null });
    // Enabling an enabled endpoint changes nothing, and keeps its health detail.
    await db.pool.query(`update webhooks.endpoints set last_error = 'HTTP 502' where id = $1`, [endpoint.id]);
    expect((await db.db.transaction((tx) => enableEndpoint(tx, caller, endpoint.id))).lastError).toBe(
      'HTTP 502',
    );
  });

  it('rotates the secret, sealed', async () => {
    const { caller, endpoint, secret } = await setup();
    const rotated = await db.db.transaction((tx) => rotateSecret(tx, caller, endpoint.id, deps));
    expect(rotated.secret).toMatch(/^whsec_/);
    expect(rotated.secret).not.toBe(secret);
    const { rows } = await db.pool.query('select secret_sealed from webhooks.endpoints where id = $1', [
      endpoint.id,
    ]);
    expect(box.open(rows[0].secret_sealed)).toBe(rotated.secret);
  });

  it('deletes, skipping what is pending; afterwards the endpoint is gone', async () => {
    const { caller, endpoint } = await setup();
    const pending = await pendingDelivery(endpoint.id, caller);
    expect(await db.db.transaction((tx) => deleteEndpoint(tx, caller, endpoint.id))).toBe(endpoint.id);
    expect(await statusOf(pending)).toBe('skipped');
    expect(await codeOf(getEndpoint(db.db, caller, endpoint.id))).toBe('resource_missing');
    expect(await codeOf(db.db.transaction((tx) => deleteEndpoint(tx, caller, endpoint.id)))).toBe(
      'resource_missing',
    );
  });

  it('lets no other account or mode change an endpoint', async () => {
    const { caller, endpoint, secret } = await setup();
    for (const other of [
      { ...caller, accountId: 'acct_other' },
      { ...caller, livemode: true },
    ]) {
      const attempts = [
        () => db.db.transaction((tx) => updateEndpoint(tx, other, endpoint.id, { disabled: true }, deps)),
        () => db.db.transaction((tx) => enableEndpoint(tx, other, endpoint.id)),
        () => db.db.transaction((tx) => rotateSecret(tx, other, endpoint.id, deps)),
        () => db.db.transaction((tx) => deleteEndpoint(tx, other, endpoint.id)),
      ];
      for (const attempt of attempts) expect(await codeOf(attempt())).toBe('resource_missing');
    }
    const { rows } = await db.pool.query('select * from webhooks.endpoints where id = $1', [endpoint.id]);
    expect(rows[0].status).toBe('enabled');
    expect(box.open(rows[0].secret_sealed)).toBe(secret);
  });
});
