// Proto message → REST JSON, the one rendering of every resource (docs/api.md, "Conventions"). The
// gateway renders responses with it and the webhooks service renders event payloads with it,
// so an event's `data` is byte for byte what GET returns for the same resource state.
import {
  type DescEnum,
  type DescField,
  type DescMessage,
  getOption,
  hasOption,
  isFieldSet,
  type Message,
  ScalarType,
} from '@bufbuild/protobuf';
import { FeatureSet_FieldPresence, type Timestamp, timestampDate } from '@bufbuild/protobuf/wkt';
import { api } from '@mcs/proto';

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

/** The `object` name of a resource message, or undefined for plain messages. */
export function objectName(desc: DescMessage): string | undefined {
  return hasOption(desc, api.resource) ? getOption(desc, api.resource).object : undefined;
}

export interface FieldFlags {
  required: boolean;
  internal: boolean;
  outputOnly: boolean;
  secret: boolean;
  clearable: boolean;
}

const flagsCache = new WeakMap<DescField, FieldFlags>();

/** The (mcs.api.v1.field) rules of a field, read once per descriptor (a hot path per request). */
export function fieldFlags(field: DescField): FieldFlags {
  let flags = flagsCache.get(field);
  if (!flags) {
    const rules = hasOption(field, api.field) ? getOption(field, api.field) : undefined;
    flags = {
      required: !!rules?.required,
      internal: !!rules?.internal,
      outputOnly: !!rules?.outputOnly,
      secret: !!rules?.secret,
      clearable: !!rules?.clearable,
    };
    flagsCache.set(field, flags);
  }
  return flags;
}

export function isInternal(field: DescField): boolean {
  return fieldFlags(field).internal;
}

const enumNames = new WeakMap<DescEnum, Map<number, string>>();

/** The word a client sees for an enum value: its rest_name, or its local name in lower case. */
export function enumValueName(desc: DescEnum, number: number): string | null {
  if (number === 0) return null;
  // Worked out once per enum: reading an option builds an extension container each time
  // (1 % of commerce's CPU, for every event's type name).
  let names = enumNames.get(desc);
  if (!names) {
    names = new Map();
    for (const v of desc.values) {
      names.set(
        v.number,
        hasOption(v, api.rest_name) ? getOption(v, api.rest_name) : v.localName.toLowerCase(),
      );
    }
    enumNames.set(desc, names);
  }
  return names.get(number) ?? null;
}

const cache = new WeakMap<DescMessage, RenderPlan>();
interface RenderPlan {
  object: string | undefined;
  idField: DescField | undefined;
  fields: DescField[];
}

function planOf(desc: DescMessage): RenderPlan {
  let plan = cache.get(desc);
  if (!plan) {
    const fields = desc.fields.filter((f) => !isInternal(f));
    const idField = fields.find((f) => f.name === 'id');
    plan = { object: objectName(desc), idField, fields: fields.filter((f) => f !== idField) };
    cache.set(desc, plan);
  }
  return plan;
}

/**
 * Renders a message: `id` then `object` first for resources, then every field in declaration
 * order under its proto (snake_case) name. Unset optional fields and messages render as null;
 * a oneof named `data` renders as one field `data` holding its set member.
 */
export function render(desc: DescMessage, msg: Message): JsonObject {
  const plan = planOf(desc);
  const out: JsonObject = {};
  const rec = msg as unknown as Record<string, unknown>;
  if (plan.idField) out.id = rec[plan.idField.localName] as string;
  if (plan.object) out.object = plan.object;
  let dataDone = false;
  for (const field of plan.fields) {
    if (field.oneof?.name === 'data') {
      if (dataDone) continue;
      dataDone = true;
      const sel = rec[field.oneof.localName] as { case: string | undefined; value: unknown };
      const member = field.oneof.fields.find((f) => f.localName === sel.case);
      out.data = member ? renderValue(member, sel.value) : null;
      continue;
    }
    if (field.oneof) {
      const sel = rec[field.oneof.localName] as { case: string | undefined; value: unknown };
      if (sel.case === field.localName) out[field.name] = renderValue(field, sel.value);
      continue;
    }
    if (
      field.presence !== FeatureSet_FieldPresence.IMPLICIT &&
      field.fieldKind !== 'list' &&
      field.fieldKind !== 'map'
    ) {
      if (!isFieldSet(msg, field)) {
        out[field.name] = null;
        continue;
      }
    }
    out[field.name] = renderValue(field, rec[field.localName]);
  }
  return out;
}

function renderValue(field: DescField, value: unknown): Json {
  switch (field.fieldKind) {
    case 'scalar':
      return renderScalar(field.scalar, value);
    case 'enum':
      return enumValueName(field.enum, value as number);
    case 'message':
      return renderMessageValue(field.message, value as Message | undefined);
    case 'list': {
      const list = value as unknown[];
      switch (field.listKind) {
        case 'scalar':
          return list.map((v) => renderScalar(field.scalar, v));
        case 'enum':
          return list.map((v) => enumValueName(field.enum, v as number));
        case 'message':
          return list.map((v) => renderMessageValue(field.message, v as Message));
        default: {
          const never: never = field;
          throw new Error(`unhandled list kind ${String(never)}`);
        }
      }
    }
    case 'map': {
      const out: JsonObject = {};
      for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
        switch (field.mapKind) {
          case 'scalar':
            out[k] = renderScalar(field.scalar, v);
            break;
          case 'enum':
            out[k] = enumValueName(field.enum, v as number);
            break;
          case 'message':
            out[k] = renderMessageValue(field.message, v as Message);
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

function renderMessageValue(desc: DescMessage, value: Message | undefined): Json {
  if (value === undefined) return null;
  if (desc.typeName === 'google.protobuf.Timestamp') return timestampDate(value as Timestamp).toISOString();
  return render(desc, value);
}

function renderScalar(type: ScalarType, value: unknown): Json {
  switch (type) {
    case ScalarType.INT64:
    case ScalarType.UINT64:
    case ScalarType.SINT64:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
      return Number(value);
    case ScalarType.BYTES:
      return Buffer.from(value as Uint8Array).toString('base64');
    default:
      return value as Json;
  }
}

/** A List response: a message with `repeated data` and `has_more`. */
export function isListResponse(desc: DescMessage): boolean {
  const data = desc.fields.find((f) => f.name === 'data');
  return data?.fieldKind === 'list' && desc.fields.some((f) => f.name === 'has_more');
}

/** Stripe-style list: `{object: "list", data, has_more, url}`. */
export function renderList(desc: DescMessage, msg: Message, url: string): JsonObject {
  const body = render(desc, msg);
  return { object: 'list', data: body.data ?? [], has_more: body.has_more ?? false, url };
}
