// Webhook endpoints: the list with their health and the add form (Settings → API), each
// endpoint's page (24-hour success chart, latency percentiles, test event, editing events and
// description), its deliveries, and every change (enable, recover, disable, delete, rotate, resend).
import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { type Timestamp, timestampDate, timestampFromDate } from '@bufbuild/protobuf/wkt';
import { apiError, renderConnectError } from '@mcs/errors';
import { EVENT_TYPES } from '@mcs/kit/outbox';
import { events, webhooks } from '@mcs/proto';
import { enumValueName } from '@mcs/rest';
import { fingerprint } from '../idempotency.ts';
import {
  callOptions,
  type DashboardDeps,
  ID,
  type Kit,
  type RouteDef,
  type SignedIn,
  send,
} from './context.ts';
import { endpointPage, type StatsView } from './endpoint-page.ts';
import { deliveriesPage, type RetryView, settingsPage } from './endpoints-view.ts';
import {
  type DeliveryStatus,
  type DeliveryView,
  type EndpointStatus,
  type EndpointView,
  endpointPath,
  messagePage,
  SETTINGS,
  type Viewer,
} from './views.ts';

/** How far back "Re-enable and replay" may reach besides "since it began failing". */
const RECOVER_HOURS: Record<string, number> = { '24h': 24, '72h': 72, '168h': 168 };
const FORM_IDEMPOTENCY_KEY = /^dash_[A-Za-z0-9_-]{22}$/;
const ENDPOINT_PAGE = 100;
const ENDPOINT_PAGES_MAX = 10;
const DELIVERY_PAGE = 20;
/** Characters of the add form (url + description) a failed attempt fills in again. */
const MAX_REFILL = 1_500;

// Status words exactly as the REST API renders them (the enums' REST names).
const endpointStatus = (s: webhooks.EndpointStatus) =>
  (enumValueName(webhooks.EndpointStatusSchema, s) ?? 'unknown') as EndpointStatus;
const deliveryStatus = (s: webhooks.DeliveryStatus) =>
  (enumValueName(webhooks.DeliveryStatusSchema, s) ?? 'unknown') as DeliveryStatus;

export const dateOf = (t: Timestamp | undefined) => (t ? timestampDate(t) : null);

export function endpointView(ep: webhooks.WebhookEndpoint): EndpointView {
  return {
    id: ep.id,
    url: ep.url,
    events: ep.events,
    description: ep.description ?? null,
    status: endpointStatus(ep.status),
    disabledReason:
      ep.disabledReason === undefined
        ? null
        : enumValueName(webhooks.DisabledReasonSchema, ep.disabledReason),
    failingSince: dateOf(ep.failingSince),
    lastError: ep.lastError ?? null,
    maxRate: ep.maxRate ?? null,
    createdAt: dateOf(ep.createdAt),
  };
}

export function deliveryView(d: webhooks.WebhookDelivery): DeliveryView {
  return {
    id: d.id,
    endpoint: d.webhookEndpoint,
    event: d.event,
    eventType: enumValueName(events.EventTypeSchema, d.eventType),
    status: deliveryStatus(d.status),
    attemptCount: d.attemptCount,
    nextAttemptAt: dateOf(d.nextAttemptAt),
    createdAt: dateOf(d.createdAt),
    attempts: d.attempts.map((a) => ({
      number: a.number,
      at: dateOf(a.at),
      statusCode: a.statusCode ?? null,
      error: a.error ?? null,
      latencyMs: a.latencyMs,
      responseExcerpt: a.responseExcerpt ?? null,
    })),
  };
}

/** An event type's proto value from its name (e.g. order.created), or undefined. */
export function eventTypeValue(name: string): events.EventType | undefined {
  for (const v of events.EventTypeSchema.values) {
    if (v.number !== 0 && enumValueName(events.EventTypeSchema, v.number) === name) return v.number;
  }
  return undefined;
}

/** Every endpoint of the signed-in mode. */
export async function listEndpoints(deps: DashboardDeps, s: SignedIn): Promise<EndpointView[]> {
  const out: EndpointView[] = [];
  let startingAfter = '';
  for (let i = 0; i < ENDPOINT_PAGES_MAX; i++) {
    const page = await deps.webhooks.listWebhookEndpoints({ limit: ENDPOINT_PAGE, startingAfter }, s.call);
    out.push(...page.data.map(endpointView));
    if (!page.hasMore || page.data.length === 0) break;
    startingAfter = page.data.at(-1)!.id;
  }
  return out;
}

export function endpointRoutes(kit: Kit): RouteDef[] {
  const { deps, explain } = kit;

  /** A failed load of an endpoint's page: 404 for another account's (or no) endpoint. */
  function loadFailed(res: ServerResponse, err: unknown, s: SignedIn, viewer: Viewer, what: string) {
    const rendered = renderConnectError(err, deps.docsUrl);
    if (rendered.status === 404) {
      return send(res, 404, messagePage('Not found', 'This account has no such webhook endpoint.', viewer));
    }
    send(
      res,
      rendered.status >= 500 ? 503 : rendered.status,
      messagePage(
        `${what} unavailable`,
        explain(err, s.requestId, `The ${what.toLowerCase()} could not be loaded`),
        viewer,
      ),
    );
  }

  const settings = kit.page(async (req, res, s) => {
    const flash = kit.takeFlash(req, res, s);
    const viewer = await kit.viewerOf(s, SETTINGS);
    let endpoints: EndpointView[] = [];
    let retries: RetryView | undefined;
    let loadError: string | undefined;
    let status = 200;
    try {
      const [list, settings] = await Promise.all([
        listEndpoints(deps, s),
        deps.settings.getWebhookSettings({}, s.call).catch(() => undefined), // shown when it answers
      ]);
      endpoints = list;
      if (settings) {
        retries = {
          schedule: settings.retrySchedule,
          custom: settings.custom,
          defaults: settings.defaultRetrySchedule,
        };
      }
    } catch (err) {
      loadError = explain(err, s.requestId, 'The webhook endpoints could not be loaded');
      status = 503;
    }
    const idempotencyKey = `dash_${randomBytes(16).toString('base64url')}`;
    send(
      res,
      status,
      settingsPage({ viewer, endpoints, eventTypes: EVENT_TYPES, flash, loadError, idempotencyKey, retries }),
    );
  });

  const endpoint = kit.page(async (req, res, s, params) => {
    const flash = kit.takeFlash(req, res, s);
    const viewer = await kit.viewerOf(s, SETTINGS);
    try {
      const [ep, stats] = await Promise.all([
        deps.webhooks.getWebhookEndpoint({ id: params.id! }, s.call),
        deps.webhooks.getWebhookEndpointStats({ id: params.id! }, s.call),
      ]);
      const view: StatsView = {
        buckets: stats.buckets.map((b) => ({
          start: dateOf(b.start) ?? new Date(0),
          succeeded: b.succeeded,
          failed: b.failed,
        })),
        p50: stats.p50Ms,
        p90: stats.p90Ms,
        p99: stats.p99Ms,
        attempts: stats.attempts,
      };
      send(
        res,
        200,
        endpointPage({ viewer, endpoint: endpointView(ep), stats: view, eventTypes: EVENT_TYPES, flash }),
      );
    } catch (err) {
      loadFailed(res, err, s, viewer, 'Endpoint');
    }
  });

  const deliveries = kit.page(async (req, res, s, params, url) => {
    const flash = kit.takeFlash(req, res, s);
    const viewer = await kit.viewerOf(s, SETTINGS);
    const startingAfter = url.searchParams.get('starting_after') ?? '';
    try {
      const [ep, list] = await Promise.all([
        deps.webhooks.getWebhookEndpoint({ id: params.id! }, s.call),
        deps.webhooks.listWebhookDeliveries(
          {
            id: params.id!,
            limit: DELIVERY_PAGE,
            startingAfter: ID.test(startingAfter) ? startingAfter : '',
          },
          s.call,
        ),
      ]);
      const last = list.data.at(-1);
      const older =
        list.hasMore && last
          ? `${endpointPath(ep.id)}/deliveries?starting_after=${encodeURIComponent(last.id)}`
          : undefined;
      send(
        res,
        200,
        deliveriesPage({
          viewer,
          endpoint: endpointView(ep),
          deliveries: list.data.map(deliveryView),
          older,
          flash,
        }),
      );
    } catch (err) {
      loadFailed(res, err, s, viewer, 'Deliveries');
    }
  });

  const createEndpoint = kit.action(async (s, form) => {
    const url = (form.get('url') ?? '').trim();
    const chosen = form.getAll('events');
    const description = (form.get('description') ?? '').trim();
    const key = form.get('idempotency_key') ?? '';
    const input = { url, events: chosen, ...(description ? { description } : {}) };
    // The form's own idempotency key: a double submit adds one endpoint, not two.
    const idempotency = FORM_IDEMPOTENCY_KEY.test(key)
      ? { key, fingerprint: fingerprint('POST', '/dashboard/endpoints', input) }
      : undefined;
    try {
      const ep = await deps.webhooks.createWebhookEndpoint(
        input,
        callOptions(s.session, s.requestId, idempotency),
      );
      return {
        flash: {
          kind: 'ok',
          text: `Endpoint ${ep.url} added.`,
          ...(ep.secret ? { secret: { endpoint: ep.id, value: ep.secret } } : {}),
        },
      };
    } catch (err) {
      return {
        flash: {
          kind: 'error',
          text: explain(err, s.requestId, 'The endpoint was not added'),
          // Browsers drop cookies over 4 KiB: a huge form is not filled again.
          ...(url.length + description.length <= MAX_REFILL
            ? { form: { url, events: chosen.slice(0, 20), description } }
            : {}),
        },
      };
    }
  }, 'The endpoint was not added');

  const update = kit.action(
    async (s, form, { id }) => {
      const chosen = form.getAll('events');
      const description = (form.get('description') ?? '').trim();
      if (chosen.length === 0) {
        return { flash: { kind: 'error', text: 'The endpoint was not saved: choose at least one event.' } };
      }
      const ep = await deps.webhooks.updateWebhookEndpoint({ id: id!, events: chosen, description }, s.call);
      return { flash: { kind: 'ok', text: `Endpoint ${ep.url} saved: ${ep.events.join(', ')}.` } };
    },
    'The endpoint was not saved',
    ({ id }) => endpointPath(id!),
  );

  const sendTest = kit.action(
    async (s, form, { id }) => {
      const type = eventTypeValue(form.get('type') ?? '');
      const d = await deps.webhooks.sendTestWebhook({ id: id!, ...(type ? { type } : {}) }, s.call);
      return {
        flash: {
          kind: 'ok',
          text: `Test event ${d.event} (${enumValueName(events.EventTypeSchema, d.eventType) ?? 'event'}) is on its way: delivery ${d.id}.`,
        },
        to: `${endpointPath(id!)}/deliveries`,
      };
    },
    'The test event was not sent',
    ({ id }) => endpointPath(id!),
  );

  const enable = kit.action(async (s, _form, { id }) => {
    const ep = await deps.webhooks.enableWebhookEndpoint({ id: id! }, s.call);
    return { flash: { kind: 'ok', text: `Endpoint ${ep.url} re-enabled: new events are sent to it again.` } };
  }, 'The endpoint was not re-enabled');

  /**
   * Re-enable and replay: a recovery of the events it missed (failed, skipped, or arrived while it
   * was disabled) since the endpoint began failing (a minute before, so the delivery whose failure began it is included) or since a
   * chosen number of hours. Its progress: GET /v1/webhooks/{id}/recoveries/{recovery}.
   */
  const recover = kit.action(async (s, form, { id }) => {
    const choice = form.get('since') ?? '';
    const now = Date.now();
    let since: Date;
    if (choice === 'failing') {
      const ep = await deps.webhooks.getWebhookEndpoint({ id: id! }, s.call);
      const began = dateOf(ep.failingSince);
      since = new Date(began ? began.getTime() - 60_000 : now - 24 * 3_600_000);
    } else {
      const hours = RECOVER_HOURS[choice];
      if (!hours)
        throw apiError('invalid_value', { param: 'since', message: 'Choose how far back to replay.' });
      since = new Date(now - hours * 3_600_000);
    }
    const r = await deps.webhooks.recoverWebhookEndpoint(
      { id: id!, since: timestampFromDate(since) },
      s.call,
    );
    return {
      flash: {
        kind: 'ok',
        text: `Endpoint re-enabled: ${r.total} missed ${r.total === 1 ? 'event is' : 'events are'} being sent (failed, skipped or while disabled; recovery ${r.id}; progress: GET /v1/webhooks/${id}/recoveries/${r.id}).`,
      },
    };
  }, 'The endpoint was not recovered');

  const disable = kit.action(async (s, _form, { id }) => {
    const ep = await deps.webhooks.updateWebhookEndpoint({ id: id!, disabled: true }, s.call);
    return { flash: { kind: 'ok', text: `Endpoint ${ep.url} disabled.` } };
  }, 'The endpoint was not disabled');

  const remove = kit.action(async (s, _form, { id }) => {
    const gone = await deps.webhooks.deleteWebhookEndpoint({ id: id! }, s.call);
    return { flash: { kind: 'ok', text: `Endpoint ${gone.id} deleted.` } };
  }, 'The endpoint was not deleted');

  const rotate = kit.action(async (s, _form, { id }) => {
    const ep = await deps.webhooks.rotateWebhookEndpointSecret({ id: id! }, s.call);
    return {
      flash: {
        kind: 'ok',
        text: `New signing secret for ${ep.url}: the old one no longer signs.`,
        ...(ep.secret ? { secret: { endpoint: ep.id, value: ep.secret } } : {}),
      },
    };
  }, 'The secret was not rotated');

  const resend = kit.action(
    async (s, _form, { id, delivery }) => {
      const d = await deps.webhooks.retryWebhookDelivery({ id: id!, delivery: delivery! }, s.call);
      return { flash: { kind: 'ok', text: `Delivery ${d.id} is being sent again.` } };
    },
    'The delivery was not resent',
    ({ id }) => `${endpointPath(id!)}/deliveries`,
  );

  const retrySchedule = kit.action(async (s, form) => {
    const reset = form.get('reset') === 'true';
    const schedule = (form.get('retry_schedule') ?? '')
      .split(/[\s,]+/)
      .filter(Boolean)
      .slice(0, 10);
    const got = await deps.settings.updateWebhookSettings(
      reset ? { reset: true } : { retrySchedule: schedule },
      s.call,
    );
    return {
      flash: {
        kind: 'ok',
        text: `Retries ${reset ? 'are back on the default schedule' : 'now wait'}: ${got.retrySchedule.join(', ')}.`,
      },
    };
  }, 'The retry schedule was not saved');

  const W = ['settings', 'api', 'webhooks'];
  return [
    { method: 'GET', pattern: ['settings', 'api'], handler: settings },
    { method: 'POST', pattern: ['settings', 'api', 'retry_schedule'], handler: retrySchedule },
    { method: 'POST', pattern: W, handler: createEndpoint },
    { method: 'GET', pattern: [...W, ':id'], handler: endpoint },
    { method: 'POST', pattern: [...W, ':id'], handler: update },
    { method: 'POST', pattern: [...W, ':id', 'test'], handler: sendTest },
    { method: 'POST', pattern: [...W, ':id', 'enable'], handler: enable },
    { method: 'POST', pattern: [...W, ':id', 'recover'], handler: recover },
    { method: 'POST', pattern: [...W, ':id', 'disable'], handler: disable },
    { method: 'POST', pattern: [...W, ':id', 'delete'], handler: remove },
    { method: 'POST', pattern: [...W, ':id', 'rotate_secret'], handler: rotate },
    { method: 'GET', pattern: [...W, ':id', 'deliveries'], handler: deliveries },
    { method: 'POST', pattern: [...W, ':id', 'deliveries', ':delivery', 'retry'], handler: resend },
  ];
}
