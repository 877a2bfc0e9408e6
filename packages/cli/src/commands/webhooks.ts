// mcs webhooks list | create | enable | deliveries | retry: webhook endpoints and what was
// delivered to them.
import { limitOf, type Parsed, required, str, usageError } from '../args.ts';
import type { Command } from '../context.ts';
import { fields, table, when } from '../output.ts';

export const DELIVERY_HEADERS = ['id', 'event', 'type', 'status', 'attempts', 'last result', 'next attempt'];

// biome-ignore lint/suspicious/noExplicitAny: rows of API JSON
export function deliveryRows(list: any[]): Array<Array<string | number | null>> {
  return list.map((d) => {
    const last = Array.isArray(d.attempts) ? d.attempts.at(-1) : undefined;
    const result = last ? (last.status_code !== null ? `HTTP ${last.status_code}` : last.error) : null;
    return [d.id, d.event, d.event_type, d.status, d.attempt_count, result, when(d.next_attempt_at)];
  });
}

const endpointPath = (id: string) => `/v1/webhooks/${encodeURIComponent(id)}`;

/**
 * Under a table whose list has more (`has_more`): the command for the next page, the query's
 * filters kept, as `mcs events list` prints it. A table that stops at --limit silently reads
 * as all there is.
 */
// biome-ignore lint/suspicious/noExplicitAny: a list as the API renders it
function moreLine(list: any, command: string, p: Parsed, filters: string[]): string {
  if (!list.has_more) return '';
  const same = [command, ...filters.map((f) => str(p, f) && `--${f} ${str(p, f)}`)].filter(Boolean);
  return `more: ${same.join(' ')} --starting-after ${list.data.at(-1)?.id}\n`;
}

// biome-ignore lint/suspicious/noExplicitAny: an endpoint as the API renders it
function endpointFields(e: any): string {
  return fields([
    ['id', e.id],
    ['url', e.url],
    ['events', (e.events as string[]).join(', ')],
    ['status', e.status],
    ['description', e.description],
    ['failing since', e.failing_since ? when(e.failing_since) : null],
    ['last error', e.last_error],
    ['livemode', e.livemode],
    ['created', when(e.created_at)],
  ]);
}

const webhooksList: Command = {
  name: 'webhooks list',
  usage: 'mcs webhooks list [--limit N] [--starting-after ENDPOINT_ID]',
  summary: "Lists the account's webhook endpoints with their status.",
  options: {
    limit: { type: 'string', description: 'N: how many (1–100, default 10)' },
    'starting-after': { type: 'string', description: 'ENDPOINT_ID: the page after this endpoint' },
  },
  api: true,
  async run(ctx, p: Parsed) {
    const api = await ctx.api();
    const list = await ctx.progress('Fetching endpoints', () =>
      api.get('/v1/webhooks', { limit: limitOf(p, this), starting_after: str(p, 'starting-after') }),
    );
    ctx.print(list, () => {
      // biome-ignore lint/suspicious/noExplicitAny: API JSON
      const rows = list.data.map((e: any) => [
        e.id,
        e.status,
        e.url,
        e.events.join(','),
        e.description,
        when(e.created_at),
      ]);
      return (
        table(['id', 'status', 'url', 'events', 'description', 'created'], rows) +
        moreLine(list, 'mcs webhooks list', p, ['limit'])
      );
    });
    return 0;
  },
};

const webhooksCreate: Command = {
  name: 'webhooks create',
  usage: 'mcs webhooks create --url URL --events TYPE[,TYPE…] [--description TEXT]',
  summary: 'Creates a webhook endpoint and prints it with its signing secret (shown once).',
  options: {
    url: { type: 'string', description: 'URL: where deliveries go (https://…)' },
    events: { type: 'string', description: 'TYPES: event types, comma separated, or "*" for all' },
    description: { type: 'string', description: 'TEXT: a label for the endpoint' },
  },
  api: true,
  async run(ctx, p) {
    const url = required(p, 'url', this);
    const events = required(p, 'events', this)
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    if (events.length === 0) throw usageError('--events needs at least one event type', this);
    const description = str(p, 'description');
    const api = await ctx.api();
    const endpoint = await ctx.progress('Creating the endpoint', () =>
      api.post('/v1/webhooks', { url, events, ...(description !== undefined ? { description } : {}) }),
    );
    ctx.print(
      endpoint,
      () =>
        `${endpointFields(endpoint)}${'secret'.padEnd(13)}  ${endpoint.secret}\n` +
        'Keep the secret: it verifies the signature of every delivery, and is not shown again.\n',
    );
    return 0;
  },
};

const webhooksEnable: Command = {
  name: 'webhooks enable',
  usage: 'mcs webhooks enable ENDPOINT_ID',
  summary: 'Re-enables an unhealthy or disabled endpoint: new events are delivered to it again.',
  options: {},
  positionals: [{ name: 'ENDPOINT_ID', description: 'the endpoint (we_…)' }],
  api: true,
  async run(ctx, p) {
    const api = await ctx.api();
    const endpoint = await ctx.progress('Enabling', () =>
      api.post(`${endpointPath(p.positionals[0]!)}/enable`),
    );
    ctx.print(endpoint, () => endpointFields(endpoint));
    return 0;
  },
};

const webhooksDeliveries: Command = {
  name: 'webhooks deliveries',
  usage: 'mcs webhooks deliveries ENDPOINT_ID [--status STATUS] [--limit N] [--starting-after DELIVERY_ID]',
  summary: 'Lists the deliveries to an endpoint, newest first, with the result of their last attempt.',
  options: {
    status: { type: 'string', description: 'STATUS: only pending, succeeded, failed or skipped ones' },
    limit: { type: 'string', description: 'N: how many (1–100, default 10)' },
    'starting-after': { type: 'string', description: 'DELIVERY_ID: the page after this delivery' },
  },
  positionals: [{ name: 'ENDPOINT_ID', description: 'the endpoint (we_…)' }],
  api: true,
  details: 'With --json every attempt is printed too (time, status, latency, response excerpt).',
  async run(ctx, p) {
    const api = await ctx.api();
    const list = await ctx.progress('Fetching deliveries', () =>
      api.get(`${endpointPath(p.positionals[0]!)}/deliveries`, {
        status: str(p, 'status'),
        limit: limitOf(p, this),
        starting_after: str(p, 'starting-after'),
      }),
    );
    ctx.print(
      list,
      () =>
        table(DELIVERY_HEADERS, deliveryRows(list.data)) +
        moreLine(list, `mcs webhooks deliveries ${p.positionals[0]}`, p, ['status', 'limit']),
    );
    return 0;
  },
};

const webhooksRetry: Command = {
  name: 'webhooks retry',
  usage: 'mcs webhooks retry ENDPOINT_ID DELIVERY_ID',
  summary: 'Sends one delivery again now; a failed or skipped one starts the retry schedule over.',
  options: {},
  positionals: [
    { name: 'ENDPOINT_ID', description: 'the endpoint (we_…)' },
    { name: 'DELIVERY_ID', description: 'the delivery (dlv_…), from mcs webhooks deliveries' },
  ],
  api: true,
  async run(ctx, p) {
    const api = await ctx.api();
    const [endpoint, delivery] = p.positionals as [string, string];
    const d = await ctx.progress('Retrying', () =>
      api.post(`${endpointPath(endpoint)}/deliveries/${encodeURIComponent(delivery)}/retry`),
    );
    ctx.print(d, () => table(DELIVERY_HEADERS, deliveryRows([d])));
    return 0;
  },
};

export const WEBHOOK_COMMANDS: Command[] = [
  webhooksList,
  webhooksCreate,
  webhooksEnable,
  webhooksDeliveries,
  webhooksRetry,
];
