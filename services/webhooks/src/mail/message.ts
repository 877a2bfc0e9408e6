// The e-mail an account gets when one of its endpoints turns unhealthy (spec 3.1).
import type { UnhealthyNotice } from '../domain/health.ts';
import type { MailMessage } from './transport.ts';

export function unhealthyMessage(opts: {
  notificationId: string;
  endpointId: string;
  notice: UnhealthyNotice;
  from: string;
  to: string;
}): MailMessage {
  const { endpointId, notice } = opts;
  const lines = [
    'Hello,',
    '',
    `we have stopped sending events to your webhook endpoint ${endpointId}: every attempt to`,
    'deliver an event to it failed, including the last retry, so it is now marked unhealthy.',
    '',
    `  Endpoint:       ${endpointId}`,
    `  URL:            ${notice.url}`,
    ...(notice.description ? [`  Description:    ${notice.description}`] : []),
    `  Mode:           ${notice.livemode ? 'live' : 'test'}`,
    `  Failing since:  ${notice.failingSince ?? 'unknown'}`,
    `  Last error:     ${notice.lastError ?? 'unknown'}`,
    `  Last delivery:  ${notice.deliveryId} (event ${notice.eventId}, ${notice.attempts} attempts)`,
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
  return {
    messageId: `<${opts.notificationId}@mcs.webhooks>`,
    from: opts.from,
    to: opts.to,
    subject: `Webhook endpoint ${endpointId} is unhealthy (${notice.url})`,
    text: `${lines.join('\n')}\n`,
  };
}
