// Per-account webhook settings (GET/POST /v1/webhook_settings). One today: in test mode an
// account may replace the service's retry schedule with a shorter one, so a developer sees
// retries and the unhealthy transition in seconds. Live mode always keeps the service's.
// The schedule is read when a failure is recorded (delivery/record.ts): a change applies to the
// next failure of every pending delivery of the account's test mode.
import { apiError } from '@mcs/errors';
import type { Caller } from '@mcs/kit/caller';
import { parseDuration } from '@mcs/kit/config';
import type { Db, Tx } from '@mcs/kit/db';
import { eq, sql } from 'drizzle-orm';
import { accountSettings } from '../db/schema.ts';

export const MAX_RETRIES = 5;
const MIN_DELAY_MS = 1_000;
const MAX_DELAY_MS = 24 * 3_600_000;

export interface Settings {
  retrySchedule: string[];
  custom: boolean;
  defaultRetrySchedule: string[];
  livemode: boolean;
}

/** 30000 → "30s", 300000 → "5m", 1500 → "1500ms": the largest unit that divides it. */
export function formatDelay(ms: number): string {
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000}h`;
  if (ms % 60_000 === 0) return `${ms / 60_000}m`;
  if (ms % 1_000 === 0) return `${ms / 1_000}s`;
  return `${ms}ms`;
}

export function parseSchedule(list: string[]): number[] {
  const param = 'retry_schedule';
  if (list.length === 0 || list.length > MAX_RETRIES) {
    throw apiError('invalid_value', {
      param,
      message: `retry_schedule must list 1 to ${MAX_RETRIES} delays (e.g. ["5s", "30s"]), or send reset: true.`,
    });
  }
  return list.map((text, i) => {
    let ms: number;
    try {
      ms = parseDuration(text);
    } catch {
      throw apiError('invalid_value', {
        param: `${param}[${i}]`,
        message: `"${text}" is not a delay: use a number and one of ms, s, m, h (e.g. "30s").`,
      });
    }
    if (ms < MIN_DELAY_MS || ms > MAX_DELAY_MS) {
      throw apiError('invalid_value', {
        param: `${param}[${i}]`,
        message: `Each retry delay must be from 1s to 24h, not "${text}".`,
      });
    }
    return ms;
  });
}

function settingsOf(caller: Caller, own: number[] | null, service: number[]): Settings {
  return {
    retrySchedule: (own ?? service).map(formatDelay),
    custom: own !== null,
    defaultRetrySchedule: service.map(formatDelay),
    livemode: caller.livemode,
  };
}

export async function getSettings(tx: Tx, caller: Caller, service: number[]): Promise<Settings> {
  if (caller.livemode) return settingsOf(caller, null, service);
  const [row] = await tx
    .select({ ms: accountSettings.retryScheduleMs })
    .from(accountSettings)
    .where(eq(accountSettings.accountId, caller.accountId));
  return settingsOf(caller, row?.ms ?? null, service);
}

export async function updateSettings(
  tx: Tx,
  caller: Caller,
  input: { retrySchedule: string[]; reset?: boolean | undefined },
  service: number[],
  now = new Date(),
): Promise<Settings> {
  if (caller.livemode) {
    throw apiError('test_mode_only', {
      message: "The retry schedule can be changed in test mode only; live mode keeps the service's.",
    });
  }
  if (input.reset === true) {
    if (input.retrySchedule.length > 0) {
      throw apiError('invalid_value', {
        param: 'reset',
        message: 'Send either retry_schedule or reset: true, not both.',
      });
    }
    await tx.delete(accountSettings).where(eq(accountSettings.accountId, caller.accountId));
    return settingsOf(caller, null, service);
  }
  if (input.retrySchedule.length === 0) {
    throw apiError('missing_required_field', {
      param: 'retry_schedule',
      message: 'Missing required parameter: retry_schedule (1 to 5 delays), or send reset: true.',
    });
  }
  const ms = parseSchedule(input.retrySchedule);
  await tx
    .insert(accountSettings)
    .values({ accountId: caller.accountId, retryScheduleMs: ms, updatedAt: now })
    .onConflictDoUpdate({ target: accountSettings.accountId, set: { retryScheduleMs: ms, updatedAt: now } });
  return settingsOf(caller, ms, service);
}

/** The schedule of a test-mode delivery's account, if it has one of its own; else null. */
export async function ownScheduleOf(db: Db | Tx, deliveryId: string): Promise<number[] | null> {
  const { rows } = await db.execute<{ ms: number[] }>(sql`
    select s.retry_schedule_ms as ms
      from webhooks.deliveries d join webhooks.account_settings s on s.account_id = d.account_id
     where d.id = ${deliveryId} and not d.livemode`);
  return rows[0]?.ms ?? null;
}
