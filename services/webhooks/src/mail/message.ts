// The e-mails an account gets about its endpoints: turned unhealthy (spec 3.1), disabled by a
// 410 Gone answer, and the early warning that one has been failing for a while.
import {
  FAILING_KIND,
  GONE_KIND,
  type NoticeKind,
  UNHEALTHY_KIND,
  type UnhealthyNotice,
} from '../domain/health.ts';
import type { MailMessage } from './transport.ts';

// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const BREAKS = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]+/g;

/**
 * A value from the account (an endpoint's URL and description) or from its receiver (the last
 * error) on one line: line breaks and other control characters become one space. Otherwise a
 * description could add lines of its own to an e-mail that comes from us — a forged paragraph
 * ("your account is suspended, sign in at …") under our sender and subject — and anyone with a
 * secret key of the account writes descriptions.
 */
export function oneLine(value: string): string {
  return value.replace(BREAKS, ' ');
}

/** What every endpoint e-mail is made from. */
interface NoticeMail {
  notificationId: string;
  endpointId: string;
  notice: UnhealthyNotice;
  from: string;
  to: string;
}

function mail(opts: NoticeMail, subject: string, lines: string[]): MailMessage {
  return {
    messageId: `<${opts.notificationId}@mcs.webhooks>`,
    from: opts.from,
    to: opts.to,
    subject: oneLine(subject),
    text: `${lines.join('\n')}\n`,
  };
}

function unhealthyMessage(opts: NoticeMail): MailMessage {
  const { endpointId, notice } = opts;
  const lines = [
    'Hello,',
    '',
    `we have stopped sending events to your webhook endpoint ${endpointId}: every attempt to`,
    'deliver an event to it failed, including the last retry, so it is now marked unhealthy.',
    '',
    ...details(endpointId, notice),
    '',
    'Until it is re-enabled the endpoint receives nothing. Events that happen meanwhile are kept',
    'and listed as skipped deliveries; you can resend them once it works again.',
    '',
    'To re-enable it, once the receiver answers 2xx again:',
    '  - in the dashboard: Settings → API, then "Enable" next to the endpoint, or',
    `  - with the API:     POST /v1/webhooks/${endpointId}/enable (with a secret key)`,
    '',
    `Its deliveries and every attempt: GET /v1/webhooks/${endpointId}/deliveries`,
    '',
    '— mcs notifications',
  ];
  return mail(opts, `Webhook endpoint ${endpointId} is unhealthy (${notice.url})`, lines);
}

/** The endpoint answered 410 Gone and was disabled at once. */
function goneMessage(opts: NoticeMail): MailMessage {
  const { endpointId, notice } = opts;
  const lines = [
    'Hello,',
    '',
    `your webhook endpoint ${endpointId} answered "410 Gone", which says the receiver no longer`,
    'exists, so we have disabled it at once: it receives nothing until you enable it again.',
    '',
    ...details(endpointId, notice),
    '',
    'Events that happen meanwhile are not sent to it. If the 410 was a mistake, fix the receiver,',
    'then enable the endpoint again:',
    '  - in the dashboard: Settings → API, then "Re-enable" next to the endpoint, or',
    `  - with the API:     POST /v1/webhooks/${endpointId}/enable (with a secret key)`,
    '',
    `To have 410 answers retried like other failures instead: POST /v1/webhooks/${endpointId}`,
    'with {"disable_on_gone": false}.',
    '',
    '— mcs notifications',
  ];
  return mail(opts, `Webhook endpoint ${endpointId} was disabled: 410 Gone (${notice.url})`, lines);
}

/** The early warning: deliveries to the endpoint have been failing for a while. */
function failingMessage(opts: NoticeMail): MailMessage {
  const { endpointId, notice } = opts;
  const lines = [
    'Hello,',
    '',
    `deliveries to your webhook endpoint ${endpointId} have been failing for a while. We keep`,
    'retrying them, but if the last retry of a delivery fails too, the endpoint turns unhealthy',
    'and receives nothing until it is re-enabled.',
    '',
    ...details(endpointId, notice),
    '',
    `Its deliveries and every attempt: GET /v1/webhooks/${endpointId}/deliveries`,
    '(or Settings → API → Deliveries in the dashboard).',
    '',
    'This is the only warning for this stretch of failures; a successful delivery ends it.',
    '',
    '— mcs notifications',
  ];
  return mail(opts, `Webhook endpoint ${endpointId} is failing (${notice.url})`, lines);
}

function details(endpointId: string, notice: UnhealthyNotice): string[] {
  return [
    `  Endpoint:       ${endpointId}`,
    `  URL:            ${oneLine(notice.url)}`,
    ...(notice.description ? [`  Description:    ${oneLine(notice.description)}`] : []),
    `  Mode:           ${notice.livemode ? 'live' : 'test'}`,
    `  Failing since:  ${notice.failingSince ?? 'unknown'}`,
    `  Last error:     ${oneLine(notice.lastError ?? 'unknown')}`,
    `  Last delivery:  ${notice.deliveryId} (event ${notice.eventId}, ${notice.attempts} attempts)`,
  ];
}

/** The message of a notification row of `kind`. */
export function messageFor(kind: NoticeKind, opts: NoticeMail): MailMessage {
  switch (kind) {
    case UNHEALTHY_KIND:
      return unhealthyMessage(opts);
    case GONE_KIND:
      return goneMessage(opts);
    case FAILING_KIND:
      return failingMessage(opts);
    default: {
      const never: never = kind;
      throw new Error(`unknown notification kind ${String(never)}`);
    }
  }
}
