// The component schemas of the OpenAPI document (openapi.ts), derived from the proto
// descriptors: a resource as the renderer writes it (every field required, `optional` fields
// nullable), a request body's message as the decoder accepts it, list pages, and an example
// value for any schema. Messages are registered under their name on first use (`ref`); two
// messages of one name share a schema when they render alike, else the package qualifies them.
import { type DescEnum, type DescField, type DescMessage, getOption, ScalarType } from '@bufbuild/protobuf';
import { api } from '@mcs/proto';
import { enumValueName, fieldFlags, isInternal, objectName } from '@mcs/rest';
import { type FieldMeta, fieldMeta, idExample, idPattern, TIMESTAMP_EXAMPLE } from './openapi-meta.ts';

export type Schema = Record<string, unknown>;

/** `order.created` → `OrderCreated`, `commerce` → `Commerce`. */
export const pascal = (s: string) => s.replace(/(^|[._])([a-z])/g, (_, __, c: string) => c.toUpperCase());

/** The document's schemas so far, and the ways to add to them. */
export interface SchemaSet {
  /** components.schemas, in the order they were first referred to. */
  schemas: Record<string, Schema>;
  /** A reference to the schema of `desc` (its input form when `input`), registered on first use. */
  ref(desc: DescMessage, input: boolean): Schema;
  /** The schema of field `f` of `owner`, with its rules and words from openapi-meta.ts. */
  fieldSchema(owner: DescMessage, f: DescField, input: boolean): Schema;
  /** A message inside a request body, leaving out fields `skip` (path parameters). */
  inputSchema(desc: DescMessage, skip?: string[]): Schema;
  /** A reference to the page schema of list response `output`, served at `path`. */
  listSchema(output: DescMessage, path: string): Schema;
  /** A sample value of a schema, from its examples, consts and enums. */
  example(s: Schema): unknown;
}

/** `types`: the REST names of every event type (for fields that take one). */
/** A request field a caller must give: flagged in the proto, or documented so (FieldMeta.required). */
export function isRequiredInput(desc: DescMessage, f: DescField): boolean {
  return fieldFlags(f).required || fieldMeta[`${desc.name}.${f.name}`]?.required === true;
}

export function createSchemaSet(types: readonly string[]): SchemaSet {
  const schemas: Record<string, Schema> = {};
  const owners = new Map<string, string>(); // schema name → message typeName

  function nameFor(desc: DescMessage, input: boolean): string {
    let name = desc.name;
    if (input && !name.endsWith('Input')) name = `${name}Input`;
    return name;
  }

  function ref(desc: DescMessage, input: boolean): Schema {
    if (desc.typeName === 'google.protobuf.Timestamp')
      return { type: 'string', format: 'date-time', examples: [TIMESTAMP_EXAMPLE] };
    let name = nameFor(desc, input);
    if (!owners.has(name)) {
      owners.set(name, desc.typeName);
      schemas[name] = {}; // reserve first: messages may refer to themselves
      schemas[name] = input ? inputSchema(desc) : outputSchema(desc);
    } else if (owners.get(name) !== desc.typeName && schemas[name] !== undefined) {
      // Two messages of one name (commerce.Customer, messaging.Customer): share the schema when
      // they render alike, else qualify with the package.
      const twin = input ? inputSchema(desc) : outputSchema(desc);
      if (JSON.stringify(twin) !== JSON.stringify(schemas[name])) {
        const pkg = desc.typeName.split('.')[1] ?? '';
        name = `${pascal(pkg)}${name}`;
        owners.set(name, desc.typeName);
        schemas[name] = twin;
      }
    }
    return { $ref: `#/components/schemas/${name}` };
  }

  function scalar(t: ScalarType): Schema {
    switch (t) {
      case ScalarType.STRING:
        return { type: 'string' };
      case ScalarType.BOOL:
        return { type: 'boolean' };
      case ScalarType.DOUBLE:
      case ScalarType.FLOAT:
        return { type: 'number' };
      case ScalarType.BYTES:
        return { type: 'string', contentEncoding: 'base64' };
      default:
        return { type: 'integer' };
    }
  }

  const enumWords = (e: DescEnum) =>
    e.values.map((v) => enumValueName(e, v.number)).filter((v): v is string => v !== null);

  /** Applies a field's rules to its value schema (items of lists). */
  function constrain(s: Schema, meta: FieldMeta | undefined): Schema {
    if (!meta) return s;
    const out = { ...s };
    if (meta.idOf) {
      out.pattern = idPattern(meta.idOf);
      out.examples = [idExample(meta.idOf)];
    }
    for (const k of ['pattern', 'minLength', 'maxLength', 'minimum', 'maximum', 'format'] as const) {
      if (meta[k] !== undefined) out[k] = meta[k];
    }
    if (meta.eventTypes) Object.assign(out, { enum: [...types, '*'] });
    return out;
  }

  function fieldSchema(owner: DescMessage, f: DescField, input: boolean): Schema {
    const meta = fieldMeta[`${owner.name}.${f.name}`];
    let s: Schema;
    switch (f.fieldKind) {
      case 'scalar':
        s = constrain(scalar(f.scalar), meta);
        break;
      case 'enum':
        s = { type: 'string', enum: enumWords(f.enum) };
        break;
      case 'message':
        s = ref(f.message, input);
        break;
      case 'list': {
        const item =
          f.listKind === 'scalar'
            ? constrain(scalar(f.scalar), meta)
            : f.listKind === 'enum'
              ? { type: 'string', enum: enumWords(f.enum) }
              : ref(f.message, input);
        s = { type: 'array', items: item };
        if (meta?.minItems) s.minItems = meta.minItems;
        if (meta?.maxItems) s.maxItems = meta.maxItems;
        break;
      }
      case 'map':
        s = { type: 'object', additionalProperties: f.mapKind === 'message' ? ref(f.message, input) : {} };
        break;
      default:
        s = {};
    }
    // `optional` fields render as null when unset (rest/render.ts); requests leave them out.
    if (!input && f.proto.proto3Optional) {
      s = nullable(s);
      // Examples show an unset field as null unless its meta gives a value worth showing.
      if (meta?.example === undefined && !meta?.idOf) delete s.examples;
    }
    // In an update, null clears such a field (rest/decode.ts); null is refused for the others.
    const clearable = input && fieldFlags(f).clearable;
    if (clearable) s = nullable(s);
    if (meta?.description) s = withDescription(s, meta.description);
    if (clearable) s = withDescription(s, `${meta?.description ?? ''} null clears it.`.trim());
    if (meta?.example !== undefined && !s.$ref && !s.oneOf && !s.anyOf) s.examples = [meta.example];
    if (meta?.default !== undefined) s.default = meta.default;
    return s;
  }

  function nullable(s: Schema): Schema {
    if (s.$ref) return { oneOf: [s, { type: 'null' }] };
    if (typeof s.type === 'string') {
      const out: Schema = { ...s, type: [s.type, 'null'] };
      if (Array.isArray(s.enum)) out.enum = [...s.enum, null];
      return out;
    }
    return { oneOf: [s, { type: 'null' }] };
  }

  function withDescription(s: Schema, description: string): Schema {
    // A $ref's siblings are allowed in 3.1; keep them to the description.
    return { ...s, description };
  }

  /** A resource as the API renders it: every field, always present (null when unset). */
  function outputSchema(desc: DescMessage): Schema {
    const properties: Record<string, Schema> = {};
    const object = objectName(desc);
    const fields = desc.fields.filter((f) => !isInternal(f));
    const id = fields.find((f) => f.name === 'id');
    const required: string[] = [];
    if (id && object) {
      const prefix = getOption(desc, api.resource).idPrefix;
      properties.id = { type: 'string', pattern: idPattern(prefix), examples: [idExample(prefix)] };
      required.push('id');
    }
    if (object) {
      properties.object = { type: 'string', const: object, description: `Always "${object}".` };
      required.push('object');
    }
    let dataDone = false;
    for (const f of fields) {
      if (f === id && object) continue;
      if (f.oneof?.name === 'data') {
        if (dataDone) continue;
        dataDone = true;
        const members = f.oneof.fields.map((m) => ({ m, object: objectName(m.message!) }));
        const s: Schema = { oneOf: members.map(({ m }) => ref(m.message!, false)) };
        if (members.every((x) => x.object)) {
          s.discriminator = {
            propertyName: 'object',
            mapping: Object.fromEntries(
              members.map(({ m, object }) => [object, (ref(m.message!, false) as { $ref: string }).$ref]),
            ),
          };
        }
        const meta = fieldMeta[`${desc.name}.data`];
        properties.data = meta?.description ? withDescription(s, meta.description) : s;
        required.push('data');
        continue;
      }
      properties[f.name] = fieldSchema(desc, f, false);
      // Members of other oneofs render only when set.
      if (!f.oneof) required.push(f.name);
    }
    return { type: 'object', required, properties };
  }

  /** A message inside a request body: its required fields, nothing unknown. */
  function inputSchema(desc: DescMessage, skip: string[] = []): Schema {
    const fields = desc.fields.filter(
      (f) => !isInternal(f) && !fieldFlags(f).outputOnly && !skip.includes(f.name),
    );
    const required = fields.filter((f) => isRequiredInput(desc, f)).map((f) => f.name);
    return {
      type: 'object',
      additionalProperties: false,
      ...(required.length ? { required } : {}),
      properties: Object.fromEntries(fields.map((f) => [f.name, fieldSchema(desc, f, true)])),
    };
  }

  function listSchema(output: DescMessage, path: string): Schema {
    const dataField = output.fields.find((f) => f.name === 'data')!;
    const item = dataField.message!;
    const name = `${item.name}List`;
    if (!schemas[name]) {
      schemas[name] = {
        type: 'object',
        description: `A page of ${item.name} objects, newest first.`,
        required: ['object', 'data', 'has_more', 'url'],
        properties: {
          object: { type: 'string', const: 'list', description: 'Always "list".' },
          data: { type: 'array', items: ref(item, false) },
          has_more: {
            type: 'boolean',
            description: 'true when more items follow: ask again with starting_after = the last id of data.',
          },
          url: { type: 'string', description: 'The path of this list.', examples: [path] },
        },
      };
    }
    return { $ref: `#/components/schemas/${name}` };
  }

  /** A sample value of a schema, from its examples, consts and enums. */
  function example(s: Schema, depth = 0): unknown {
    if (s.$ref) return example(schemas[(s.$ref as string).split('/').at(-1)!] ?? {}, depth);
    if (Array.isArray(s.examples) && s.examples.length) return s.examples[0];
    if (s.const !== undefined) return s.const;
    if (s.default !== undefined) return s.default;
    if (Array.isArray(s.type) && s.type.includes('null')) return null;
    if (Array.isArray(s.enum)) return s.enum.find((v) => v !== null && v !== '*') ?? null;
    if (Array.isArray(s.oneOf)) {
      const options = s.oneOf as Schema[];
      const nonNull = options.filter((o) => o.type !== 'null');
      // A nullable message: show it when it is always set in practice? No: null is what clients see unset.
      if (nonNull.length < options.length && depth > 0) return null;
      return example(nonNull[0] ?? {}, depth + 1);
    }
    const type = Array.isArray(s.type) ? (s.type as string[]) : [s.type as string];
    if (type.includes('null')) return null;
    switch (type[0]) {
      case 'object': {
        const props = (s.properties ?? {}) as Record<string, Schema>;
        return Object.fromEntries(Object.entries(props).map(([k, v]) => [k, example(v, depth + 1)]));
      }
      case 'array': {
        const item = example((s.items ?? {}) as Schema, depth + 1);
        return Array.isArray(item) ? item : [item];
      }
      case 'string':
        if (s.format === 'date-time') return TIMESTAMP_EXAMPLE;
        return 'string';
      case 'integer':
        return typeof s.minimum === 'number' ? Math.max(s.minimum, 1) : 1;
      case 'number':
        return 1;
      case 'boolean':
        return true;
      default:
        return {};
    }
  }

  return { schemas, ref, fieldSchema, inputSchema, listSchema, example: (s) => example(s) };
}
