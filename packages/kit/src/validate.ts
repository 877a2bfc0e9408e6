// Input rules shared by several services. Each failure is the catalog error naming the param.
import { apiError } from '@mcs/errors';
import { ISO_4217 } from './currencies.ts';

const E164 = /^\+[1-9]\d{7,14}$/;

/**
 * Characters as people (and JSON Schema's maxLength) count them: Unicode code points, so an emoji
 * is one, not the two UTF-16 units of `String.length`.
 */
export function characters(v: string): number {
  let n = v.length;
  for (let i = 0; i < v.length; i++) {
    const c = v.charCodeAt(i);
    // A high surrogate followed by a low one is one code point.
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < v.length) {
      const next = v.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        n--;
        i++;
      }
    }
  }
  return n;
}

function checkLength(v: string, param: string, max: number): void {
  // Code points are never more than UTF-16 units: count them only when the units exceed max.
  if (v.length > max && characters(v) > max)
    throw apiError('invalid_value', { param, message: `${param} must be at most ${max} characters.` });
}

export function requireText(value: string | undefined, param: string, max = 500): string {
  if (value === undefined)
    throw apiError('missing_required_field', { param, message: `Missing required parameter: ${param}.` });
  const v = value.trim();
  if (v === '') throw apiError('missing_required_field', { param, message: `${param} must not be empty.` });
  checkLength(v, param, max);
  return v;
}

export function optionalText(value: string | undefined, param: string, max = 500): string | undefined {
  if (value === undefined) return undefined;
  checkLength(value, param, max);
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
