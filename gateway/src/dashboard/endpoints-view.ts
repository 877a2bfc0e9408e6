// The webhook endpoint pages' views: the list with health and the add form (Settings → API),
// and an endpoint's deliveries. Escaping as everywhere: only through `html` (views.ts).
import type { Flash } from './flash.ts';
import {
  csrfField,
  type DeliveryView,
  deliveryCard,
  type EndpointView,
  endpointPath,
  eventPath,
  eventsFieldset,
  flashBox,
  html,
  layout,
  postButton,
  type SafeHtml,
  SETTINGS,
  STATUS_LABEL,
  time,
  type Viewer,
} from './views.ts';

function healthNote(ep: EndpointView): SafeHtml {
  const detail = html`${ep.failingSince ? html`Failing since ${time(ep.failingSince)}` : ''}${
    ep.failingSince && ep.lastError ? ' · ' : ''
  }${ep.lastError ? html`Last error: <strong>${ep.lastError}</strong>` : ''}`;
  switch (ep.status) {
    case 'unhealthy':
      return html`<div class="note bad"><strong>Deliveries are stopped:</strong> every retry of a delivery
failed, so nothing is sent to this endpoint until you re-enable it. ${detail}</div>`;
    case 'disabled':
      return ep.disabledReason === 'gone'
        ? html`<div class="note bad"><strong>Disabled: the receiver answered 410 Gone.</strong> Nothing is sent
and new events are not recorded for it until you re-enable it. ${detail}</div>`
        : html`<div class="note off">Disabled: nothing is sent and new events are not recorded for it.</div>`;
    case 'enabled':
      return ep.failingSince
        ? html`<div class="note warn">Deliveries are failing and being retried. ${detail}</div>`
        : html``;
    case 'unknown':
      return html``;
    default: {
      const never: never = ep.status;
      throw new Error(`unknown endpoint status ${String(never)}`);
    }
  }
}

/** Re-enable and replay the events it missed meanwhile: failed, skipped or while disabled (a recovery). */
function recoverForm(viewer: Viewer, path: string, ep: EndpointView): SafeHtml {
  return html`<form method="post" action="${path}/recover" class="recover">${csrfField(viewer)}
<label>Replay the events it missed <select name="since">${
    ep.failingSince ? html`<option value="failing">since it began failing</option>` : ''
  }<option value="24h">in the last 24 hours</option><option value="72h">in the last 3 days</option><option value="168h">in the last 7 days</option></select></label>
<button type="submit">Re-enable and replay</button></form>`;
}

function endpointCard(viewer: Viewer, ep: EndpointView): SafeHtml {
  const path = endpointPath(ep.id);
  const canEnable = ep.status === 'unhealthy' || ep.status === 'disabled';
  return html`<article class="card endpoint ${ep.status}" id="${ep.id}" data-status="${ep.status}">
<div class="row"><span class="url">${ep.url}</span><span class="badge ${ep.status}">${STATUS_LABEL[ep.status]}${ep.disabledReason === 'gone' ? ' (410 Gone)' : ''}</span></div>
<p class="meta"><span class="mono">${ep.id}</span> · added ${time(ep.createdAt)}${
    ep.description ? html` · <span class="description">${ep.description}</span>` : ''
  }</p>
<div class="row">${ep.events.map((e) => html`<span class="chip">${e === '*' ? '* (all resource events)' : e}</span>`)}${
    ep.maxRate !== null ? html`<span class="chip">at most ${ep.maxRate}/s</span>` : ''
  }</div>
${healthNote(ep)}
<div class="actions">
${canEnable ? postButton(viewer, `${path}/enable`, 'Re-enable', 'primary') : ''}
${canEnable ? recoverForm(viewer, path, ep) : ''}
${ep.status !== 'disabled' ? postButton(viewer, `${path}/disable`, 'Disable') : ''}
${postButton(viewer, `${path}/rotate_secret`, 'Rotate secret')}
<a href="${path}">Details, chart and test event</a>
<a href="${path}/deliveries">Deliveries</a>
<details><summary>Delete…</summary>${postButton(viewer, `${path}/delete`, 'Delete this endpoint', 'danger')}</details>
</div></article>`;
}

function newEndpointForm(
  viewer: Viewer,
  eventTypes: readonly string[],
  form: Flash['form'],
  idempotencyKey: string,
) {
  const chosen = new Set(form?.events ?? []);
  return html`<form class="card" id="add-endpoint" method="post" action="${SETTINGS}/webhooks">
${csrfField(viewer)}<input type="hidden" name="idempotency_key" value="${idempotencyKey}">
<label class="field" for="url">Endpoint URL</label>
<input type="url" id="url" name="url" required placeholder="https://example.com/webhooks" value="${form?.url ?? ''}">
${eventsFieldset(eventTypes, chosen)}
<label class="field" for="description">Description <span class="meta">(optional)</span></label>
<input type="text" id="description" name="description" maxlength="500" value="${form?.description ?? ''}">
<div class="submit"><button type="submit" class="primary">Add endpoint</button></div>
</form>`;
}

export interface RetryView {
  schedule: string[];
  custom: boolean;
  defaults: string[];
}

/** The retry schedule in force; in test mode, a form that shortens it (or resets it). */
function retryCard(viewer: Viewer, r: RetryView | undefined): SafeHtml {
  if (!r) return html``;
  const now = html`<p class="meta" id="retry-schedule">After a failed first attempt, retries wait
<strong>${r.schedule.join(', ')}</strong>${r.custom ? html` (this account's test-mode schedule; the default is ${r.defaults.join(', ')})` : ' (the default)'};
the last failure turns the endpoint unhealthy.</p>`;
  if (viewer.livemode) {
    return html`<div class="card">${now}<p class="meta">Live mode always uses the service's schedule.</p></div>`;
  }
  return html`<form class="card" method="post" action="${SETTINGS}/retry_schedule" id="retry-form">${csrfField(viewer)}${now}
<label class="field" for="retry_schedule">Shorter retries while developing (1 to 5 delays, e.g. <code>2s, 10s, 1m</code>)</label>
<input type="text" id="retry_schedule" name="retry_schedule" value="${r.custom ? r.schedule.join(', ') : ''}" placeholder="2s, 10s, 1m">
<div class="actions"><button type="submit" class="primary">Save schedule</button>${
    r.custom ? html`<button type="submit" name="reset" value="true">Back to the default</button>` : ''
  }</div></form>`;
}

export function settingsPage(opts: {
  viewer: Viewer;
  endpoints: EndpointView[];
  eventTypes: readonly string[];
  flash?: Flash | undefined;
  /** Why the endpoints could not be listed, if they could not. */
  loadError?: string | undefined;
  idempotencyKey: string;
  retries?: RetryView | undefined;
}): string {
  const { viewer, endpoints } = opts;
  const list = opts.loadError
    ? html`<div class="flash error" role="alert">${opts.loadError}</div>`
    : endpoints.length === 0
      ? html`<p class="empty">No webhook endpoints yet.</p>`
      : endpoints.map((ep) => endpointCard(viewer, ep));
  const body = html`<h1>Settings → API</h1>
<p class="lead">${viewer.livemode ? 'Live' : 'Test'}-mode webhook endpoints of this account.${
    viewer.owner
      ? ' The switch at the top shows the other mode.'
      : html` Sign in with a ${viewer.livemode ? 'test' : 'live'} secret key, or with your e-mail and password, to see the other mode.`
  }</p>
${flashBox(opts.flash)}
<h2>Webhook endpoints</h2>
<p class="meta">Each event is sent as a signed HTTPS POST (<code>X-Service-Signature</code>) to every endpoint
subscribed to it. When all retries of a delivery fail, the endpoint turns unhealthy and receives nothing more
until it is re-enabled here.</p>
${list}
<h2>Retry schedule</h2>
${retryCard(viewer, opts.retries)}
<h2>Add an endpoint</h2>
${newEndpointForm(viewer, opts.eventTypes, opts.flash?.kind === 'error' ? opts.flash.form : undefined, opts.idempotencyKey)}`;
  return layout('Settings → API · mcs', body, viewer);
}

export function deliveriesPage(opts: {
  viewer: Viewer;
  endpoint: EndpointView;
  deliveries: DeliveryView[];
  /** The link to the next (older) page, if there is one. */
  older: string | undefined;
  flash?: Flash | undefined;
}): string {
  const { viewer, endpoint } = opts;
  const path = endpointPath(endpoint.id);
  const items =
    opts.deliveries.length === 0
      ? html`<p class="empty">No deliveries yet.</p>`
      : opts.deliveries.map((d) =>
          deliveryCard(
            viewer,
            d,
            html`<span class="chip">${d.eventType ?? 'event'}</span><a class="mono" href="${eventPath(d.event)}">${d.event}</a>`,
            `${path}/deliveries/${encodeURIComponent(d.id)}/retry`,
          ),
        );
  const body = html`<p><a href="${SETTINGS}">← Settings → API</a></p>
<h1>Deliveries</h1>
<p class="lead"><span class="url">${endpoint.url}</span> <span class="badge ${endpoint.status}">${STATUS_LABEL[endpoint.status]}</span>
<span class="mono meta">${endpoint.id}</span></p>
${flashBox(opts.flash)}
${items}
${opts.older ? html`<p><a href="${opts.older}">Older deliveries →</a></p>` : ''}`;
  return layout('Deliveries · mcs', body, viewer);
}
