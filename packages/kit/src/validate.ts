// Input rules shared by several services. Each failure is the catalog error naming the param.
import { apiError } from '@mcs/errors';
import { ISO_4217 } from './currencies.ts';

const E164 = /^\+[1-9]\d{7,14}$/;

export function requireText(value: string | undefined, param: string, max = 500): string {
  const v = value?.trim() ?? '';
  if (v === '')
    throw apiError('missing_required_field', { param, message: `Missing required parameter: ${param}.` });
  if (v.length > max)
    throw apiError('invalid_value', { param, message: `${param} must be at most ${max} characters.` });
  return v;
}

export function optionalText(value: string | undefined, param: string, max = 500): string | undefined {
  if (value === undefined) return undefined;
  if (value.length > max)
    throw apiError('invalid_value', { param, message: `${param} must be at most ${max} characters.` });
  return value;
}

export function requirePhone(value: string | undefined, param: string): string {
  const v = requireText(value, param, 32);
  if (!E164.test(v)) throw apiError('invalid_phone', { param });
  return v;
}

/** An ISO 4217 code in circulation; every value that is not one is `invalid_currency` (`ZZZ`, `eur`, `EURO`). */
export function requireCurrency(value: string | undefined, param: string): string {
  if (value === undefined || value.trim() === '')
    throw apiError('missing_required_field', { param, message: `Missing required parameter: ${param}.` });
  if (!ISO_4217.has(value)) {
    const shown = value.length > 8 ? `${value.slice(0, 8)}…` : value;
    throw apiError('invalid_currency', {
      param,
      message: `${JSON.stringify(shown)} is not an ISO 4217 currency code; give three upper-case letters such as "EUR".`,
    });
  }
  return value;
}

/** A positive integer (quantities) or a non-negative one (amounts), at most `max`. */
export function requireInteger(
  value: number | undefined,
  param: string,
  { min, max }: { min: number; max: number },
): number {
  if (value === undefined)
    throw apiError('missing_required_field', { param, message: `Missing required parameter: ${param}.` });
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw apiError('invalid_value', { param, message: `${param} must be an integer from ${min} to ${max}.` });
  }
  return value;
}
