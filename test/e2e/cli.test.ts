// The developer CLI (`mcs`) as a separate process against the real stack: login and where
// credentials come from, trigger for every event type of spec 6.1, events and webhooks commands
// in tables and --json, API errors with their code and Request-Id, and --help everywhere.
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type AccountKeys, type Receiver, type Stack, startReceiver, startStack } from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TRIGGER_TYPES } from '../../packages/cli/src/commands/trigger.ts';
import { cliEnv, configHome, jsonOf, runCli } from './cli-helpers.ts';

let stack: Stack;
let keys: AccountKeys;
let receiver: Receiver;

beforeAll(async () => {
  stack = await startStack({
    env: { WEBHOOK_ALLOW_HTTP: 'true', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' },
  });
  keys = await stack.createAccount();
  receiver = await startReceiver();
});

afterAll(async () => {
  await receiver?.close();
  await stack?.stop();
});

const withKey = (extra: Record<string, string> = {}) =>
  cliEnv(stack, { MCS_API_KEY: keys.secret_key, ...extra });

describe('mcs login and credentials', () => {
  it('saves the key and base URL with mode 0600, and later commands use them', async () => {
    const home = configHome();
    const env = cliEnv(stack, { XDG_CONFIG_HOME: home, MCS_BASE_URL: '' });
    const run = await runCli(['login', '--api-key', keys.secret_key, '--base-url', stack.baseUrl], env);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('test mode');
    expect(run.stdout).not.toContain(keys.secret_key);
    const file = join(home, 'mcs', 'config.json');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(join(home, 'mcs')).mode & 0o777).toBe(0o700);
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({
      api_key: keys.secret_key,
      base_url: stack.baseUrl,
    });

    // No flag, no environment: the saved key and URL.
    const list = jsonOf(await runCli(['webhooks', 'list', '--json'], env));
    expect(list).toMatchObject({ object: 'list', url: '/v1/webhooks' });

    // The environment wins over the file, a flag over both.
    const badEnv = await runCli(['events', 'list'], { ...env, MCS_API_KEY: 'sk_test_notakey' });
    expect(badEnv.code).toBe(1);
    expect(badEnv.stderr).toMatch(/code api_key_invalid.*HTTP 401, Request-Id req_/);
    const flagWins = await runCli(['events', 'list', '--api-key', keys.secret_key], {
      ...env,
      MCS_API_KEY: 'sk_test_notakey',
    });
    expect(flagWins.code).toBe(0);

    // A key read from stdin, checked before it is saved.
    const piped = await runCli(['login', '--json'], env, `${keys.secret_key}\n`);
    expect(jsonOf(piped)).toMatchObject({ base_url: stack.baseUrl, livemode: false });
    const refused = await runCli(['login', '--api-key', 'sk_test_wrong'], env);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/Request-Id req_/);
    expect(JSON.parse(readFileSync(file, 'utf8')).api_key).toBe(keys.secret_key);

    // A config file that cannot be read: commands say to log in again, and logging in mends it.
    writeFileSync(file, 'nope');
    expect((await runCli(['events', 'list'], env)).stderr).toContain('run mcs login again');
    const mended = await runCli(['login', '--api-key', keys.secret_key, '--base-url', stack.baseUrl], env);
    expect(mended.code, mended.stderr).toBe(0);
    expect(JSON.parse(readFileSync(file, 'utf8')).api_key).toBe(keys.secret_key);

    const out = await runCli(['logout'], env);
    expect(out.code).toBe(0);
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({ base_url: stack.baseUrl });
    const none = await runCli(['events', 'list'], env);
    expect(none).toMatchObject({ code: 1, stdout: '' });
    expect(none.stderr).toBe('no API key: run `mcs login`, pass --api-key, or set MCS_API_KEY\n');
  });

  it('says when the API cannot be reached', async () => {
    const run = await runCli(['events', 'list'], withKey({ MCS_BASE_URL: 'http://127.0.0.1:9' }));
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^cannot reach the API at http:\/\/127\.0\.0\.1:9 .*is the stack running/);
  });
});

describe('mcs trigger', () => {
  it.each(TRIGGER_TYPES)('%s makes the real event fire', async (type) => {
    const out = jsonOf(await runCli(['trigger', type, '--json'], withKey()));
    expect(out.type).toBe(type);
    expect(out.event).toMatchObject({ object: 'event', type, livemode: false });
    // The event is in the account's log, about a resource the trigger created.
    const got = await stack.api(keys.secret_key, 'GET', `/v1/events/${out.event.id}`);
    expect(got.status).toBe(200);
    expect(got.json.type).toBe(type);
    expect(Object.values(out.resources)).toContain(got.json.data.id);
  });

  it('fires a new event each time', async () => {
    for (const type of ['conversation.created', 'message.received'] as const) {
      const a = jsonOf(await runCli(['trigger', type, '--json'], withKey()));
      const b = jsonOf(await runCli(['trigger', type, '--json'], withKey()));
      expect(b.event.id, type).not.toBe(a.event.id);
      expect(new Date(b.event.created_at).getTime(), type).toBeGreaterThan(
        new Date(a.event.created_at).getTime(),
      );
    }
  });

  it('refuses unknown types and live keys', async () => {
    const unknown = await runCli(['trigger', 'order.deleted'], withKey());
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('unknown event type "order.deleted"');
    const live = await runCli(['trigger', 'order.created'], withKey({ MCS_API_KEY: keys.live_secret_key }));
    expect(live.code).toBe(1);
    expect(live.stderr).toContain('test mode only');
  });

  it('prints a readable summary by default', async () => {
    const run = await runCli(['trigger', 'product.created'], withKey());
    expect(run.code).toBe(0);
    expect(run.stderr).toBe(''); // no spinner on a pipe
    expect(run.stdout).toMatch(/^Triggered product\.created\nevent\s+evt_\w+ \(/);
    expect(run.stdout).toMatch(/product\s+prod_\w+/);
  });
});

describe('mcs events', () => {
  it('lists as a table and as JSON, gets one, and reports a missing one with code and Request-Id', async () => {
    const fired = jsonOf(await runCli(['trigger', 'order.created', '--json'], withKey()));
    const table = await runCli(['events', 'list', '--type', 'order.created', '--limit', '5'], withKey());
    expect(table.code).toBe(0);
    const lines = table.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^ID\s+TYPE\s+DATA\s+CREATED$/);
    expect(lines[1]).toMatch(
      new RegExp(`^${fired.event.id}\\s+order\\.created\\s+order ord_\\w+\\s+\\d{4}-`),
    );

    // The hint to the next page keeps the query's filters.
    await runCli(['trigger', 'order.created', '--json'], withKey());
    const page = await runCli(['events', 'list', '--type', 'order.created', '--limit', '1'], withKey());
    expect(page.stdout).toMatch(
      /more: mcs events list --type order\.created --limit 1 --starting-after evt_\w+\n$/,
    );

    const list = jsonOf(await runCli(['events', 'list', '--json', '--limit', '2'], withKey()));
    expect(list).toMatchObject({ object: 'list', url: '/v1/events' });
    expect(list.data).toHaveLength(2);

    const one = jsonOf(await runCli(['events', 'get', fired.event.id, '--json'], withKey()));
    expect(one).toEqual(fired.event);
    const human = await runCli(['events', 'get', fired.event.id], withKey());
    expect(human.stdout).toContain(`"object": "order"`);

    const missing = await runCli(['events', 'get', 'evt_missing'], withKey());
    expect(missing.code).toBe(1);
    expect(missing.stdout).toBe('');
    expect(missing.stderr).toMatch(
      /^.+\(code resource_missing, (param id, )?HTTP 404, Request-Id req_[\w-]+\)\n$/,
    );
    const missingJson = await runCli(['events', 'get', 'evt_missing', '--json'], withKey());
    const err = JSON.parse(missingJson.stderr);
    expect(err).toMatchObject({ error: { type: 'not_found_error', code: 'resource_missing' }, status: 404 });
    expect(err.request_id).toMatch(/^req_/);

    const bad = await runCli(['events', 'list', '--limit', '500'], withKey());
    expect(bad.stderr).toContain('--limit must be a whole number from 1 to 100');
  });
});

describe('mcs events resend', () => {
  it('delivers an event again to each endpoint, or to one, and says what it made', async () => {
    const r = await startReceiver();
    try {
      const a = jsonOf(
        await runCli(
          ['webhooks', 'create', '--url', `${r.url}/a`, '--events', 'payment.failed', '--json'],
          withKey(),
        ),
      );
      const b = jsonOf(
        await runCli(
          ['webhooks', 'create', '--url', `${r.url}/b`, '--events', 'payment.failed', '--json'],
          withKey(),
        ),
      );
      const fired = jsonOf(await runCli(['trigger', 'payment.failed', '--json'], withKey()));
      await r.waitFor(2);

      const all = jsonOf(await runCli(['events', 'resend', fired.event.id, '--json'], withKey()));
      expect(all.data.map((d: { webhook_endpoint: string }) => d.webhook_endpoint).sort()).toEqual(
        [a.id, b.id].sort(),
      );
      for (const d of all.data)
        expect(d).toMatchObject({ object: 'webhook_delivery', event: fired.event.id });
      await r.waitFor(4);

      const one = await runCli(['events', 'resend', fired.event.id, '--endpoint', b.id], withKey());
      expect(one.code).toBe(0);
      expect(one.stdout).toMatch(new RegExp(`^resent ${fired.event.id}\\nID\\s+EVENT\\s+TYPE\\s+STATUS`));
      expect(one.stdout).toMatch(new RegExp(`dlv_\\w+\\s+${fired.event.id}\\s+payment\\.failed\\s+pending`));
      const got = await r.waitFor(5);
      expect(got[4]!.path).toMatch(/\/b$/);
      expect(JSON.parse(got[4]!.body).id).toBe(fired.event.id);

      const missing = await runCli(['events', 'resend', 'evt_missing'], withKey());
      expect(missing.code).toBe(1);
      expect(missing.stderr).toMatch(/\(code resource_missing, (param id, )?HTTP 404, Request-Id req_/);
    } finally {
      await r.close();
    }
  });
});

describe('mcs webhooks', () => {
  it('creates, lists, shows deliveries, retries and re-enables', async () => {
    const made = jsonOf(
      await runCli(
        ['webhooks', 'create', '--url', `${receiver.url}/hooks`, '--events', 'product.created', '--json'],
        withKey(),
      ),
    );
    expect(made).toMatchObject({
      object: 'webhook_endpoint',
      status: 'enabled',
      events: ['product.created'],
    });
    expect(made.secret).toMatch(/^whsec_/);

    const table = await runCli(['webhooks', 'list'], withKey());
    expect(table.stdout).toMatch(/^ID\s+STATUS\s+URL\s+EVENTS\s+DESCRIPTION\s+CREATED\n/);
    expect(table.stdout).toContain(`${made.id}  enabled`);

    const before = receiver.received.length;
    jsonOf(await runCli(['trigger', 'product.created', '--json'], withKey()));
    await receiver.waitFor(before + 1);
    let deliveries: { data: Array<Record<string, unknown>> } = { data: [] };
    for (let i = 0; i < 50 && deliveries.data[0]?.status !== 'succeeded'; i++) {
      deliveries = jsonOf(await runCli(['webhooks', 'deliveries', made.id, '--json'], withKey()));
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(deliveries.data[0]).toMatchObject({ status: 'succeeded', attempt_count: 1 });
    const dlv = deliveries.data[0]!.id as string;
    const human = await runCli(['webhooks', 'deliveries', made.id], withKey());
    expect(human.stdout).toMatch(/^ID\s+EVENT\s+TYPE\s+STATUS\s+ATTEMPTS\s+LAST RESULT\s+NEXT ATTEMPT\n/);
    expect(human.stdout).toMatch(
      new RegExp(`${dlv}\\s+evt_\\w+\\s+product\\.created\\s+succeeded\\s+1\\s+HTTP 200`),
    );

    const retried = jsonOf(await runCli(['webhooks', 'retry', made.id, dlv, '--json'], withKey()));
    expect(retried.id).toBe(dlv);
    await receiver.waitFor(before + 2);

    const enabled = jsonOf(await runCli(['webhooks', 'enable', made.id, '--json'], withKey()));
    expect(enabled).toMatchObject({ id: made.id, status: 'enabled' });

    const invalid = await runCli(
      ['webhooks', 'create', '--url', 'ftp://x', '--events', 'order.created'],
      withKey(),
    );
    expect(invalid.code).toBe(1);
    expect(invalid.stderr).toMatch(/\(code invalid_url, param url, HTTP 400, Request-Id req_/);
  });

  it('says when a list goes on past --limit, with the command for the next page', async () => {
    const create = async (path: string) =>
      jsonOf(
        await runCli(
          ['webhooks', 'create', '--url', `${receiver.url}/${path}`, '--events', 'product.updated', '--json'],
          withKey(),
        ),
      );
    const first = await create('page-a');
    await create('page-b');
    const page = await runCli(['webhooks', 'list', '--limit', '1'], withKey());
    expect(page.code).toBe(0);
    expect(page.stdout).toMatch(/\nmore: mcs webhooks list --limit 1 --starting-after we_\w+\n$/);
    const whole = await runCli(['webhooks', 'list', '--limit', '100'], withKey());
    expect(whole.stdout).not.toContain('more:');
    // --json has has_more itself, and stays one document.
    expect(jsonOf(await runCli(['webhooks', 'list', '--limit', '1', '--json'], withKey())).has_more).toBe(
      true,
    );

    // Two deliveries to the first endpoint; a page of one says where the next starts, filters kept.
    jsonOf(await runCli(['trigger', 'product.updated', '--json'], withKey()));
    jsonOf(await runCli(['trigger', 'product.updated', '--json'], withKey()));
    const args = ['webhooks', 'deliveries', first.id, '--status', 'succeeded'];
    let done: { data: unknown[] } = { data: [] };
    for (let i = 0; i < 100 && done.data.length < 2; i++) {
      done = jsonOf(await runCli([...args, '--json'], withKey()));
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(done.data).toHaveLength(2);
    const deliveries = await runCli([...args, '--limit', '1'], withKey());
    expect(deliveries.stdout).toMatch(
      new RegExp(
        `\nmore: mcs webhooks deliveries ${first.id} --status succeeded --limit 1 --starting-after dlv_\\w+\n$`,
      ),
    );
    expect((await runCli(args, withKey())).stdout).not.toContain('more:');
  });
});

describe('test mode: a shorter retry schedule, and a failed delivery resent at once', () => {
  it("retries on the account's schedule, turns unhealthy after its last retry, and resends from the CLI", async () => {
    const shown = jsonOf(await runCli(['webhooks', 'retry-schedule', '--json'], withKey()));
    expect(shown).toEqual({
      object: 'webhook_settings',
      retry_schedule: ['30s', '5m', '30m', '2h', '24h'],
      custom: false,
      default_retry_schedule: ['30s', '5m', '30m', '2h', '24h'],
      livemode: false,
    });
    const set = jsonOf(await runCli(['webhooks', 'retry-schedule', '1s,2s', '--json'], withKey()));
    expect(set).toMatchObject({ retry_schedule: ['1s', '2s'], custom: true });
    const human = await runCli(['webhooks', 'retry-schedule'], withKey());
    expect(human.stdout).toMatch(/^retry schedule +1s, 2s\nwhose +the account's \(test mode\)\n/);

    // Live mode keeps the service's schedule.
    const live = await runCli(
      ['webhooks', 'retry-schedule', '1s'],
      withKey({ MCS_API_KEY: keys.live_secret_key }),
    );
    expect(live.code).toBe(1);
    expect(live.stderr).toMatch(/test mode only.*\(code test_mode_only, HTTP 403, Request-Id req_/);
    const liveShown = jsonOf(
      await runCli(['webhooks', 'retry-schedule', '--json'], withKey({ MCS_API_KEY: keys.live_secret_key })),
    );
    expect(liveShown).toMatchObject({
      custom: false,
      livemode: true,
      retry_schedule: ['30s', '5m', '30m', '2h', '24h'],
    });
    for (const bad of ['0s', '25h', 'soon', '1s,1s,1s,1s,1s,1s']) {
      const run = await runCli(['webhooks', 'retry-schedule', bad], withKey());
      expect(run.code, bad).toBe(1);
      expect(run.stderr, bad).toMatch(/code invalid_value, param retry_schedule/);
    }

    // A receiver that fails: 3 attempts about 1 s then 2 s apart, then the endpoint is unhealthy
    // (with the service's schedule the first retry alone would take 30 s).
    const failing = await startReceiver();
    failing.reply = () => ({ status: 500, body: 'down' });
    try {
      const ep = jsonOf(
        await runCli(
          ['webhooks', 'create', '--url', failing.url, '--events', 'conversation.created', '--json'],
          withKey(),
        ),
      );
      jsonOf(await runCli(['trigger', 'conversation.created', '--json'], withKey()));
      const got = await failing.waitFor(3, 20_000);
      const gaps = [got[1]!.at - got[0]!.at, got[2]!.at - got[1]!.at];
      expect(gaps[0]).toBeGreaterThanOrEqual(900);
      expect(gaps[0]).toBeLessThan(6_000);
      expect(gaps[1]).toBeGreaterThanOrEqual(1_900);
      expect(gaps[1]).toBeLessThan(8_000);
      let endpoint = (await stack.api(keys.secret_key, 'GET', `/v1/webhooks/${ep.id}`)).json;
      for (let i = 0; i < 50 && endpoint.status !== 'unhealthy'; i++) {
        await new Promise((r) => setTimeout(r, 100));
        endpoint = (await stack.api(keys.secret_key, 'GET', `/v1/webhooks/${ep.id}`)).json;
      }
      expect(endpoint.status).toBe('unhealthy');
      const [failed] = jsonOf(
        await runCli(['webhooks', 'deliveries', ep.id, '--status', 'failed', '--json'], withKey()),
      ).data;
      expect(failed).toMatchObject({ status: 'failed', attempt_count: 3 });
      await new Promise((r) => setTimeout(r, 2_500));
      expect(failing.received).toHaveLength(3); // no fourth attempt

      // The receiver is fixed: re-enable, and resend the failed delivery at once.
      failing.reply = () => ({ status: 200, body: 'ok' });
      jsonOf(await runCli(['webhooks', 'enable', ep.id, '--json'], withKey()));
      const resent = jsonOf(await runCli(['webhooks', 'retry', ep.id, failed.id, '--json'], withKey()));
      expect(resent.id).toBe(failed.id);
      await failing.waitFor(4, 10_000);
      let after = failed;
      for (let i = 0; i < 50 && after.status !== 'succeeded'; i++) {
        await new Promise((r) => setTimeout(r, 100));
        after = jsonOf(await runCli(['webhooks', 'deliveries', ep.id, '--json'], withKey())).data.find(
          (d: { id: string }) => d.id === failed.id,
        );
      }
      expect(after).toMatchObject({ status: 'succeeded', attempt_count: 4 });
    } finally {
      await failing.close();
    }

    const reset = jsonOf(await runCli(['webhooks', 'retry-schedule', '--reset', '--json'], withKey()));
    expect(reset).toMatchObject({ custom: false, retry_schedule: ['30s', '5m', '30m', '2h', '24h'] });
  });
});

describe('mcs --help', () => {
  it('answers for every command, with exit code 0', async () => {
    const all = await runCli(['--help'], cliEnv(stack));
    expect(all.code).toBe(0);
    // The default base URL follows PORT (config.ts defaultBaseUrl); 8080 is only PORT's default.
    expect(all.stdout).toContain('else http://127.0.0.1:$PORT)');
    expect(all.stdout).not.toContain('127.0.0.1:8080');
    const usages = [...all.stdout.matchAll(/^ {2}mcs ([a-z-]+(?: [a-z-]+)?)\b/gm)].map((m) => m[1]!);
    expect(usages).toEqual(
      expect.arrayContaining([
        'login',
        'trigger',
        'events list',
        'events resend',
        'webhooks deliveries',
        'keys revoke',
      ]),
    );
    // A few at a time: each is a Node start-up, and one after another they took most of a minute.
    for (let i = 0; i < usages.length; i += 4) {
      const batch = usages.slice(i, i + 4);
      const runs = await Promise.all(
        batch.map((name) => runCli([...name.split(' '), '--help'], cliEnv(stack))),
      );
      runs.forEach((run, j) => {
        expect(run.code, batch[j]).toBe(0);
        expect(run.stdout, batch[j]).toMatch(/^usage: mcs /);
        expect(run.stdout, batch[j]).not.toContain('127.0.0.1:8080');
      });
    }
  });
});
