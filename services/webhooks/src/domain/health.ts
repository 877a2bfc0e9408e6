// Endpoint health (spec 3.1 and beyond): what is recorded for the mailer when an endpoint turns
// unhealthy, is disabled by a 410 Gone answer, or has been failing for a while (the early
// warning). Each kind is written once per transition, in the transaction that makes it.

/** The `detail` of a notification row: the endpoint as it was then, and the attempt concerned. */
export interface UnhealthyNotice {
  url: string;
  description: string | null;
  livemode: boolean;
  /** Error of the last failed attempt. */
  lastError: string | null;
  /** ISO time of the first failure without a success since. */
  failingSince: string | null;
  /** The delivery and event whose attempt made the transition. */
  deliveryId: string;
  eventId: string;
  attempts: number;
}
export type EndpointNotice = UnhealthyNotice;

/** The last retry of a delivery failed: the endpoint turned unhealthy. */
export const UNHEALTHY_KIND = 'endpoint_unhealthy';
/** The receiver answered 410 Gone: the endpoint was disabled at once (disabled_reason "gone"). */
export const GONE_KIND = 'endpoint_gone';
/** Early warning: failing for WEBHOOK_WARN_AFTER, or half the retries of a delivery spent. */
export const FAILING_KIND = 'endpoint_failing';

export type NoticeKind = typeof UNHEALTHY_KIND | typeof GONE_KIND | typeof FAILING_KIND;

export const isNoticeKind = (kind: string): kind is NoticeKind =>
  kind === UNHEALTHY_KIND || kind === GONE_KIND || kind === FAILING_KIND;

/**
 * Whether the failure of attempt `run` of a delivery's schedule has spent at least half of its
 * retries (`retries` = the schedule's length; attempt 1 is not a retry): with the default five,
 * the failure of the third retry (attempt 4).
 */
export function halfRetriesSpent(run: number, retries: number): boolean {
  return run - 1 >= Math.ceil(retries / 2);
}

/**
 * How far a Retry-After may push a delivery of attempt `run` (ms): what the retry schedule has
 * left from here, so a hostile value cannot park deliveries beyond the schedule's span.
 */
export function remainingSpanMs(run: number, schedule: readonly number[]): number {
  let sum = 0;
  for (let i = run - 1; i < schedule.length; i++) sum += schedule[i] ?? 0;
  return sum;
}
