// REST JSON → proto message init, the inverse of render.ts, for request bodies, path and query
// parameters. Strict: unknown names, wrong JSON types and unknown enum words are refused with the
// offending parameter named, so a handler only ever sees well-typed input.
import { type DescField, type DescMessage, ScalarType } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { ErrorCode } from '@mcs/errors';
import { enumValueName, fieldFlags, isInternal } from './render.ts';

export class DecodeError extends Error {
  readonly code: ErrorCode;
  readonly param: string | undefined;
  constructor(code: ErrorCode, param: string | undefined, message: string) {
    super(message);
    this.code = code;
    this.param = param;
  }
}

const isRequired = (field: DescField) => fieldFlags(field).required;
const isClearable = (field: DescField) => fieldFlags(field).clearable;
const isOutputOnly = (field: DescField) => fieldFlags(field).outputOnly;

const join = (prefix: string, name: string) => (prefix ? `${prefix}.${name}` : name);

export interface DecodeOptions {
  /**
   * The body of an update (POST or PATCH to a resource's path): an absent field stays as it is,
   * null clears a clearable field and is refused for any other. Elsewhere null is as absent.
   */
  update?: boolean;
}

/** Checks a parsed JSON value against `desc` and returns the init object for `create(desc, …)`. */
export function decodeObject(
  desc: DescMessage,
  value: unknown,
  path = '',
  opts: DecodeOptions = {},
): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new DecodeError(
      'invalid_type',
      path || undefined,
      `${path || 'The request body'} must be a JSON object.`,
    );
  }
  const input = value as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(input)) {
    const field = desc.fields.find((f) => f.name === key);
    if (!field || isInternal(field) || isOutputOnly(field)) {
      throw new DecodeError('unknown_parameter', join(path, key), `Unknown parameter: ${join(path, key)}.`);
    }
  }
  for (const field of desc.fields) {
    const param = join(path, field.name);
    const raw = input[field.name];
    if (raw === undefined || raw === null) {
      if (isRequired(field)) {
        throw new DecodeError('missing_required_field', param, `Missing required parameter: ${param}.`);
      }
      if (raw === null && opts.update) {
        if (!isClearable(field)) {
          throw new DecodeError(
            'invalid_type',
            param,
            `${param} cannot be null: leave it out to keep its value.`,
          );
        }
        out[field.localName] = zeroOf(field);
      }
      continue;
    }
    // A list reaches the service as [] whether absent or empty: in an update, where absent
    // means "unchanged", an empty one would be silently ignored.
    if (opts.update && field.fieldKind === 'list' && Array.isArray(raw) && raw.length === 0) {
      throw new DecodeError('invalid_value', param, `${param} must not be empty.`);
    }
    const decoded = decodeField(field, raw, param);
    if (field.oneof) out[field.oneof.localName] = { case: field.localName, value: decoded };
    else out[field.localName] = decoded;
  }
  return out;
}

/** What a clearable field holds once cleared: the zero value of its scalar type. */
function zeroOf(field: DescField): unknown {
  if (field.fieldKind !== 'scalar') throw new Error(`${field.toString()}: only scalar fields are clearable`);
  if (field.scalar === ScalarType.STRING) return '';
  if (field.scalar === ScalarType.BOOL) return false;
  return INT64.includes(field.scalar) ? 0n : 0;
}

function decodeField(field: DescField, raw: unknown, param: string): unknown {
  switch (field.fieldKind) {
    case 'scalar':
      return decodeScalar(field.scalar, raw, param);
    case 'enum':
      return decodeEnum(field, raw, param);
    case 'message':
      return decodeMessageValue(field.message, raw, param);
    case 'list': {
      if (!Array.isArray(raw)) throw new DecodeError('invalid_type', param, `${param} must be an array.`);
      return raw.map((item, i) => {
        const p = `${param}[${i}]`;
        switch (field.listKind) {
          case 'scalar':
            return decodeScalar(field.scalar, item, p);
          case 'enum':
            return decodeEnum(field, item, p);
          case 'message':
            return decodeMessageValue(field.message, item, p);
          default: {
            const never: never = field;
            throw new Error(`unhandled list kind ${String(never)}`);
          }
        }
      });
    }
    case 'map': {
      if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
        throw new DecodeError('invalid_type', param, `${param} must be an object.`);
      }
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(raw)) {
        const p = `${param}.${k}`;
        switch (field.mapKind) {
          case 'scalar':
            out[k] = decodeScalar(field.scalar, v, p);
            break;
          case 'enum':
            out[k] = decodeEnum(field, v, p);
            break;
          case 'message':
            out[k] = decodeMessageValue(field.message, v, p);
            break;
          default: {
            const never: never = field;
            throw new Error(`unhandled map kind ${String(never)}`);
          }
        }
      }
      return out;
    }
    default: {
      const never: never = field;
      throw new Error(`unhandled field kind ${String(never)}`);
    }
  }
}

function decodeEnum(
  field: DescField & { enum: NonNullable<DescField['enum']> },
  raw: unknown,
  param: string,
): number {
  const words = field.enum.values.map((v) => enumValueName(field.enum, v.number)).filter((w) => w !== null);
  const value = field.enum.values.find((v) => v.number !== 0 && enumValueName(field.enum, v.number) === raw);
  if (typeof raw !== 'string' || !value) {
    throw new DecodeError('invalid_value', param, `${param} must be one of: ${words.join(', ')}.`);
  }
  return value.number;
}

function decodeMessageValue(desc: DescMessage, raw: unknown, param: string): unknown {
  if (desc.typeName === 'google.protobuf.Timestamp') {
    const ms = typeof raw === 'string' ? parseTimestamp(raw) : null;
    if (ms === null) {
      throw new DecodeError(
        'invalid_type',
        param,
        `${param} must be an ISO 8601 date and time, e.g. 2026-11-29T14:00:00Z.`,
      );
    }
    if (ms < 0)
      throw new DecodeError('invalid_value', param, `${param} must be 1970-01-01T00:00:00Z or later.`);
    return timestampFromDate(new Date(ms));
  }
  return decodeObject(desc, raw, param);
}

/**
 * ISO 8601 in its extended format: a date (midnight UTC), or a date and a time to the minute,
 * second or fraction, with `Z`, an offset (`+02:00`, `+0200`, `+02`) or none (UTC). RFC 3339's
 * date-time, which the document names, is one of these.
 */
const ISO_8601 =
  /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?(?:([Zz])|([+-])(\d{2})(?::?(\d{2}))?)?)?$/;

/**
 * Milliseconds since 1970 of an ISO 8601 date or date and time (ISO_8601), or null for anything
 * else: `Date.parse` alone takes other shapes ("Nov 29 2026"), rolls impossible dates over
 * (February 30th) and reads a time without offset in the server's zone.
 */
export function parseTimestamp(raw: string): number | null {
  const m = ISO_8601.exec(raw);
  if (!m) return null;
  const [, y, mo, d, h = '0', mi = '0', sec = '0', frac = '', , sign, offH = '0', offM = '0'] = m;
  const [year, month, day, hour, minute, second] = [y, mo, d, h, mi, sec].map(Number) as number[];
  const date = new Date(0);
  date.setUTCFullYear(year!, month! - 1, day!);
  const calendar =
    date.getUTCFullYear() === year && date.getUTCMonth() === month! - 1 && date.getUTCDate() === day;
  if (!calendar || hour! > 23 || minute! > 59 || second! > 59 || Number(offH) > 23 || Number(offM) > 59) {
    return null;
  }
  const offset = (sign === '-' ? -1 : 1) * (Number(offH) * 60 + Number(offM)) * 60_000;
  const millis = Number(`${frac}000`.slice(0, 3));
  return date.getTime() + ((hour! * 60 + minute!) * 60 + second!) * 1000 + millis - (sign ? offset : 0);
}

const INT32 = [ScalarType.INT32, ScalarType.SINT32, ScalarType.SFIXED32];
const UINT32 = [ScalarType.UINT32, ScalarType.FIXED32];
const INT64 = [
  ScalarType.INT64,
  ScalarType.SINT64,
  ScalarType.SFIXED64,
  ScalarType.UINT64,
  ScalarType.FIXED64,
];

function decodeScalar(type: ScalarType, raw: unknown, param: string): unknown {
  switch (type) {
    case ScalarType.STRING:
      if (typeof raw !== 'string') throw new DecodeError('invalid_type', param, `${param} must be a string.`);
      // PostgreSQL text cannot hold NUL, and no field of ours has a use for it.
      if (raw.includes('\u0000'))
        throw new DecodeError('invalid_value', param, `${param} must not contain NUL characters.`);
      // A lone surrogate (JSON's "\ud800" alone) is no character: stored, it would become U+FFFD.
      if (!raw.isWellFormed())
        throw new DecodeError(
          'invalid_value',
          param,
          `${param} must be Unicode text: it has a lone surrogate (\\ud800–\\udfff without its pair).`,
        );
      return raw;
    case ScalarType.BOOL:
      if (typeof raw !== 'boolean')
        throw new DecodeError('invalid_type', param, `${param} must be a boolean.`);
      return raw;
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      if (typeof raw !== 'number') throw new DecodeError('invalid_type', param, `${param} must be a number.`);
      return raw;
    case ScalarType.BYTES:
      throw new DecodeError('unknown_parameter', param, `${param} cannot be set.`);
    default: {
      if (typeof raw !== 'number' || !Number.isInteger(raw)) {
        throw new DecodeError('invalid_type', param, `${param} must be an integer.`);
      }
      const [min, max] = INT32.includes(type)
        ? [-(2 ** 31), 2 ** 31 - 1]
        : UINT32.includes(type)
          ? [0, 2 ** 32 - 1]
          : INT64.includes(type)
            ? [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER]
            : [0, 0];
      // Beyond what the wire type holds: the field's own range (a service's) is narrower still,
      // so name no bounds here.
      if (raw < min || raw > max) {
        throw new DecodeError('invalid_value', param, `${param} is too ${raw > max ? 'large' : 'small'}.`);
      }
      return INT64.includes(type) ? BigInt(raw) : raw;
    }
  }
}

/**
 * Query and path parameters arrive as strings: coerce each to the JSON type its field wants,
 * then decode as a body would be.
 */
export function decodeParams(desc: DescMessage, params: Record<string, string>): Record<string, unknown> {
  const json: Record<string, unknown> = {};
  for (const [key, text] of Object.entries(params)) {
    const field = desc.fields.find((f) => f.name === key);
    if (field?.fieldKind === 'scalar') {
      if (field.scalar === ScalarType.STRING) json[key] = text;
      else if (field.scalar === ScalarType.BOOL)
        json[key] = text === 'true' ? true : text === 'false' ? false : text;
      else json[key] = /^-?\d+(\.\d+)?$/.test(text) ? Number(text) : text;
    } else {
      json[key] = text;
    }
  }
  return decodeObject(desc, json);
}
