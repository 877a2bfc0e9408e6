// Endpoint health (spec 3.1): what is recorded when an endpoint turns unhealthy, for the mailer.

/** The `detail` of an `endpoint_unhealthy` notification row: the endpoint as it was then. */
export interface UnhealthyNotice {
  url: string;
  description: string | null;
  livemode: boolean;
  /** Error of the last failed attempt. */
  lastError: string | null;
  /** ISO time of the first failure without a success since. */
  failingSince: string | null;
  /** The delivery and event whose last retry failed. */
  deliveryId: string;
  eventId: string;
  attempts: number;
}

export const UNHEALTHY_KIND = 'endpoint_unhealthy';
