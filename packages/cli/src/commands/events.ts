// mcs events list | get | resend: the account's event log (GET /v1/events) and resending an
// event to its endpoints (POST /v1/events/{id}/resend).
import { limitOf, type Parsed, str, usageError } from '../args.ts';
import type { Command } from '../context.ts';
import { fields, table, when } from '../output.ts';
import { TRIGGER_TYPES } from './trigger.ts';
import { DELIVERY_HEADERS, deliveryRows } from './webhooks.ts';

const subjectOf = (data: { object?: string; id?: string } | undefined) =>
  data ? `${data.object ?? '?'} ${data.id ?? ''}`.trim() : '-';

const eventsList: Command = {
  name: 'events list',
  usage: 'mcs events list [--type TYPE] [--limit N] [--starting-after EVENT_ID]',
  summary: "Lists the account's events, newest first.",
  options: {
    type: {
      type: 'string',
      description: `TYPE: only events of this type (e.g. ${TRIGGER_TYPES.slice(0, 3).join(', ')})`,
    },
    limit: { type: 'string', description: 'N: how many (1–100, default 10)' },
    'starting-after': { type: 'string', description: 'EVENT_ID: the page after this event' },
  },
  api: true,
  async run(ctx, p: Parsed) {
    const api = await ctx.api();
    const list = await ctx.progress('Fetching events', () =>
      api.get('/v1/events', {
        type: str(p, 'type'),
        limit: limitOf(p, this),
        starting_after: str(p, 'starting-after'),
      }),
    );
    ctx.print(list, () => {
      const rows = (list.data as Array<Record<string, never>>).map((e) => [
        e.id,
        e.type,
        subjectOf(e.data),
        when(e.created_at),
      ]);
      // The same query, the next page: the filters go along.
      const same = [
        str(p, 'type') && `--type ${str(p, 'type')}`,
        str(p, 'limit') && `--limit ${str(p, 'limit')}`,
      ]
        .filter(Boolean)
        .join(' ');
      const more = list.has_more
        ? `more: mcs events list ${same ? `${same} ` : ''}--starting-after ${list.data.at(-1)?.id}\n`
        : '';
      return table(['id', 'type', 'data', 'created'], rows) + more;
    });
    return 0;
  },
};

const eventsGet: Command = {
  name: 'events get',
  usage: 'mcs events get EVENT_ID',
  summary: 'Shows one event: its envelope and, pretty-printed, its data.',
  options: {},
  positionals: [{ name: 'EVENT_ID', description: 'the event (evt_…)' }],
  api: true,
  async run(ctx, p) {
    const api = await ctx.api();
    const id = p.positionals[0]!;
    const event = await ctx.progress('Fetching the event', () =>
      api.get(`/v1/events/${encodeURIComponent(id)}`),
    );
    ctx.print(
      event,
      () =>
        `${fields([
          ['id', event.id],
          ['type', event.type],
          ['created', when(event.created_at)],
          ['livemode', event.livemode],
        ])}data\n${JSON.stringify(event.data, null, 2)}\n`,
    );
    return 0;
  },
};

const eventsResend: Command = {
  name: 'events resend',
  usage: 'mcs events resend EVENT_ID [--endpoint ENDPOINT_ID]',
  summary: 'Delivers an event again now: a new delivery to each endpoint it went to, or to one endpoint.',
  options: { endpoint: { type: 'string', description: 'ENDPOINT_ID: only to this endpoint (we_…)' } },
  positionals: [{ name: 'EVENT_ID', description: 'the event (evt_…)' }],
  api: true,
  details: 'To send one failed delivery again at once instead: mcs webhooks retry ENDPOINT_ID DELIVERY_ID.',
  async run(ctx, p) {
    const api = await ctx.api();
    const id = p.positionals[0]!;
    const endpoint = str(p, 'endpoint');
    if (endpoint === '') throw usageError('--endpoint needs an endpoint id', this);
    const answer = await ctx.progress('Resending', () =>
      api.post(`/v1/events/${encodeURIComponent(id)}/resend`, endpoint ? { endpoint } : {}),
    );
    ctx.print(answer, () => {
      const list = Array.isArray(answer?.data)
        ? answer.data
        : answer?.object === 'webhook_delivery'
          ? [answer]
          : null;
      if (list) return `resent ${id}\n${table(DELIVERY_HEADERS, deliveryRows(list))}`;
      return `resent ${id}\n${JSON.stringify(answer, null, 2)}\n`;
    });
    return 0;
  },
};

export const EVENT_COMMANDS: Command[] = [eventsList, eventsGet, eventsResend];
