// Events: the account's recent events (current mode) with a type filter, and each event's page:
// its payload as delivered (pretty JSON), and its deliveries per endpoint with every attempt
// (time, status, latency, response excerpt), each of which can be resent while its endpoint exists.
import { timestampDate } from '@bufbuild/protobuf/wkt';
import { renderConnectError } from '@mcs/errors';
import { EVENT_TYPES } from '@mcs/kit/outbox';
import { events as eventsProto } from '@mcs/proto';
import { enumValueName, render } from '@mcs/rest';
import { ID, type Kit, type RouteDef, send } from './context.ts';
import { deliveryView, eventTypeValue, listEndpoints } from './endpoints.ts';
import type { Flash } from './flash.ts';
import {
  csrfField,
  type DeliveryView,
  deliveryCard,
  EVENTS,
  endpointPath,
  eventPath,
  flashBox,
  html,
  layout,
  messagePage,
  time,
  type Viewer,
} from './views.ts';

const EVENT_PAGE = 25;

interface EventRow {
  id: string;
  type: string;
  createdAt: Date | null;
}

const rowOf = (e: eventsProto.Event): EventRow => ({
  id: e.id,
  type: enumValueName(eventsProto.EventTypeSchema, e.type) ?? 'unknown',
  createdAt: e.createdAt ? timestampDate(e.createdAt) : null,
});

export function eventsPage(opts: {
  viewer: Viewer;
  events: EventRow[];
  type: string;
  older: string | undefined;
  flash?: Flash | undefined;
}): string {
  const { viewer } = opts;
  const body = html`<h1>Events</h1>
<p class="lead">The ${viewer.livemode ? 'live' : 'test'}-mode events of this account, newest first, as their deliveries carry them.</p>
${flashBox(opts.flash)}
<form method="get" action="${EVENTS}" class="row" id="filter"><label for="type">Type</label>
<select id="type" name="type"><option value="">All types</option>${EVENT_TYPES.map(
    (t) => html`<option value="${t}"${t === opts.type ? ' selected' : ''}>${t}</option>`,
  )}</select><button type="submit">Filter</button></form>
<div class="card scroll"><table id="events"><thead><tr><th>Event</th><th>Type</th><th>Created</th></tr></thead><tbody>
${
  opts.events.length
    ? opts.events.map(
        (e) =>
          html`<tr class="event" data-type="${e.type}"><td><a class="mono" href="${eventPath(e.id)}">${e.id}</a></td><td><span class="chip">${e.type}</span></td><td>${time(e.createdAt)}</td></tr>`,
      )
    : html`<tr><td colspan="3" class="empty">No events${opts.type ? html` of type <code>${opts.type}</code>` : ''} yet.</td></tr>`
}</tbody></table></div>
${opts.older ? html`<p><a href="${opts.older}">Older events →</a></p>` : ''}`;
  return layout('Events · mcs', body, viewer);
}

/** One delivery of an event, with a link to its endpoint and a resend button while that exists. */
function eventDeliveryCard(viewer: Viewer, eventId: string, d: DeliveryView, endpointExists: boolean) {
  if (!endpointExists) {
    // Deleted (e.g. an ended `mcs listen` session): no page to link to, and a resend would fail.
    return deliveryCard(
      viewer,
      d,
      html`<span>to <span class="mono">${d.endpoint}</span> <span class="meta endpoint-deleted">(endpoint deleted)</span></span>`,
      null,
    );
  }
  return deliveryCard(
    viewer,
    d,
    html`<span>to <a class="mono" href="${endpointPath(d.endpoint)}">${d.endpoint}</a></span>`,
    `${eventPath(eventId)}/deliveries/${encodeURIComponent(d.endpoint)}/${encodeURIComponent(d.id)}/resend`,
  );
}

export function eventPage(opts: {
  viewer: Viewer;
  event: EventRow;
  json: string;
  deliveries: DeliveryView[];
  /** The ids of the mode's endpoints now: a delivery to any other went to a deleted one. */
  endpoints: ReadonlySet<string>;
  flash?: Flash | undefined;
}): string {
  const { viewer, event } = opts;
  const body = html`<p><a href="${EVENTS}">← Events</a></p>
<h1><span class="chip">${event.type}</span> <span class="mono">${event.id}</span></h1>
<p class="lead">Created ${time(event.createdAt)}</p>
${flashBox(opts.flash)}
<h2>Deliveries</h2>
<form method="post" action="${eventPath(event.id)}/resend" class="actions" id="resend-event">${csrfField(viewer)}
<button type="submit">Resend to every subscribed endpoint</button>
<span class="meta">A new delivery to each enabled endpoint subscribed to <code>${event.type}</code>; "Resend now" below sends one delivery again.</span></form>
${
  opts.deliveries.length
    ? opts.deliveries.map((d) => eventDeliveryCard(viewer, event.id, d, opts.endpoints.has(d.endpoint)))
    : html`<p class="empty">No endpoint was subscribed to this event when it happened.</p>`
}
<h2>Payload</h2>
<pre class="json" id="payload" tabindex="0">${opts.json}</pre>`;
  return layout(`${event.id} · mcs`, body, viewer);
}

export function eventRoutes(kit: Kit): RouteDef[] {
  const { deps } = kit;

  const list = kit.page(async (req, res, s, _params, url) => {
    const flash = kit.takeFlash(req, res, s);
    const viewer = await kit.viewerOf(s, EVENTS);
    const typeName = url.searchParams.get('type') ?? '';
    const type = eventTypeValue(typeName);
    const startingAfter = url.searchParams.get('starting_after') ?? '';
    const page = await deps.events.listEvents(
      {
        limit: EVENT_PAGE,
        startingAfter: ID.test(startingAfter) ? startingAfter : '',
        ...(type ? { type } : {}),
      },
      s.call,
    );
    const last = page.data.at(-1);
    const older =
      page.hasMore && last
        ? `${EVENTS}?${new URLSearchParams({ ...(type ? { type: typeName } : {}), starting_after: last.id })}`
        : undefined;
    send(
      res,
      200,
      eventsPage({ viewer, events: page.data.map(rowOf), type: type ? typeName : '', older, flash }),
    );
  });

  const one = kit.page(async (req, res, s, { id }) => {
    const flash = kit.takeFlash(req, res, s);
    const viewer = await kit.viewerOf(s, EVENTS);
    try {
      const [event, deliveries, endpoints] = await Promise.all([
        deps.events.getEvent({ id: id! }, s.call),
        deps.events.listEventDeliveries({ id: id! }, s.call),
        listEndpoints(deps, s),
      ]);
      const json = JSON.stringify(render(eventsProto.EventSchema, event), null, 2);
      send(
        res,
        200,
        eventPage({
          viewer,
          event: rowOf(event),
          json,
          deliveries: deliveries.data.map(deliveryView),
          endpoints: new Set(endpoints.map((e) => e.id)),
          flash,
        }),
      );
    } catch (err) {
      const rendered = renderConnectError(err, deps.docsUrl);
      if (rendered.status === 404) {
        return send(res, 404, messagePage('Not found', `This mode has no event ${id}.`, viewer));
      }
      throw err;
    }
  });

  const resend = kit.action(
    async (s, _form, { endpoint, delivery }) => {
      const d = await deps.webhooks.retryWebhookDelivery({ id: endpoint!, delivery: delivery! }, s.call);
      return { flash: { kind: 'ok', text: `Delivery ${d.id} to ${endpoint} is being sent again.` } };
    },
    'The delivery was not resent',
    ({ id }) => eventPath(id!),
  );

  const resendEvent = kit.action(
    async (s, _form, { id }) => {
      const got = await deps.events.resendEvent({ id: id! }, s.call);
      const n = got.data.length;
      return {
        flash:
          n === 0
            ? {
                kind: 'error',
                text: `No enabled endpoint subscribes to this event's type now: nothing was sent.`,
              }
            : {
                kind: 'ok',
                text: `Event ${id} is being sent again: ${n} new ${n === 1 ? 'delivery' : 'deliveries'}.`,
              },
      };
    },
    'The event was not resent',
    ({ id }) => eventPath(id!),
  );

  return [
    { method: 'GET', pattern: ['events'], handler: list },
    { method: 'POST', pattern: ['events', ':id', 'resend'], handler: resendEvent },
    { method: 'GET', pattern: ['events', ':id'], handler: one },
    {
      method: 'POST',
      pattern: ['events', ':id', 'deliveries', ':endpoint', ':delivery', 'resend'],
      handler: resend,
    },
  ];
}
